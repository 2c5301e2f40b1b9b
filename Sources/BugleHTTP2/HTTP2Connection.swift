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

    /// Sends one request on a new stream and waits for its answer.
    /// - Parameters:
    ///   - headers: Request headers, encoded.
    ///   - body: Request body.
    ///   - deadline: Per-request deadline.
    /// - Returns: The answer.
    /// - Throws: ``HTTP2TransportError``.
    public func execute(headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline) async throws -> HTTP2Response {
        try await withCheckedThrowingContinuation { continuation in
            submit(headers: headers, body: body, deadline: deadline) { continuation.resume(with: $0) }
        }
    }

    /// Sends one request on a new stream without waiting for its answer.
    /// - Parameters:
    ///   - headers: Request headers, encoded.
    ///   - body: Request body.
    ///   - deadline: Per-request deadline.
    ///   - completion: Called once, on the connection's event loop, with the answer or an ``HTTP2TransportError``.
    public func submit(
        headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline,
        completion: @escaping @Sendable (Result<HTTP2Response, any Error>) -> Void
    ) {
        let loop = channel.eventLoop
        let session = self.session
        if loop.inEventLoop {
            session.value.send(headers: headers, body: body, deadline: deadline, completion: completion)
        } else {
            loop.execute {
                session.value.send(headers: headers, body: body, deadline: deadline, completion: completion)
            }
        }
    }

    /// Closes the connection.
    func close() {
        channel.close(promise: nil)
    }
}
