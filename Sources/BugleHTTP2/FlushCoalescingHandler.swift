import NIOCore

/// Turns every `flush` that reaches it within one event-loop tick into a single flush at the end of the
/// tick.
///
/// Placed between the TLS handler and the HTTP/2 handler, it lets the requests of many concurrent streams
/// (each of which flushes on its own) leave in shared TLS records and one `write` call instead of one
/// record and one system call per request. Order is unchanged; only the moment of the flush moves, by at
/// most one tick of the loop.
final class FlushCoalescingHandler: ChannelOutboundHandler {
    typealias OutboundIn = Any

    private var flushScheduled = false

    init() {}

    func flush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = loopBound.value
            handler.flushScheduled = false
            context.flush()
        }
    }
}
