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
