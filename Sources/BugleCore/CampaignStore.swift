import Foundation

/// Ledger states of one recipient (RELIABILITY.md §3.3).
public enum RecipientState: String, Sendable, CaseIterable, Equatable {
    case pending
    case inFlight = "in_flight"
    case retryWait = "retry_wait"
    case sent
    case invalidToken = "invalid_token"
    case failedPermanent = "failed_permanent"
    case unknown
    case skippedDedup = "skipped_dedup"
    case skippedInactive = "skipped_inactive"
    case skippedInvalid = "skipped_invalid"
    /// The user reached the campaign's `max_per_user` cap.
    case skippedFrequency = "skipped_frequency"
    /// The send time fell in quiet hours under `quiet_hours_action: skip`.
    case skippedQuietHours = "skipped_quiet_hours"
    case cancelled

    /// True for states a run never leaves.
    public var isTerminal: Bool {
        switch self {
        case .pending, .inFlight, .retryWait: return false
        default: return true
        }
    }
}

/// Run states (`bugle.runs.status`).
public enum RunStatus: String, Sendable, CaseIterable, Equatable {
    case materializing, ready, running, paused, completed, failed, cancelled
}

/// A recipient claimed for sending under a lease epoch.
public struct ClaimedRecipient: Sendable, Equatable {
    public var seq: Int64
    public var deviceID: Int64
    public var userID: String
    public var token: String
    public var platform: Platform
    public var locale: String?
    public var timezone: String?
    public var variables: [String: String?]
    /// The A/B variant chosen at materialization.
    public var variant: String?
    /// The copy rotation index chosen at materialization.
    public var copyIndex: Int
    /// Attempts including this one.
    public var attempts: Int

    public init(seq: Int64, deviceID: Int64, userID: String, token: String, platform: Platform, locale: String?, timezone: String?, variables: [String: String?], variant: String? = nil, copyIndex: Int = 0, attempts: Int) {
        self.seq = seq
        self.deviceID = deviceID
        self.userID = userID
        self.token = token
        self.platform = platform
        self.locale = locale
        self.timezone = timezone
        self.variables = variables
        self.variant = variant
        self.copyIndex = copyIndex
        self.attempts = attempts
    }
}

extension ClaimedRecipient {
    /// What decides its copy.
    public var selection: MessageSelection {
        MessageSelection(locale: locale, variant: variant, copyIndex: copyIndex, variables: variables)
    }
}

/// The result of a claim.
public enum ClaimResult: Sendable, Equatable {
    /// Recipients now `in_flight` under the caller's epoch (possibly none).
    case claimed([ClaimedRecipient])
    /// The lease was lost, or the run was paused/cancelled: stop sending.
    case fenced(RunStatus?)
}

/// The outcome of one recipient, ready to be written by a group commit.
public struct RecipientOutcome: Sendable, Equatable {
    public var seq: Int64
    public var state: RecipientState
    public var code: String
    public var providerMessageID: String?
    /// For `retry_wait`: seconds from now until the next attempt may be claimed.
    public var retryAfterSeconds: Double?
    /// True when this attempt is not charged (provider-level or known-not-processed retries).
    public var refundAttempt: Bool
    /// For `invalid_token`: deactivate this device unless it re-registered after `invalidSince`.
    public var deactivate: Deactivation?
    /// For `retry_wait`: the dedupe period (``PeriodKey``) the recipient will be sent in, when it is held (quiet hours)
    /// until then. A recipient held past the end of its period is re-keyed to this one, so its user is deduped on the
    /// day it is notified, not the day it was planned.
    public var periodKey: String?

    public init(seq: Int64, state: RecipientState, code: String, providerMessageID: String? = nil, retryAfterSeconds: Double? = nil, refundAttempt: Bool = false, deactivate: Deactivation? = nil, periodKey: String? = nil) {
        self.seq = seq
        self.state = state
        self.code = code
        self.providerMessageID = providerMessageID
        self.retryAfterSeconds = retryAfterSeconds
        self.refundAttempt = refundAttempt
        self.deactivate = deactivate
        self.periodKey = periodKey
    }
}

/// A token deactivation caused by a provider answer.
public struct Deactivation: Sendable, Equatable {
    public var deviceID: Int64
    public var reason: String
    /// The provider's "invalid since" time (APNs 410 timestamp); nil = now.
    public var invalidSince: Date?

    public init(deviceID: Int64, reason: String, invalidSince: Date?) {
        self.deviceID = deviceID
        self.reason = reason
        self.invalidSince = invalidSince
    }
}

/// What is left to do in a run.
public struct RunProgress: Sendable, Equatable {
    public var pending: Int64
    public var inFlight: Int64
    public var retryWait: Int64
    /// Seconds until the earliest `retry_wait` row is due (0 when one is due now), nil when none.
    public var secondsUntilNextDue: Double?

    public init(pending: Int64, inFlight: Int64, retryWait: Int64, secondsUntilNextDue: Double?) {
        self.pending = pending
        self.inFlight = inFlight
        self.retryWait = retryWait
        self.secondsUntilNextDue = secondsUntilNextDue
    }

    /// No recipient is left to send.
    public var isDone: Bool { pending == 0 && inFlight == 0 && retryWait == 0 }
}

/// Whether a run still has work, without counting it: what a worker asks each time its pipeline drains.
public struct RunBacklog: Sendable, Equatable {
    /// Some recipient is claimed and unanswered (by this worker or another).
    public var hasInFlight: Bool
    /// Seconds until the earliest `pending` or `retry_wait` recipient is due (0 when one is due now), nil when
    /// none is left.
    public var secondsUntilNextDue: Double?

    public init(hasInFlight: Bool, secondsUntilNextDue: Double?) {
        self.hasInFlight = hasInFlight
        self.secondsUntilNextDue = secondsUntilNextDue
    }

    /// No recipient is left to send.
    public var isDone: Bool { !hasInFlight && secondsUntilNextDue == nil }
}

/// A held lease: the fencing epoch every claim and write carries.
public struct Lease: Sendable, Equatable {
    public var runID: Int64
    public var owner: String
    public var epoch: Int64
    /// In-flight rows of earlier epochs recovered per the ambiguous policy when the lease was taken.
    public var recoveredInFlight: Int64
    /// Live workers on the run when the lease was taken, this one included.
    public var liveWorkers: Int

    public init(runID: Int64, owner: String, epoch: Int64, recoveredInFlight: Int64, liveWorkers: Int = 1) {
        self.runID = runID
        self.owner = owner
        self.epoch = epoch
        self.recoveredInFlight = recoveredInFlight
        self.liveWorkers = liveWorkers
    }
}

/// How a worker asks for a run's lease.
public enum LeaseMode: Sendable, Equatable {
    /// `bugle run` / `bugle resume`: the run must have no live worker (a ready, running or paused run).
    case exclusive
    /// `bugle worker`: join a run that is `running`, beside the workers already on it.
    case join
}

/// The answer to a lease renewal.
public struct LeaseRenewal: Sendable, Equatable {
    /// False when the lease was lost (reaped after expiry) or the run is no longer `running`.
    public var held: Bool
    /// Live workers on the run, this one included (at least 1 when held).
    public var liveWorkers: Int
    /// In-flight rows of expired workers recovered by this renewal.
    public var recoveredInFlight: Int64
    /// When not held: the run's status (`completed` when another worker finished it), nil when unknown.
    public var runStatus: RunStatus?

    public init(held: Bool, liveWorkers: Int, recoveredInFlight: Int64, runStatus: RunStatus? = nil) {
        self.held = held
        self.liveWorkers = liveWorkers
        self.recoveredInFlight = recoveredInFlight
        self.runStatus = runStatus
    }
}

/// The delivery ledger the runner drives (implemented on PostgreSQL by BugleStore).
public protocol CampaignStore: Sendable {
    /// Takes a lease on the run with a new epoch, reaping workers whose leases expired and recovering every
    /// in-flight row no live worker holds.
    /// - Returns: nil when the run is not available in this mode (a live worker holds it, or its status forbids).
    func acquireLease(runID: Int64, owner: String, ttlSeconds: Int, mode: LeaseMode) async throws -> Lease?
    /// Extends the lease and reaps peers whose leases expired.
    func renewLease(_ lease: Lease, ttlSeconds: Int) async throws -> LeaseRenewal
    /// Claims due recipients — up to `limits[lane]` of each lane's oldest — keeping at most the run's window
    /// in flight (across all its workers); reserves dedupe rows.
    /// - Parameter claimID: this attempt's id, unique within the lease, stored on the claimed rows so that an
    ///   attempt whose answer was lost can be handed back by ``releaseUnheld(_:claimIDs:)``.
    func claim(_ lease: Lease, limits: [ProviderKind: Int], claimID: Int64) async throws -> ClaimResult
    /// Writes outcomes of recipients claimed under `lease` (group commit). False when fenced: the lease was
    /// reaped, and nothing was written.
    func record(_ lease: Lease, outcomes: [RecipientOutcome]) async throws -> Bool
    /// Hands back recipients left `in_flight` by claim attempts of this lease whose answers never reached the
    /// worker (the commit landed, the answer was lost with the connection, or the attempt was abandoned and ran
    /// late). They were never sent. Safe whenever it runs: rows of attempts that answered are never touched.
    /// - Returns: how many were handed back.
    func releaseUnheld(_ lease: Lease, claimIDs: [Int64]) async throws -> Int64
    /// Counts of unfinished recipients (reads every unfinished row: for the start of a run, not its loop). The
    /// count is of one snapshot, fixed before `snapshotTaken` is called and before the slow count begins: writes
    /// made after `snapshotTaken` returns are not in it.
    func progress(runID: Int64, snapshotTaken: @escaping @Sendable () async -> Void) async throws -> RunProgress
    /// Whether unfinished recipients remain, and when the next is due: a few index probes, whatever the run's size.
    func backlog(runID: Int64) async throws -> RunBacklog
    /// Ends the lease. `completed`, `cancelled` and `failed` end the run, as does `paused` with `lastWorkerOnly`
    /// false (a halt); with `lastWorkerOnly` true, the run is paused only when no other worker is live on it,
    /// otherwise this worker just leaves. Rebuilds the summary; releases unused dedupe reservations at the end.
    /// - Returns: true when the run's status was changed.
    @discardableResult
    func finish(_ lease: Lease, status: RunStatus, reason: String?, lastWorkerOnly: Bool) async throws -> Bool
    /// Ends the lease of a run whose `delivery.not_after` has passed. The last worker out closes the run: recipients
    /// not yet sent become `cancelled` (outcome `not_after_passed`), unused dedupe reservations and cap slots are
    /// released, and the run is `completed` with `reason`; with other workers live, this one just leaves.
    /// - Returns: true when the run was closed.
    @discardableResult
    func closeAtDeadline(_ lease: Lease, reason: String) async throws -> Bool
}
