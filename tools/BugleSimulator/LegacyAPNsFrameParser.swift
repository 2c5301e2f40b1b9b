import Foundation
import NIOCore

/// Reads legacy APNs packets (commands 0, 1 and 2) from a byte stream, however TCP split it, and checks
/// every item (PROTOCOLS.md §3.2, §4.3). Pure: bytes in, verdicts out.
///
/// Checks and the status each failure gets (the identifier is the packet's, or 0 when it has none):
/// - unknown command, malformed command-2 items (truncated, unknown id, repeated item, identifier or
///   expiry not 4 bytes, priority not 1 byte), a frame longer than ``maximumFrameLength``, or a priority
///   other than 5 or 10: 128 (protocol error);
/// - no token or an empty one: 2; a token that is not 32 bytes: 5;
/// - no payload or an empty one: 4; a payload over the limit: 7; a payload that is not a JSON object with
///   an `aps` object: 4 (a simulator choice; Apple documents no status for it).
public struct LegacyAPNsFrameParser: Sendable {
    /// One notification that passed every check.
    public struct Notification: Sendable, Equatable {
        /// 0, 1 or 2.
        public var command: UInt8
        /// Identifier (commands 1 and 2).
        public var identifier: UInt32?
        /// Expiration (commands 1 and 2).
        public var expiry: UInt32?
        /// Priority (command 2 item 5).
        public var priority: UInt8?
        /// The binary device token.
        public var token: [UInt8]
        /// The payload bytes.
        public var payload: [UInt8]

        /// Creates a parsed notification.
        /// - Parameters:
        ///   - command: 0, 1 or 2.
        ///   - identifier: Identifier, if the packet has one.
        ///   - expiry: Expiration, if the packet has one.
        ///   - priority: Priority, if the packet has one.
        ///   - token: The binary token.
        ///   - payload: The payload.
        public init(command: UInt8, identifier: UInt32?, expiry: UInt32?, priority: UInt8?, token: [UInt8], payload: [UInt8]) {
            self.command = command
            self.identifier = identifier
            self.expiry = expiry
            self.priority = priority
            self.token = token
            self.payload = payload
        }
    }

    /// A verdict on one packet.
    public enum Verdict: Sendable, Equatable {
        /// Passed every check.
        case notification(Notification)
        /// Failed: `status` is what the gateway answers (command 0 gets no answer, only a close).
        case rejected(command: UInt8, status: UInt8, identifier: UInt32)
    }

    /// Largest command-2 frame accepted.
    public static let maximumFrameLength = 65_535

    /// Payload limit for command 2 (and 0/1 unless ``legacyPayloadLimit`` says otherwise).
    public var payloadLimit: Int
    /// Payload limit for commands 0 and 1.
    public var legacyPayloadLimit: Int

    /// Creates a parser.
    /// - Parameters:
    ///   - payloadLimit: Command-2 payload limit.
    ///   - legacyPayloadLimit: Command-0/1 payload limit.
    public init(payloadLimit: Int = 2048, legacyPayloadLimit: Int = 2048) {
        self.payloadLimit = payloadLimit
        self.legacyPayloadLimit = legacyPayloadLimit
    }

    /// Reads the next packet from the front of `buffer`.
    /// - Parameter buffer: Received bytes; advanced past the packet when a verdict is returned.
    /// - Returns: The verdict, or nil when the packet is not complete yet (nothing consumed).
    public func next(from buffer: inout ByteBuffer) -> Verdict? {
        let start = buffer.readerIndex
        guard let command = buffer.getInteger(at: start, as: UInt8.self) else { return nil }
        switch command {
        case 0:
            guard let tokenLength = buffer.getInteger(at: start + 1, as: UInt16.self).map(Int.init),
                let payloadLength = buffer.getInteger(at: start + 3 + tokenLength, as: UInt16.self).map(Int.init),
                let token = buffer.getBytes(at: start + 3, length: tokenLength),
                let payload = buffer.getBytes(at: start + 5 + tokenLength, length: payloadLength)
            else { return nil }
            buffer.moveReaderIndex(forwardBy: 5 + tokenLength + payloadLength)
            return check(
                Notification(command: 0, identifier: nil, expiry: nil, priority: nil, token: token, payload: payload),
                limit: legacyPayloadLimit
            )
        case 1:
            guard let identifier = buffer.getInteger(at: start + 1, as: UInt32.self),
                let expiry = buffer.getInteger(at: start + 5, as: UInt32.self),
                let tokenLength = buffer.getInteger(at: start + 9, as: UInt16.self).map(Int.init),
                let payloadLength = buffer.getInteger(at: start + 11 + tokenLength, as: UInt16.self).map(Int.init),
                let token = buffer.getBytes(at: start + 11, length: tokenLength),
                let payload = buffer.getBytes(at: start + 13 + tokenLength, length: payloadLength)
            else { return nil }
            buffer.moveReaderIndex(forwardBy: 13 + tokenLength + payloadLength)
            return check(
                Notification(command: 1, identifier: identifier, expiry: expiry, priority: nil, token: token, payload: payload),
                limit: legacyPayloadLimit
            )
        case 2:
            guard let frameLength = buffer.getInteger(at: start + 1, as: UInt32.self).map(Int.init) else { return nil }
            guard frameLength <= Self.maximumFrameLength else {
                buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
                return .rejected(command: 2, status: 128, identifier: 0)
            }
            guard var items = buffer.getSlice(at: start + 5, length: frameLength) else { return nil }
            buffer.moveReaderIndex(forwardBy: 5 + frameLength)
            return frame(&items)
        default:
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            return .rejected(command: command, status: 128, identifier: 0)
        }
    }

    private func frame(_ items: inout ByteBuffer) -> Verdict {
        var token: [UInt8]?
        var payload: [UInt8]?
        var identifier: UInt32?
        var expiry: UInt32?
        var priority: UInt8?
        var malformed = false
        while items.readableBytes > 0 {
            guard let id = items.readInteger(as: UInt8.self), let length = items.readInteger(as: UInt16.self),
                var data = items.readSlice(length: Int(length))
            else {
                malformed = true
                break
            }
            switch id {
            case 1 where token == nil:
                token = data.readBytes(length: data.readableBytes)
            case 2 where payload == nil:
                payload = data.readBytes(length: data.readableBytes)
            case 3 where identifier == nil && length == 4:
                identifier = data.readInteger(as: UInt32.self)
            case 4 where expiry == nil && length == 4:
                expiry = data.readInteger(as: UInt32.self)
            case 5 where priority == nil && length == 1:
                priority = data.readInteger(as: UInt8.self)
            default:
                malformed = true
            }
            if malformed { break }
        }
        let errorIdentifier = identifier ?? 0
        if malformed { return .rejected(command: 2, status: 128, identifier: errorIdentifier) }
        if let priority, priority != 5 && priority != 10 {
            return .rejected(command: 2, status: 128, identifier: errorIdentifier)
        }
        return check(
            Notification(command: 2, identifier: identifier, expiry: expiry, priority: priority, token: token ?? [], payload: payload ?? []),
            limit: payloadLimit
        )
    }

    private func check(_ notification: Notification, limit: Int) -> Verdict {
        let identifier = notification.identifier ?? 0
        let status: UInt8
        if notification.token.isEmpty {
            status = 2
        } else if notification.token.count != 32 {
            status = 5
        } else if notification.payload.isEmpty {
            status = 4
        } else if notification.payload.count > limit {
            status = 7
        } else if !Self.isAPNsPayload(notification.payload) {
            status = 4
        } else {
            return .notification(notification)
        }
        return .rejected(command: notification.command, status: status, identifier: identifier)
    }

    /// A JSON object holding an `aps` object.
    static func isAPNsPayload(_ payload: [UInt8]) -> Bool {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else { return false }
        return object["aps"] is [String: Any]
    }
}
