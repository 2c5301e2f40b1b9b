import NIOCore

/// One established HTTP/2 connection: the TCP channel and the session that runs its requests as streams.
public final class HTTP2Connection: Sendable {
    /// Pool-wide connection id.
    let id: Int
    let channel: any Channel
    private let session: NIOLoopBound<HTTP2ClientSession>

    init(id: Int, channel: any Channel, session: HTTP2ClientSession) {
        self.id = id
        self.channel = channel
        self.session = NIOLoopBound(session, eventLoop: channel.eventLoop)
    }

    /// Sends one request on a new stream.
    /// - Parameters:
    ///   - headers: Request headers, encoded.
    ///   - body: Request body.
    ///   - deadline: Per-request deadline.
    /// - Returns: The answer, or a failed future with an ``HTTP2TransportError``.
    public func execute(headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline) -> EventLoopFuture<HTTP2Response> {
        let loop = channel.eventLoop
        let promise = loop.makePromise(of: HTTP2Response.self)
        if loop.inEventLoop {
            session.value.send(headers: headers, body: body, deadline: deadline, promise: promise)
        } else {
            let session = self.session
            loop.execute {
                session.value.send(headers: headers, body: body, deadline: deadline, promise: promise)
            }
        }
        return promise.futureResult
    }

    /// Closes the connection.
    func close() {
        channel.close(promise: nil)
    }
}
