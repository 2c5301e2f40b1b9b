import NIOCore

/// The parts of an APNs answer the classifier needs.
struct APNSRawResponse: Sendable {
    var status: Int
    var apnsID: String?
    var retryAfterSeconds: Int?
    var body: ByteBuffer?
}
