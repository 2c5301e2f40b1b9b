import NIOCore

/// One notification in the legacy binary APNs format, and its command-2 frame (PROTOCOLS.md §3.2).
///
/// ```
/// u8 command=2 | u32 frame_len | items
/// item = u8 item_id | u16 item_len | item_data
///   1 device token (32 bytes) | 2 payload (JSON) | 3 identifier (4) | 4 expiration (4) | 5 priority (1)
/// ```
/// Every integer is big-endian. Encoding is a pure function of the five values; the lane writes the
/// items in the order 1…5, exactly one of each.
public struct LegacyAPNSNotification: Sendable, Equatable {
    /// The binary device token (32 bytes for a real gateway; the encoder writes whatever length it gets).
    public var token: [UInt8]
    /// The APNs payload JSON, not NUL-terminated.
    public var payload: [UInt8]
    /// Opaque identifier, echoed by the gateway in an error response.
    public var identifier: UInt32
    /// UNIX seconds after which the gateway may discard the notification; 0 = do not store.
    public var expiry: UInt32
    /// 10 (immediate) or 5 (power-aware).
    public var priority: UInt8

    /// The command byte of a frame notification.
    public static let command: UInt8 = 2
    /// Bytes of frame header before the items: command (1) and frame length (4).
    static let headerLength = 5
    /// Bytes of the fixed-size items: header (3) plus data for identifier (4), expiry (4), priority (1),
    /// and the headers of the token and payload items (3 each).
    static let fixedItemLength = (3 + 4) + (3 + 4) + (3 + 1) + 3 + 3

    /// Creates a notification.
    /// - Parameters:
    ///   - token: The binary device token.
    ///   - payload: The payload JSON bytes.
    ///   - identifier: Identifier echoed in error responses.
    ///   - expiry: Expiration, UNIX seconds (0 = do not store).
    ///   - priority: 10 or 5.
    public init(token: [UInt8], payload: [UInt8], identifier: UInt32, expiry: UInt32, priority: UInt8) {
        self.token = token
        self.payload = payload
        self.identifier = identifier
        self.expiry = expiry
        self.priority = priority
    }

    /// Length of the frame data (the value of `frame_len`).
    public var frameDataLength: Int { Self.fixedItemLength + token.count + payload.count }

    /// Length of the whole frame on the wire.
    public var encodedLength: Int { Self.headerLength + frameDataLength }

    /// Appends the command-2 frame to `buffer`.
    /// - Parameter buffer: The buffer to write into.
    public func encode(into buffer: inout ByteBuffer) {
        buffer.reserveCapacity(minimumWritableBytes: encodedLength)
        buffer.writeInteger(Self.command)
        buffer.writeInteger(UInt32(frameDataLength))
        buffer.writeInteger(UInt8(1))
        buffer.writeInteger(UInt16(token.count))
        buffer.writeBytes(token)
        buffer.writeInteger(UInt8(2))
        buffer.writeInteger(UInt16(payload.count))
        buffer.writeBytes(payload)
        buffer.writeInteger(UInt8(3))
        buffer.writeInteger(UInt16(4))
        buffer.writeInteger(identifier)
        buffer.writeInteger(UInt8(4))
        buffer.writeInteger(UInt16(4))
        buffer.writeInteger(expiry)
        buffer.writeInteger(UInt8(5))
        buffer.writeInteger(UInt16(1))
        buffer.writeInteger(priority)
    }

    /// The command-2 frame as bytes.
    public func encoded() -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: encodedLength)
        encode(into: &buffer)
        return Array(buffer.readableBytesView)
    }
}
