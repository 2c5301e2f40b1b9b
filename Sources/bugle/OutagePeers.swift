import BugleStore
import Foundation

/// Wiring: after a database outage, the run's other workers may be coming back too, each with recipients it sent
/// and still has to record (``DatabaseOutageRecovery`` writes them through a new session). Their leases lapsed in the
/// outage, so taking the run at once would reap them and put those recipients through the ambiguous policy (resent, or
/// `unknown`). A worker going on after an outage therefore first waits, at most one lease TTL (15 s at least), until no
/// lapsed lease of another worker (not a gone process of this host) still has recipients in flight.
enum OutagePeers {
    static func awaitHandovers(runID: Int64, repository: RunRepository, leaseTTL: Int, console: Console) async throws {
        let host = ProcessInfo.processInfo.hostName
        let clock = ContinuousClock()
        let limit = Duration.seconds(max(leaseTTL, 15))
        let deadline = clock.now + limit
        var announced = false
        while true {
            let lapsed = try await repository.workers(runID: runID, includingLapsed: true).filter {
                $0.expiresIn < 0 && !LocalWorkers.isThisProcess(owner: $0.owner, host: host)
                    && !LocalWorkers.isDeadLocalProcess(owner: $0.owner, host: host)
            }
            guard !lapsed.isEmpty else { return }
            let holding = try await repository.inFlight(runID: runID, epochs: lapsed.map(\.epoch))
            guard holding > 0, clock.now < deadline else { return }
            if !announced {
                console.say(
                    "run \(runID): waiting up to \(limit.components.seconds) s for \(lapsed.count) other worker(s) that lost the database too to record the \(holding) recipient(s) they hold")
                announced = true
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }
}
