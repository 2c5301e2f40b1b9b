import BugleStore

/// Ends what a cancelled run's workers left behind (``RunRepository/settleCancelled(runID:)``) once the leases of
/// this machine's stopped processes are ended: called by `bugle cancel` (and again on a run already cancelled), by a
/// worker leaving a run cancelled under it, and by `bugle resume` of a cancelled run.
enum CancelledRunSettlement {
    /// - Returns: What was settled, in words, or nil when nothing was left.
    static func settle(runID: Int64, repository: RunRepository) async throws -> String? {
        _ = try await LocalWorkers.expireDead(runID: runID, repository: repository)
        let settled = try await repository.settleCancelled(runID: runID)
        guard !settled.isEmpty else { return nil }
        var parts: [String] = []
        if settled.inFlight > 0 {
            parts.append("\(settled.inFlight) recipient(s) left in flight by stopped workers are unknown (they may have been delivered)")
        }
        if settled.unsent > 0 { parts.append("\(settled.unsent) handed back unsent are cancelled") }
        return "run \(runID): " + parts.joined(separator: "; ")
    }
}
