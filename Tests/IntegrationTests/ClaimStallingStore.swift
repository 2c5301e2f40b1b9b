import BugleCore
import BugleStore
import Synchronization

/// A ledger for the runner that forwards to PostgreSQL, except that its `n`-th claim commits on the server and then
/// waits, its answer held back, until ``release()``, and fails: a claim whose answer is lost while the worker stops.
final class ClaimStallingStore: CampaignStore {
    struct AnswerLost: Error {}

    private let base: any CampaignStore
    private let stallAt: Int
    private let claims = Mutex(0)
    /// Yields how many recipients the stalled claim took, once it has committed.
    let stalled: AsyncStream<Int>
    private let stalledContinuation: AsyncStream<Int>.Continuation
    private let released: AsyncStream<Void>
    private let releaseContinuation: AsyncStream<Void>.Continuation

    init(_ base: any CampaignStore, stallAt: Int) {
        self.base = base
        self.stallAt = stallAt
        (stalled, stalledContinuation) = AsyncStream.makeStream()
        (released, releaseContinuation) = AsyncStream.makeStream()
    }

    /// Lets the stalled claim fail.
    func release() {
        releaseContinuation.finish()
    }

    func claim(_ lease: Lease, limits: [ProviderKind: Int], claimID: Int64) async throws -> ClaimResult {
        let result = try await base.claim(lease, limits: limits, claimID: claimID)
        guard claims.withLock({ $0 += 1; return $0 }) == stallAt else { return result }
        if case .claimed(let recipients) = result { stalledContinuation.yield(recipients.count) }
        for await _ in released {}
        throw AnswerLost()
    }

    func acquireLease(runID: Int64, owner: String, ttlSeconds: Int, mode: LeaseMode) async throws -> Lease? {
        try await base.acquireLease(runID: runID, owner: owner, ttlSeconds: ttlSeconds, mode: mode)
    }

    func renewLease(_ lease: Lease, ttlSeconds: Int) async throws -> LeaseRenewal {
        try await base.renewLease(lease, ttlSeconds: ttlSeconds)
    }

    func record(_ lease: Lease, outcomes: [RecipientOutcome]) async throws -> Bool {
        try await base.record(lease, outcomes: outcomes)
    }

    func releaseUnheld(_ lease: Lease, claimIDs: [Int64]) async throws -> Int64 {
        try await base.releaseUnheld(lease, claimIDs: claimIDs)
    }

    func progress(runID: Int64, snapshotTaken: @escaping @Sendable () async -> Void) async throws -> RunProgress {
        try await base.progress(runID: runID, snapshotTaken: snapshotTaken)
    }

    func backlog(runID: Int64) async throws -> RunBacklog {
        try await base.backlog(runID: runID)
    }

    @discardableResult
    func finish(_ lease: Lease, status: RunStatus, reason: String?, lastWorkerOnly: Bool) async throws -> Bool {
        try await base.finish(lease, status: status, reason: reason, lastWorkerOnly: lastWorkerOnly)
    }

    func closeAtDeadline(_ lease: Lease, reason: String) async throws -> Bool {
        try await base.closeAtDeadline(lease, reason: reason)
    }
}
