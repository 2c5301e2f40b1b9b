import NIOCore

/// What a proxy tunnel handler (``HTTPConnectTunnelHandler``, ``SOCKS5TunnelHandler``) keeps until its tunnel is up:
/// the proxy's deadline, and writes made before the tunnel opened (none are expected: the handlers behind start on
/// `channelActive`, which the tunnel handler holds back).
///
/// A class, not a struct: opening and failing call into the pipeline, which calls back into the handler (a write as
/// the channel becomes active, `handlerRemoved` as it closes), and a struct property would still be under exclusive
/// access then.
final class TunnelGate {
    /// The proxy's deadline, while it runs.
    var timer: Scheduled<Void>?
    private var held: [(NIOAny, EventLoopPromise<Void>?)] = []

    private var isOpen = false
    private var hasFailed = false

    /// Writes through once the tunnel is open; keeps the write for then before.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if isOpen {
            context.write(data, promise: promise)
        } else {
            held.append((data, promise))
        }
    }

    /// Flushes once the tunnel is open.
    func flush(context: ChannelHandlerContext) {
        if isOpen { context.flush() }
    }

    /// Cancels the deadline.
    func disarm() {
        timer?.cancel()
        timer = nil
    }

    /// The tunnel is up: the deadline is off, the handlers behind see the channel become active (TLS to the provider
    /// begins inside the tunnel), the held writes go out, `rest` (bytes that came after the proxy's answer) is passed
    /// on, and the tunnel handler at `context` leaves the pipeline.
    func open(context: ChannelHandlerContext, rest: ByteBuffer?) {
        disarm()
        isOpen = true
        let writes = held
        held = []
        context.fireChannelActive()
        for (data, promise) in writes { context.write(data, promise: promise) }
        if !writes.isEmpty { context.flush() }
        if let rest, rest.readableBytes > 0 { context.fireChannelRead(NIOAny(rest)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// Fails the connection, once: the deadline is off, `error` goes to the handlers behind, and the channel closes.
    func fail(context: ChannelHandlerContext, _ error: HTTPProxyError) {
        guard !hasFailed else { return }
        hasFailed = true
        disarm()
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    /// The handler is gone: the deadline is off and held writes fail.
    func discard() {
        disarm()
        let writes = held
        held = []
        for (_, promise) in writes { promise?.fail(ChannelError.ioOnClosedChannel) }
    }
}
