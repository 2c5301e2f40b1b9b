import BugleCore
import NIOCore

extension HTTP2ConnectionPool {
    /// Sends one request on a stream taken with ``leaseNow()``, without waiting for its answer, and frees the stream
    /// when the request ends. For the lanes' sends that start without a task (``PushProvider/startSend(_:completion:)``).
    /// - Parameters:
    ///   - connection: From ``leaseNow()``.
    ///   - headers: Request headers, encoded.
    ///   - body: Request body.
    ///   - deadline: Per-request deadline.
    ///   - answered: Called with the server's answer, on the connection's event loop.
    ///   - unanswered: Called instead when the request failed without an answer, with the error (an
    ///     ``HTTP2TransportError``; ``HTTP2TransportError/outcomeWithoutRetry(of:)`` tells what it means).
    public func start(
        on connection: HTTP2Connection, headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline,
        answered: @escaping @Sendable (HTTP2Response) -> Void,
        unanswered: @escaping @Sendable (any Error) -> Void
    ) {
        connection.submit(headers: headers, body: body, deadline: deadline) { [self] result in
            release(connection)
            switch result {
            case .success(let response): answered(response)
            case .failure(let error): unanswered(error)
            }
        }
    }
}
