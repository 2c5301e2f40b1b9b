import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Testing

/// Database faults in the middle of a run (RELIABILITY.md §2.2): real PostgreSQL ledger → runner → paced lanes over
/// TLS + HTTP/2 → in-process simulators.
/// A timing suite (``TimingPhase``): the fault lasts a fixed 5 s of wall-clock time, which the parallel phase can
/// stretch past the run it is meant to interrupt.
@Suite("Database faults mid-run (PostgreSQL + simulators)", .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct DatabaseFaultTests {
    typealias Support = LedgerTestSupport

    /// §2.2 #14: another session holds the ledger table in ACCESS EXCLUSIVE mode for 5 s mid-run.
    @Test("the ledger table locked ACCESS EXCLUSIVE for 5 s mid-run: claims and commits wait, at most W sends meanwhile, nothing fails, every token once")
    func lockContention() async throws {
        try await MixedTestEnvironment.with { environment in
            let configuration = try await TestDatabase.fresh()
            try await Database.withClient(configuration, logger: Support.logger) { client in
                try await MixedTestEnvironment.seed(client, count: 4_000, deadEvery: 1_000_000)
                let window = 300
                var campaign = Support.campaign(pageSize: 5_000, window: window)
                campaign.delivery.rateLimits = [.apns: 400, .fcm: 400]
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let running = Task { try await Support.runCampaign(client, campaign, providers: lanes.providers) }
                let delivered = { environment.apns.counters().accepted + environment.fcm.counters().accepted }
                let deadline = ContinuousClock.now + .seconds(120)
                while delivered() < 500 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
                let (before, after) = try await Database.withClient(configuration, logger: Support.logger) { locker in
                    try await locker.withTransaction(logger: Support.logger) { connection in
                        _ = try await connection.query("LOCK TABLE bugle.run_recipients IN ACCESS EXCLUSIVE MODE", logger: Support.logger)
                        let before = delivered()
                        _ = try await connection.query("SELECT pg_sleep(5)", logger: Support.logger)
                        return (before, delivered())
                    }
                }
                let (runID, result) = try await running.value
                #expect(result.ending == .completed)
                // Nothing is claimed while the table is locked: only recipients claimed before it can be sent.
                #expect(after - before <= window, "\(after - before) sends while the ledger was locked")
                #expect(before >= 500)
                let tokens = environment.apns.accepted().map(\.token) + environment.fcm.accepted().compactMap(\.token)
                #expect(tokens.count == 4_000)
                #expect(Set(tokens).count == 4_000)
                let notSent = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state <> 'sent'", as: Int64.self)
                #expect(notSent == 0)
            }
        }
    }
}
