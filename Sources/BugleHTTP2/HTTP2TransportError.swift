/// Transport-level failure of one request, before or instead of an answer from the server.
public enum HTTP2TransportError: Error, Sendable, Equatable {
    /// Nothing was written: connect/TLS failure, closed connection, no free stream. Safe to retry.
    case notWritten(String)
    /// The server refused the stream (REFUSED_STREAM). Safe to retry.
    case refused
    /// The server is closing the connection (GOAWAY) and did not process this request (above the last-stream-id, or
    /// not yet written). Safe to retry. `debugData`: the GOAWAY's debug data as printable ASCII, at most 256 bytes
    /// (APNs puts `{"reason":"…"}` there); `connectionAnswered`: whether the connection had answered any request.
    case goingAway(code: UInt32, debugData: String, connectionAnswered: Bool)
    /// The connection closed or reset the stream after the request was written, without an answer.
    case lostAfterWrite(String)
    /// The per-request deadline passed; `written` says whether the request had reached the socket.
    case timeout(written: Bool)
    /// The pool is shut down.
    case shutdown
    /// Nothing was written: the server's TLS certificate was refused (untrusted CA, wrong host name, expired). A
    /// configuration error, so the request is not retried and the lane halts.
    case certificateRejected(String)
    /// Nothing was written: the HTTP proxy refused the tunnel in a way reconnecting cannot fix (407 credentials, 403 or
    /// 405: the host or CONNECT not allowed). A configuration error, so the request is not retried and the lane halts.
    case proxyRefused(String)
}
