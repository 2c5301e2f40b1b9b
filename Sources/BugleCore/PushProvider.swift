/// Whether requests may still be written: a worker frozen (SIGSTOP, a suspended VM) past its lease wakes with sends
/// it held for its lane's rate; another worker has taken their recipients over, so they must not go out.
public protocol SendGate: Sendable {
    /// True while requests may be written.
    var isOpen: Bool { get }
}

/// One notification ready for the wire: the body bytes were rendered and size-checked by BugleCore.
public struct PushRequest: Sendable {
    /// Ledger sequence number of the recipient (unique within a run).
    public var seq: Int64
    /// `bugle.devices.id` (or the segment's device_id).
    public var deviceID: Int64
    /// The device token (never logged; use ``TokenFingerprint``).
    public var token: String
    public var platform: Platform
    /// Wire body: the APNs payload JSON, or the FCM v1 `{"message": ...}` JSON (token included).
    public var body: [UInt8]
    /// APNs request headers (nil for FCM).
    public var apns: APNsHeaders?
    /// Attempt number, starting at 1.
    public var attempt: Int
    /// UNIX seconds after which the request must not be written: the device's quiet hours begin then. A lane's pacer
    /// that grants the request later hands it back unsent (``SendOutcome/quietHoursBegan``). Nil: no limit.
    public var sendBy: Double?
    /// Asked just before the request is written after waiting for its lane or for a stream: closed, the request is
    /// handed back unsent (``SendOutcome/withdrawn``). The runner's says whether its lease is still its own. Nil: always
    /// open.
    public var gate: (any SendGate)?

    /// Whether ``gate`` lets the request be written now.
    public var gateIsOpen: Bool { gate?.isOpen ?? true }

    public init(
        seq: Int64,
        deviceID: Int64,
        token: String,
        platform: Platform,
        body: [UInt8],
        apns: APNsHeaders? = nil,
        attempt: Int = 1
    ) {
        self.seq = seq
        self.deviceID = deviceID
        self.token = token
        self.platform = platform
        self.body = body
        self.apns = apns
        self.attempt = attempt
    }
}

/// The campaign-derived APNs headers of one request. `apns-topic` comes from the providers file and is added
/// by the APNs lane; `authorization` too.
public struct APNsHeaders: Sendable, Equatable {
    public var pushType: APNsPushType
    public var priority: Int
    /// UNIX seconds; nil = header absent.
    public var expiration: Int?
    public var collapseID: String?
    /// Lowercase canonical UUID derived from (run, seq).
    public var apnsID: String

    public init(pushType: APNsPushType, priority: Int, expiration: Int?, collapseID: String?, apnsID: String) {
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
    }
}

/// A provider lane (APNs, FCM, legacy APNs, or a test double). Implementations never throw for a
/// per-request failure: every failure is classified into a ``SendOutcome``.
public protocol PushProvider: Sendable {
    /// Which lane this is (used for routing, pacing and the ledger's `provider` column).
    var kind: ProviderKind { get }
    /// Sends one request and classifies the answer.
    func send(_ request: PushRequest) async -> SendOutcome
    /// Starts sending one request without suspending, when the lane can take it at once (a free slot, a token of
    /// its rate, a free stream, credentials at hand): the sender then needs no task of its own while it waits.
    /// - Parameters:
    ///   - request: The request.
    ///   - completion: Called exactly once, on any thread, with what ``send(_:)`` would have returned.
    /// - Returns: false when the request was not started (and `completion` is never called): use ``send(_:)``.
    func startSend(_ request: PushRequest, completion: @escaping @Sendable (SendOutcome) -> Void) -> Bool
    /// Closes connections after in-flight requests were answered.
    func shutdown() async
    /// False while the lane cannot use more work soon (paused, or a second's worth of requests already
    /// waiting for its rate): the runner then claims recipients of other lanes only, so a slow or paused
    /// lane never takes the whole in-flight window.
    var isAcceptingWork: Bool { get }
    /// Gets ready to send before the first recipient is claimed: connections opened, credentials fetched.
    /// Failures are not reported here; the first send reports them.
    func prepare() async
    /// How many recipients this lane can use at once, waiting ones included, for the runner to claim no more than
    /// that for it: a paced lane's second of sends. Nil: no limit of its own (the in-flight window decides). Without
    /// it a lane paced at 20/s took ~250 recipients of one claim and held them in flight for ten seconds and more: a
    /// kill -9 turned them all `unknown`, and a worker joining the run found nothing left to claim.
    var claimCapacity: Int? { get }
    /// The run is stopping: every ``send(_:)`` still waiting for the lane (a slot, its rate, a pause) returns
    /// ``SendOutcome/withdrawn`` without sending, and so does every later one until ``prepare()``. Requests already
    /// written are answered as usual.
    func withdrawWaitingSends()
}

extension PushProvider {
    public var isAcceptingWork: Bool { true }
    public var claimCapacity: Int? { nil }
    public func prepare() async {}
    /// Lanes that never make a send wait have nothing to withdraw.
    public func withdrawWaitingSends() {}
    /// Lanes without a path that does not suspend: every request goes through ``send(_:)``.
    public func startSend(_ request: PushRequest, completion: @escaping @Sendable (SendOutcome) -> Void) -> Bool { false }
}
