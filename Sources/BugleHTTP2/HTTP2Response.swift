import NIOCore
import NIOHPACK

/// An HTTP/2 answer: status, response headers and the body (nil when empty).
public struct HTTP2Response: Sendable {
    /// The `:status` pseudo-header (0 when missing or malformed).
    public var status: Int
    /// Every response header except pseudo-headers.
    public var headers: HPACKHeaders
    /// The collected DATA frames.
    public var body: ByteBuffer?

    /// Creates a response.
    /// - Parameters:
    ///   - status: HTTP status.
    ///   - headers: Response headers.
    ///   - body: Body bytes.
    public init(status: Int, headers: HPACKHeaders = [:], body: ByteBuffer? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The `retry-after` header in whole seconds (delta-seconds form only), or nil.
    public var retryAfterSeconds: Int? {
        headers.first(name: "retry-after").flatMap { Int($0.filter { $0 != " " }) }
    }
}

extension HTTP2Response {
    /// Takes in one received header block: the `:status` and every other non-pseudo field. An informational (1xx)
    /// block is skipped: the final answer follows it.
    mutating func collect(_ block: HPACKHeaders) {
        var status: Int?
        for (name, value, _) in block where name == ":status" {
            status = Int(value) ?? 0
        }
        if let status, (100..<200).contains(status) { return }
        if let status { self.status = status }
        for (name, value, indexing) in block where name.utf8.first != UInt8(ascii: ":") {
            headers.add(name: name, value: value, indexing: indexing)
        }
    }

    /// Adds received body bytes.
    mutating func appendBody(_ bytes: inout ByteBuffer) {
        guard bytes.readableBytes > 0 else { return }
        if body == nil {
            body = bytes
        } else {
            body?.writeBuffer(&bytes)
        }
    }
}
