/// The counters of every simulator one `bugle-sim` process serves, as ``SimulatorCountersServer`` answers them:
/// one JSON object whose members are the served simulators (`apns`, `fcm`, `metadata`, `legacy`; one not served is
/// left out), each holding its counters struct's fields under their Swift names (`accepted`, `rejectedByReason`,
/// `maxConcurrentStreamsObserved`, …). Keyed-by-number counters (the legacy simulator's `rejectedByStatus`,
/// `packetsByCommand`) have their numbers as string keys, as JSON requires.
public struct SimulatorCountersSnapshot: Sendable, Equatable, Encodable {
    /// The HTTP/2 APNs simulator's counters.
    public var apns: APNsSimulatorCounters?
    /// The FCM simulator's counters.
    public var fcm: FCMSimulatorCounters?
    /// The metadata server's counters.
    public var metadata: MetadataServerCounters?
    /// The legacy binary APNs simulator's counters.
    public var legacy: LegacyAPNsSimulatorCounters?

    /// A snapshot of the given simulators' counters (nil for one not served).
    /// - Parameters:
    ///   - apns: The HTTP/2 APNs simulator's counters.
    ///   - fcm: The FCM simulator's counters.
    ///   - metadata: The metadata server's counters.
    ///   - legacy: The legacy binary APNs simulator's counters.
    public init(
        apns: APNsSimulatorCounters? = nil,
        fcm: FCMSimulatorCounters? = nil,
        metadata: MetadataServerCounters? = nil,
        legacy: LegacyAPNsSimulatorCounters? = nil
    ) {
        self.apns = apns
        self.fcm = fcm
        self.metadata = metadata
        self.legacy = legacy
    }
}
