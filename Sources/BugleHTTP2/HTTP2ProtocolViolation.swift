/// A breach of HTTP/2 by the server (or a frame this client cannot accept): the connection is closed with a
/// GOAWAY carrying ``code``, and its open requests fail as transport errors.
struct HTTP2ProtocolViolation: Error, CustomStringConvertible {
    /// The HTTP/2 error code sent in the GOAWAY.
    var code: UInt32
    /// What was wrong (frame types and sizes only: never header values).
    var message: String

    var description: String { "HTTP/2 \(HTTP2Wire.ErrorCode.name(code)): \(message)" }
}
