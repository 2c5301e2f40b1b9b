import BugleCore
import BugleStore
import Foundation

/// Wiring: after a database outage, the run's other workers may be coming back too, each with recipients it sent
/// and still has to record (``DatabaseOutageRecovery`` writes them through a new session). Their leases stop being
/// renewed in the outage, and lapse soon after it; taking the run at once would reap them (the first renewal after a
/// lease lapses does) and put those recipients through the ambiguous policy (resent, or `unknown`). A worker going on
/// after an outage therefore first waits, at most one lease TTL (15 s at least), until no other worker's lease that
/// has not been renewed since this wait began still has recipients in flight. A lease counts whether it has lapsed yet
/// or not: a peer that lost the database at the same moment still holds a live lease for up to half a TTL after it
/// stopped sending. A peer whose lease is renewed meanwhile is sending (it never lost the database, or is back), and
/// a gone process of this host cannot come back: neither is waited for.
enum OutagePeers {
    static func awaitHandovers(runID: Int64, repository: RunRepository, leaseTTL: Int, console: Console) async throws {
        let host = ProcessInfo.processInfo.hostName
        let clock = ContinuousClock()
        let start = clock.now
        let limit = Duration.seconds(max(leaseTTL, 15))
        // A renewal moves a lease's expiry by a renewal interval (a third of the TTL); reading it twice moves it by
        // the reads' latency only.
        let renewedBy = max(0.5, Double(leaseTTL) / 8)
        var firstExpiry: [Int64: Double] = [:]
        var announced = false
        while true {
            let elapsed = (clock.now - start).inSeconds
            var waitingFor: [Int64] = []
            for peer in try await repository.workers(runID: runID, includingLapsed: true)
            where !LocalWorkers.isThisProcess(owner: peer.owner, host: host) && !LocalWorkers.isDeadLocalProcess(owner: peer.owner, host: host) {
                // Expiry on this wait's clock: constant while the peer does not renew.
                let expiry = elapsed + peer.expiresIn
                let first = firstExpiry[peer.epoch] ?? expiry
                firstExpiry[peer.epoch] = first
                if expiry < first + renewedBy { waitingFor.append(peer.epoch) }
            }
            guard !waitingFor.isEmpty else { return }
            let holding = try await repository.inFlight(runID: runID, epochs: waitingFor)
            guard holding > 0, clock.now - start < limit else { return }
            if !announced {
                console.say(
                    "run \(runID): waiting up to \(limit.components.seconds) s for \(waitingFor.count) other worker(s) that lost the database too to record the \(holding) recipient(s) they hold")
                announced = true
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }
}
