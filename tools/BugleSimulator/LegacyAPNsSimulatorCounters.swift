/// Live counters of the legacy simulator.
public struct LegacyAPNsSimulatorCounters: Sendable, Equatable, Encodable {
    /// Notifications accepted.
    public var accepted = 0
    /// Notifications refused, by status (command-0 refusals are closes without a response but are counted
    /// under the status the simulator would have sent).
    public var rejectedByStatus: [Int: Int] = [:]
    /// Packets parsed, by command.
    public var packetsByCommand: [Int: Int] = [:]
    /// Gateway connections accepted (TCP).
    public var connections = 0
    /// Gateway connections open now.
    public var openConnections = 0
    /// Gateway TLS handshakes refused (no or untrusted client certificate).
    public var handshakeFailures = 0
    /// Status-10 error responses sent by fault injection.
    public var shutdownsSent = 0
    /// Silent closes by fault injection.
    public var silentCloses = 0
    /// Feedback connections served.
    public var feedbackConnections = 0
    /// Feedback tuples sent.
    public var feedbackTuplesSent = 0

    /// All rejections.
    public var rejected: Int { rejectedByStatus.values.reduce(0, +) }

    /// Creates zeroed counters.
    public init() {}
}
