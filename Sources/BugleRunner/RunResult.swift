import BugleCore

/// How a run (or one worker's share of it) ended.
public struct RunResult: Sendable, Equatable {
    public enum Ending: Sendable, Equatable {
        /// Every recipient reached a terminal state.
        case completed
        /// Stopped on request; resumable (exit 3).
        case paused(String)
        /// A provider said the configuration or credentials are wrong (exit 2); resumable after fixing it.
        case halted(code: String, message: String)
        /// Nothing is due for a while (`send_at`, local-time delivery): the run was left paused as `scheduled`, for
        /// `bugle tick` or `bugle resume` to send later (exit 0). Only with ``CampaignRunner/Configuration/leaveWhenIdle``.
        case scheduled(secondsUntilNextDue: Double)
        /// The lease was taken by another worker or the run was paused/cancelled elsewhere (exit 2).
        case fenced(RunStatus?)
    }

    public var runID: Int64
    public var ending: Ending
    /// Recipients this process sent requests for (all outcomes).
    public var attempted: Int
}
