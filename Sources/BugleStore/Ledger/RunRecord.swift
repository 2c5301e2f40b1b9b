import BugleCore

/// One row of `bugle.runs`, as `bugle runs` and `bugle report` show it.
public struct RunRecord: Sendable, Equatable {
    public var id: Int64
    public var campaign: String
    public var notificationType: String
    public var periodKey: String?
    public var status: RunStatus
    public var campaignFile: String?
    public var campaignYAML: String
    public var recipientsTotal: Int64?
    public var rowsScanned: Int64?
    public var duplicatesCollapsed: Int64
    public var pauseReason: String?
    public var failureReason: String?
    /// ISO 8601 UTC, or nil.
    public var createdAt: String
    public var startedAt: String?
    public var finishedAt: String?
    /// finished − started, seconds.
    public var durationSeconds: Double?
    /// `campaign`, or `test` for a `bugle send-test` run.
    public var kind: String
    /// Seconds the run spent paused after it began sending (kept by the schema on every status change).
    public var pausedSeconds: Double = 0

    /// Answered notifications per second over the time the run was not paused, or nil before it finished.
    public func rate(answered: Int64) -> Double? {
        guard let duration = durationSeconds, duration - pausedSeconds > 0 else { return nil }
        return Double(answered) / (duration - pausedSeconds)
    }
}

/// One summary line: run × platform × status × reason.
public struct SummaryLine: Sendable, Equatable {
    public var platform: String
    public var status: String
    public var reason: String
    public var count: Int64
}

/// One line of a run's per-variant summary (`bugle.run_variant_summary`).
public struct VariantSummaryLine: Sendable, Equatable {
    public var variant: String
    public var status: String
    public var count: Int64

    public init(variant: String, status: String, count: Int64) {
        self.variant = variant
        self.status = status
        self.count = count
    }
}
