import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One established HTTP/2 connection: the TCP channel and the dispatcher that runs its requests as streams.
public final class HTTP2Connection: Sendable {
    /// Pool-wide connection id.
    let id: Int
    let channel: any Channel
    private let dispatcher: NIOLoopBound<HTTP2RequestDispatcher>

    init(id: Int, channel: any Channel, dispatcher: HTTP2RequestDispatcher) {
        self.id = id
        self.channel = channel
        self.dispatcher = NIOLoopBound(dispatcher, eventLoop: channel.eventLoop)
    }

    /// Sends one request on a new stream.
    /// - Parameters:
    ///   - headers: Request headers.
    ///   - body: Request body.
    ///   - deadline: Per-request deadline.
    /// - Returns: The answer, or a failed future with an ``HTTP2TransportError``.
    public func execute(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline) -> EventLoopFuture<HTTP2Response> {
        let loop = channel.eventLoop
        let promise = loop.makePromise(of: HTTP2Response.self)
        if loop.inEventLoop {
            dispatcher.value.send(headers: headers, body: body, deadline: deadline, promise: promise)
        } else {
            let dispatcher = self.dispatcher
            loop.execute {
                dispatcher.value.send(headers: headers, body: body, deadline: deadline, promise: promise)
            }
        }
        return promise.futureResult
    }

    /// Closes the connection.
    func close() {
        channel.close(promise: nil)
    }
}
