import BugleStore
import Foundation
import Logging
import PostgresNIO

#if canImport(Glibc)
import Glibc
#endif

/// Lease owners are `host:pid:random`. A worker of this host whose process no longer exists cannot renew its lease,
/// so `bugle resume` ends that lease at once instead of waiting out its TTL (a kill -9 followed by a resume on the
/// same machine resumes immediately). Workers of other hosts are left to expire.
enum LocalWorkers {
    /// This process's lease owner id.
    static func ownerID() -> String {
        "\(ProcessInfo.processInfo.hostName):\(getpid()):\(UInt32.random(in: 0...UInt32.max))"
    }

    /// Expires the leases of the run's workers that were processes of this host and are gone, and those of this very
    /// process: a command takes a run's lease once, so a lease of its own is one its stopped worker left behind (a
    /// worker that lost the database, going on after ``DatabaseOutageRecovery``) or one of a dead process whose pid this
    /// process was given.
    /// - Returns: how many leases were ended.
    static func expireDead(runID: Int64, repository: RunRepository) async throws -> Int {
        let host = ProcessInfo.processInfo.hostName
        var ended = 0
        for worker in try await repository.liveWorkers(runID: runID)
        where isDeadLocalProcess(owner: worker.owner, host: host) || isThisProcess(owner: worker.owner, host: host) {
            if try await repository.expireWorker(runID: runID, epoch: worker.epoch) { ended += 1 }
        }
        return ended
    }

    /// The run's live workers other than this process.
    static func others(runID: Int64, repository: RunRepository) async throws -> [RunRepository.Worker] {
        let host = ProcessInfo.processInfo.hostName
        return try await repository.liveWorkers(runID: runID).filter { !isThisProcess(owner: $0.owner, host: host) }
    }

    static func isThisProcess(owner: String, host: String) -> Bool {
        let parts = owner.split(separator: ":")
        return parts.count == 3 && String(parts[0]) == host && pid_t(parts[1]) == getpid()
    }

    static func isDeadLocalProcess(owner: String, host: String) -> Bool {
        let parts = owner.split(separator: ":")
        guard parts.count == 3, String(parts[0]) == host, let pid = pid_t(parts[1]), pid > 0 else { return false }
        return kill(pid, 0) == -1 && errno == ESRCH
    }
}
