import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Synchronization
import Testing

/// Database faults in the middle of a run (RELIABILITY.md §2.2): real PostgreSQL ledger → runner → paced lanes over
/// TLS + HTTP/2 → in-process simulators.
/// A timing suite (``TimingPhase``): the fault lasts a fixed 5 s of wall-clock time, which the parallel phase can
/// stretch past the run it is meant to interrupt.
@Suite("Database faults mid-run (PostgreSQL + simulators)", .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct DatabaseFaultTests {
    typealias Support = LedgerTestSupport

    /// §2.2 #14: another session holds the ledger table in ACCESS EXCLUSIVE mode for 12 s mid-run, longer than the
    /// ledger's lock timeout (5 s).
    @Test("the ledger table locked ACCESS EXCLUSIVE for 12 s mid-run: ledger statements give up at the lock timeout and are retried, at most W sends meanwhile, nothing fails, every token once")
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
                let warnings = RecordingLogHandler.Lines()
                let running = Task {
                    try await Support.runCampaign(client, campaign, providers: lanes.providers, runnerLogger: RecordingLogHandler.logger(warnings))
                }
                let delivered = { environment.apns.counters().accepted + environment.fcm.counters().accepted }
                let deadline = ContinuousClock.now + .seconds(120)
                while delivered() < 500 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
                let held = Mutex(false)
                // While the lock is held, the longest any session has been waiting for a lock (none but the run's do).
                let longestWait = Task {
                    try await Database.withClient(configuration, logger: Support.logger) { watcher in
                        var longest = 0.0
                        var sawWaiting = false
                        while !held.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
                        while held.withLock({ $0 }) {
                            let rows = try await watcher.query(
                                """
                                SELECT count(*)::bigint, coalesce(max(extract(epoch FROM clock_timestamp() - query_start)), 0)::float8
                                  FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()
                                """,
                                logger: Support.logger
                            )
                            for try await (waiting, age) in rows.decode((Int64, Double).self) {
                                if waiting > 0 { sawWaiting = true }
                                longest = max(longest, age)
                            }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        return (sawWaiting, longest)
                    }
                }
                let (before, after) = try await Database.withClient(configuration, logger: Support.logger) { locker in
                    try await locker.withTransaction(logger: Support.logger) { connection in
                        _ = try await connection.query("LOCK TABLE bugle.run_recipients IN ACCESS EXCLUSIVE MODE", logger: Support.logger)
                        held.withLock { $0 = true }
                        let before = delivered()
                        _ = try await connection.query("SELECT pg_sleep(12)", logger: Support.logger)
                        held.withLock { $0 = false }
                        return (before, delivered())
                    }
                }
                let (sawWaiting, longest) = try await longestWait.value
                let (runID, result) = try await running.value
                #expect(result.ending == .completed)
                // The run's statements queued on the lock, and none waited much past the 5 s lock timeout (without it
                // they wait the whole 12 s, up to the 30 s attempt deadline).
                #expect(sawWaiting)
                #expect(longest < 8.5, "a ledger statement waited \(longest) s for the lock")
                // Each timeout was retried with its reason in the warning, not postgres-nio's generic description.
                let retries = warnings.all.filter { $0.contains("failed; retrying") }
                #expect(retries.contains { $0.contains("SQLSTATE 55P03") && $0.contains("lock timeout") }, "\(retries)")
                #expect(!retries.contains { $0.contains("Generic description") }, "\(retries)")
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

/// Outage warnings printed postgres-nio's type paths (`ConnectionPoolError(base: _ConnectionPoolModule…`) or a bare
/// code name; they say what happened in words.
@Suite("Database error descriptions")
struct DatabaseErrorDescriptionTests {
    @Test("a database that cannot be reached is described in words, without postgres-nio's type names")
    func unreachable() async throws {
        let port = try freeLoopbackPort()
        let configuration = try DatabaseConfiguration(url: "postgres://bugle@127.0.0.1:\(port)/bugle?connect_timeout=2")
        let description = await Self.failure(configuration)
        #expect(!description.contains("ConnectionPoolModule") && !description.contains("PSQLError"), "\(description)")
        // It read `postgres error connectionError: Connection errors: …`.
        #expect(description.contains("could not reach the database: "), "\(description)")
        // Each address tried with the system's reason; it read `Connection errors: SingleConnectionFailure(target:
        // [IPv4]127.0.0.1/127.0.0.1:PORT, error: connection reset (error set): Connection refused (errno: 111))`.
        #expect(description.contains("127.0.0.1:\(port): Connection refused") && !description.contains("SingleConnectionFailure"), "\(description)")
    }

    private static func failure(_ configuration: DatabaseConfiguration) async -> String {
        do {
            try await Database.withClient(configuration, logger: LedgerTestSupport.logger) { client in
                _ = try await client.query("SELECT 1", logger: LedgerTestSupport.logger).collect()
            }
        } catch {
            return StoreError.safeDescription(of: error)
        }
        return "no error"
    }
}
