import NIOCore

/// The gateway's 6-byte error response: `u8 command=8 | u8 status | u32 identifier` (PROTOCOLS.md §3.3).
///
/// For every status but 10 the identifier names the failed notification; for 10 (shutdown) it names the
/// last notification that was processed. The gateway closes the connection after writing it.
public struct LegacyAPNSErrorResponse: Sendable, Equatable {
    /// The command byte of an error response.
    public static let command: UInt8 = 8
    /// The size of an error response on the wire.
    public static let length = 6

    /// Why the gateway stopped.
    public var status: LegacyAPNSStatus
    /// The identifier the status refers to.
    public var identifier: UInt32

    /// Creates an error response.
    /// - Parameters:
    ///   - status: The status.
    ///   - identifier: The identifier it refers to.
    public init(status: LegacyAPNSStatus, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    /// A first byte other than 8: the peer does not speak the legacy gateway protocol.
    public struct UnexpectedCommand: Error, Sendable, Equatable, CustomStringConvertible {
        /// The byte received.
        public var command: UInt8

        /// Creates the error.
        /// - Parameter command: The byte received.
        public init(command: UInt8) { self.command = command }

        public var description: String { "expected an error response (command 8), received command \(command)" }
    }

    /// Reads one error response from the front of `buffer` when all 6 bytes are there.
    /// - Parameter buffer: Received bytes; advanced past the response when one is returned.
    /// - Returns: The response, or nil when fewer than 6 bytes are buffered (nothing is consumed).
    /// - Throws: ``UnexpectedCommand`` when the first byte is not 8 (nothing is consumed).
    public static func decode(from buffer: inout ByteBuffer) throws -> LegacyAPNSErrorResponse? {
        guard let command = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return nil }
        guard command == Self.command else { throw UnexpectedCommand(command: command) }
        guard buffer.readableBytes >= Self.length,
            let status = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self),
            let identifier = buffer.getInteger(at: buffer.readerIndex + 2, as: UInt32.self)
        else {
            return nil
        }
        buffer.moveReaderIndex(forwardBy: Self.length)
        return LegacyAPNSErrorResponse(status: LegacyAPNSStatus(rawValue: status), identifier: identifier)
    }

    /// The 6 wire bytes.
    public func encoded() -> [UInt8] {
        [Self.command, status.rawValue] + withUnsafeBytes(of: identifier.bigEndian, Array.init)
    }
}
