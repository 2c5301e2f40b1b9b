import BugleCore
import NIOCore

/// One tuple of the feedback service: `u32 time | u16 token_len | token` (PROTOCOLS.md §3.4) — the app
/// was gone from the device at `time`.
public struct LegacyAPNSFeedbackTuple: Sendable, Equatable {
    /// When the gateway saw the app gone, UNIX seconds.
    public var time: UInt32
    /// The binary device token.
    public var token: [UInt8]

    /// Creates a tuple.
    /// - Parameters:
    ///   - time: UNIX seconds.
    ///   - token: The binary token.
    public init(time: UInt32, token: [UInt8]) {
        self.time = time
        self.token = token
    }

    /// The token as lowercase hex (how Bugle stores iOS tokens).
    public var tokenHex: String { LegacyAPNSHex.encode(token) }

    /// ``time`` as an ``Instant``.
    public var since: Instant { Instant(secondsSince1970: Double(time)) }

    /// Appends the tuple's wire form.
    /// - Parameter buffer: The buffer to write into.
    public func encode(into buffer: inout ByteBuffer) {
        buffer.writeInteger(time)
        buffer.writeInteger(UInt16(token.count))
        buffer.writeBytes(token)
    }

    /// Reads every complete tuple from `buffer`.
    /// - Parameter buffer: Received bytes; advanced past the tuples read.
    /// - Returns: The tuples, in order; a trailing partial tuple stays in `buffer`.
    public static func decodeAll(from buffer: inout ByteBuffer) -> [LegacyAPNSFeedbackTuple] {
        var tuples: [LegacyAPNSFeedbackTuple] = []
        while let time = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self),
            let length = buffer.getInteger(at: buffer.readerIndex + 4, as: UInt16.self),
            let token = buffer.getBytes(at: buffer.readerIndex + 6, length: Int(length))
        {
            buffer.moveReaderIndex(forwardBy: 6 + Int(length))
            tuples.append(LegacyAPNSFeedbackTuple(time: time, token: token))
        }
        return tuples
    }
}
