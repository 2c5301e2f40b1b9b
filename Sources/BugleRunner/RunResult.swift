import BugleCore

/// How a run (or one worker's share of it) ended.
public struct RunResult: Sendable, Equatable {
    public enum Ending: Sendable, Equatable {
        /// Every recipient reached a terminal state.
        case completed
        /// Stopped on request; resumable (exit 3).
        case paused(String)
        /// `delivery.not_after` came (or comes before anything left is due): the recipients not yet sent were cancelled
        /// (outcome `not_after_passed`), their reservations released, and the run completed (exit 0).
        case closedAtDeadline(String)
        /// A provider said the configuration or credentials are wrong (exit 2); resumable after fixing it.
        case halted(code: String, message: String)
        /// Nothing is due for a while (`send_at`, local-time delivery): the run was left paused as `scheduled`, for
        /// `bugle tick` or `bugle resume` to send later (exit 0). Only with ``CampaignRunner/Configuration/leaveWhenIdle``.
        case scheduled(secondsUntilNextDue: Double)
        /// The lease was taken by another worker or the run was paused/cancelled elsewhere (exit 2).
        case fenced(RunStatus?)
        /// The lease was not granted: another worker holds the run (``LeaseMode/exclusive``) or the run is not
        /// `running` (``LeaseMode/join``). Nothing was claimed or sent.
        case notGranted
    }

    public var runID: Int64
    public var ending: Ending
    /// Recipients this process sent requests for (all outcomes).
    public var attempted: Int
    /// What the worker still held when it gave its ledger writes up on connections a database outage broke, a new
    /// session being available (ending ``Ending/fenced(_:)`` with no status); nil otherwise.
    public var handover: Handover?

    public init(runID: Int64, ending: Ending, attempted: Int, handover: Handover? = nil) {
        self.runID = runID
        self.ending = ending
        self.attempted = attempted
        self.handover = handover
    }
}

/// Ledger writes a worker could not make through its own connections after a database outage (a restart, a failover
/// to another server): to be made through a new session under the same lease (the worker's row is there, on a promoted
/// standby too) before the run goes on, so that recipients it sent are recorded sent, not left in flight for the
/// ambiguous policy.
public struct Handover: Sendable, Equatable {
    /// The lease the writes belong to.
    public var lease: Lease
    /// Answered recipients, for ``CampaignStore/record(_:outcomes:)``.
    public var outcomes: [RecipientOutcome]
    /// Claims whose answer never arrived, for ``CampaignStore/releaseUnheld(_:claimIDs:)``.
    public var lostClaimIDs: [Int64]
}
