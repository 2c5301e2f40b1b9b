/// One notification the legacy simulator accepted (passed every check before any error on its connection).
public struct LegacyAPNsRecord: Sendable, Equatable, Codable {
    /// Device token, lowercase hex.
    public var token: String
    /// Command of the packet: 0, 1 or 2.
    public var command: Int
    /// Identifier (absent for command 0, and for a command-2 frame without item 3).
    public var identifier: UInt32?
    /// Expiration, UNIX seconds (absent for command 0 or without item 4).
    public var expiry: UInt32?
    /// Priority (10 when the packet carries none).
    public var priority: Int
    /// Lowercase hex SHA-256 of the payload bytes.
    public var payloadSHA256: String
    /// Simulator wall-clock time of acceptance, UNIX seconds.
    public var time: Double
    /// Connection that carried it (1-based, in accept order).
    public var connectionID: Int

    enum CodingKeys: String, CodingKey {
        case token
        case command
        case identifier
        case expiry
        case priority
        case payloadSHA256 = "payload_sha256"
        case time
        case connectionID = "connection"
    }
}
