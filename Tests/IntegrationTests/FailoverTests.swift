import BugleCore
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real streaming standby (``StreamingStandby``): what Bugle does with one before and after it is promoted.
///
/// A timing suite (``TimingPhase``): leases of 4 s, outages of a few seconds and a worker joining mid-run need a CPU the
/// parallel phase does not leave them (there the two-worker run once completed before its outage, and once its worker
/// did not hold a live lease within two minutes; a process ending before both hold one now fails the wait at once, and
/// any failed wait records both processes' output and the run's leases).
@Suite(
    "a streaming standby and a failover to it", .serialized, .timeLimit(.minutes(5)),
    .enabled(if: TimingPhase.isActive, TimingPhase.reason)
)
struct FailoverTests {
    /// Before the failover: the standby serves the read-only commands, refuses the writing ones at once, and a host list
    /// passes over it. Then, mid-run, the primary dies and the standby is promoted: the running `bugle run` (host list,
    /// `target_session_attrs=read-write`) stops sending within its lease's half-life, finds that another server has
    /// taken over, gives up its held outcome writes instead of retrying them against the dead primary for minutes,
    /// waits for the new primary, writes there what it held (its lease row was replicated with everything else), and
    /// resumes the run in the same process. Every live token is delivered once, the ledger on the new primary is
    /// complete: with synchronous replication nothing the primary acknowledged is lost, so nothing is sent twice.
    @Test("a standby serves reads, refuses writes, is passed over; the primary killed and the standby promoted mid-run: the same bugle run writes what it held on it, goes on and completes, nothing sent twice")
    func failoverMidRun() async throws {
        let devices = 3000
        try await Self.withStandby(name: "failover", devices: devices) { pair, environment in
            try await Self.standbyBeforeFailover(pair, environment: environment, devices: devices)
            try await Self.failover(pair, environment: environment, devices: devices)
        }
    }

    /// Two workers on a host list when the primary dies and the standby is promoted: each stops within its lease's
    /// half-life, finds the promoted standby, writes what it held there (its lease row was replicated), and goes on;
    /// whichever is back first waits for the other's in-flight recipients instead of reaping them. Both exit 0, the
    /// promoted ledger is complete and nothing is sent twice.
    @Test("the primary killed and the standby promoted under a bugle run and a bugle worker: both write what they held on it, go on and end, nothing sent twice")
    func failoverUnderTwoWorkers() async throws {
        let devices = 2000
        try await Self.withStandby(name: "failover-two", devices: devices) { pair, environment in
            let listed = CrashFixture(
                environment: environment, configuration: pair.primary.databaseConfiguration(),
                databaseURL: try StreamingStandby.url([pair.primary, pair.standby], attributes: "read-write"), devices: devices)
            let (running, joining, runID) = try await Self.startTwoWorkers(listed)
            try await listed.waitUntil("600 deliveries") { listed.delivered >= 600 }
            try await pair.failOver()
            let (run, worker) = await Self.finishBoth(running, joining)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(worker.status == 0, "\(worker.stderr)")
            let standby = try StreamingStandby.location(pair.standby)
            for output in [run, worker] {
                #expect(output.stdout.contains("the database answers again (\(standby))"), "\(output.stdout)")
                #expect(output.stderr.contains("lease not renewed for half its TTL"), "\(output.stderr)")
            }
            let promoted = CrashFixture(
                environment: environment, configuration: pair.standby.databaseConfiguration(),
                databaseURL: try StreamingStandby.url([pair.standby]), devices: devices)
            #expect(try await promoted.latestRunID() == runID)
            try await promoted.expectEveryLiveTokenSentOnce()
        }
    }

    /// One server (no host list), down for longer than half the lease while `bugle run` and a `bugle worker` send: each
    /// stops sending, keeps its outcomes, writes them once the server is back, and goes on by itself (they used to stop
    /// with exit 2 and leave the run paused for an operator's `bugle resume`): whichever comes back first resumes or
    /// rejoins the run, the other joins it. Both exit 0 and nothing is sent twice.
    @Test("one server down for longer than half the lease under two workers: the same bugle run and bugle worker go on once it is back, nothing sent twice")
    func restartMidRun() async throws {
        try await Self.withLoneCluster(name: "restart", devices: 2000) { cluster, fixture in
            let (running, joining, runID) = try await Self.startTwoWorkers(fixture)
            let listed = try await fixture.bugle(["runs"])
            #expect(listed.stdout.contains("(2 workers)"), "\(listed.stdout)")
            let sending = try await Self.listedRun(runID, fixture: fixture)
            #expect(sending?["live_workers"] as? Int == 2, "\(String(describing: sending))")
            try await fixture.waitUntil("600 deliveries") { fixture.delivered >= 600 }
            try await cluster.stop(mode: .fast)
            // The outage itself: longer than half the 4 s lease, so both workers stop sending for want of renewals.
            try await Task.sleep(for: .seconds(5))
            _ = try await cluster.start(logger: TestDatabase.logger)
            let (run, worker) = await Self.finishBoth(running, joining)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(worker.status == 0, "\(worker.stderr)")
            for output in [run, worker] {
                #expect(output.stdout.contains("the database answers again (\(try StreamingStandby.location(cluster)))"), "\(output.stdout)")
                #expect(output.stderr.contains("lease not renewed for half its TTL"), "\(output.stderr)")
            }
            try await fixture.expectEveryLiveTokenSentOnce()
            let finished = try await Self.listedRun(runID, fixture: fixture)
            #expect(finished?["status"] as? String == "completed" && finished?["live_workers"] is NSNull, "\(String(describing: finished))")
        }
    }

    /// `--database-outage-limit` used to start counting only after the worker's writes had been retried in place for
    /// about 2.5 minutes (35 attempts): a limit of 10 s gave up after 3.5 minutes. The worker now hands what it holds
    /// over once it stops for want of renewals, and the command waits for the database for the limit, then gives up.
    @Test("one server down for longer than --database-outage-limit: bugle run gives up while it is still down (exit 2, naming the limit); bugle resume completes once it is back")
    func outageLongerThanTheLimit() async throws {
        try await Self.withLoneCluster(name: "limit", devices: 2000) { cluster, fixture in
            let campaign = try fixture.campaign(policy: .resend, window: 200, rate: 50)
            let running = try fixture.start(["run", campaign, "--lease-ttl", "4", "--database-outage-limit", "3"])
            try await fixture.waitUntil("200 deliveries") { fixture.delivered >= 200 }
            let runID = try await fixture.latestRunID()
            try await cluster.stop(mode: .fast)
            // Half the lease (2 s) and the limit (3 s) pass long before this (ended within the minute, or killed and recorded).
            let output = await running.finish(within: .seconds(60))
            #expect(output.status == 2, "\(output.stderr)")
            #expect(output.stderr.contains("did not answer again within 3 s"), "\(output.stderr)")
            #expect(output.stdout.contains("waiting up to 3 s for it to answer again"), "\(output.stdout)")
            _ = try await cluster.start(logger: TestDatabase.logger)
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            // What the first process held died with it, as in a crash: under `resend` at most W of those go out again.
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates <= 200 && unknown == 0, "\(duplicates) duplicates, \(unknown) unknown")
        }
    }

    /// A `bugle run` (`--lease-ttl 4`, 50 notifications/s per lane) and, once it delivered 200, a `bugle worker` on the
    /// same run; returns once both hold a live lease. At 100/s in all a 2,000-recipient run lasts 20 s, so what the
    /// test does next (`bugle runs`, an outage) happens mid-run even on a loaded machine (at 300/s CI's parallel phase
    /// once saw the run complete before it).
    private static func startTwoWorkers(_ fixture: CrashFixture) async throws -> (CLIRunTests.RunningBugle, CLIRunTests.RunningBugle, Int64) {
        let running = try fixture.start(["run", try fixture.campaign(policy: .resend, window: 200, rate: 50), "--lease-ttl", "4"])
        try await fixture.waitUntil("200 deliveries") { fixture.delivered >= 200 }
        let runID = try await fixture.latestRunID()
        let joining = try fixture.start(["worker", "\(runID)", "--lease-ttl", "4"])
        do {
            try await fixture.waitUntil("two workers") {
                guard running.process.isRunning, joining.process.isRunning else { throw TwoWorkersNotLive(runID: runID) }
                return try await fixture.withClient { client in
                    try await LedgerTestSupport.scalar(
                        client, "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at > now()", as: Int64.self) == 2
                }
            }
        } catch {
            // Neither process is left behind to hang the suite, and what each printed says why they were not both live.
            try await Self.recordWhyNotLive(error, runID: runID, processes: [("bugle run", running), ("bugle worker", joining)], fixture: fixture)
            throw error
        }
        return (running, joining, runID)
    }

    /// How long a process may take to end once the failover or outage is under way (its runs last about 20 s); one
    /// still running then is hung, killed and recorded with its output.
    private static let ending = Duration.seconds(120)

    /// Waits for both processes together, each for at most ``ending``.
    private static func finishBoth(
        _ first: CLIRunTests.RunningBugle, _ second: CLIRunTests.RunningBugle
    ) async -> (CLITests.Output, CLITests.Output) {
        async let one = first.finish(within: ending)
        async let other = second.finish(within: ending)
        return await (one, other)
    }

    /// One of the two processes ended before both held a live lease.
    private struct TwoWorkersNotLive: Error, CustomStringConvertible {
        let runID: Int64
        var description: String { "a process of run \(runID) ended before both held a live lease" }
    }

    /// Records, for a failed wait for two live workers, the run's leases and state and each process's exit and output,
    /// after stopping whichever is still running.
    private static func recordWhyNotLive(
        _ error: any Error, runID: Int64, processes: [(String, CLIRunTests.RunningBugle)], fixture: CrashFixture
    ) async throws {
        let leases = try? await fixture.withClient { client in
            try await LedgerTestSupport.scalar(
                client,
                "SELECT coalesce(string_agg(owner || ' until ' || expires_at::text || ' (now ' || now()::text || ')', '; '), 'none') FROM bugle.run_workers WHERE run_id = \(runID)",
                as: String.self)
        }
        let states = try? await fixture.states(runID: runID)
        var report = "\(error); leases: \(leases.flatMap { $0 } ?? "unknown"); recipients: \(states.map { "\($0)" } ?? "unknown")"
        for (name, process) in processes {
            if process.process.isRunning { kill(process.process.processIdentifier, SIGKILL) }
            let output = await process.finish()
            report += "\n\(name) exited \(output.status)\nstdout:\n\(output.stdout)\nstderr:\n\(output.stderr)"
        }
        Issue.record(Comment(rawValue: report))
    }

    /// Run `runID` as `bugle runs --json` lists it.
    private static func listedRun(_ runID: Int64, fixture: CrashFixture) async throws -> [String: Any]? {
        let output = try await fixture.bugle(["runs", "--json"])
        let runs = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [[String: Any]]
        return runs?.first { ($0["run_id"] as? Int).map(Int64.init) == runID }
    }

    /// The operator stops `bugle run` (SIGTERM) 3 s into an outage, after the worker stopped for want of renewals:
    /// the process does not go on with the run once the database is back; it records what it held (its own writes
    /// landing, or the handover through a new session) and exits 3, and `bugle resume` completes the run with nothing
    /// sent twice.
    @Test("SIGTERM during an outage: the run is not resumed by that process; it records what it held and exits 3; bugle resume completes, nothing sent twice")
    func interruptedDuringOutage() async throws {
        try await Self.withLoneCluster(name: "outage-sigterm", devices: 2000) { cluster, fixture in
            let running = try fixture.start(["run", try fixture.campaign(policy: .resend, window: 200, rate: 150), "--lease-ttl", "4"])
            try await fixture.waitUntil("400 deliveries") { fixture.delivered >= 400 }
            try await cluster.stop(mode: .fast)
            // The outage's shape: the operator gives up 3 s in (past the self-fence at 2 s), the server is back 2 s later.
            try await Task.sleep(for: .seconds(3))
            kill(running.process.processIdentifier, SIGTERM)
            try await Task.sleep(for: .seconds(2))
            _ = try await cluster.start(logger: TestDatabase.logger)
            let stopped = await running.finish(within: Self.ending)
            #expect(stopped.status == 3, "\(stopped.stderr)")
            #expect(stopped.stderr.contains("SIGTERM: stopping"), "\(stopped.stderr)")
            #expect(!stopped.stdout.contains("resuming the run"), "\(stopped.stdout)")
            let runID = try await fixture.latestRunID()
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            try await fixture.expectEveryLiveTokenSentOnce()
        }
    }

    /// A primary with `devices` seeded devices and its streaming standby, and both simulators.
    private static func withStandby(
        name: String, devices: Int, _ body: (StreamingStandby, MixedTestEnvironment) async throws -> Void
    ) async throws {
        try await CrashFixture.with(environment: try await MixedTestEnvironment.start()) { environment in
            try await StreamingStandby.with(name: name) { client in
                _ = try await Migrator(client: client, logger: TestDatabase.logger).migrate()
                try await MixedTestEnvironment.seed(client, count: devices)
            } _: { pair in
                try await body(pair, environment)
            }
        }
    }

    /// A cluster of the test's own with `devices` seeded devices, both simulators, and a fixture on it.
    private static func withLoneCluster(
        name: String, devices: Int, _ body: (EmbeddedCluster, CrashFixture) async throws -> Void
    ) async throws {
        let directory = NSTemporaryDirectory() + "bugle-\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let cluster = EmbeddedCluster(directory: directory, port: 5432, durability: .throwaway)
        defer {
            cluster.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: directory)
        }
        _ = try await cluster.start(logger: TestDatabase.logger)
        try await Database.withClient(cluster.databaseConfiguration(), logger: TestDatabase.logger) { client in
            _ = try await Migrator(client: client, logger: TestDatabase.logger).migrate()
            try await MixedTestEnvironment.seed(client, count: devices)
        }
        try await CrashFixture.with(environment: try await MixedTestEnvironment.start()) { environment in
            let fixture = CrashFixture(
                environment: environment, configuration: cluster.databaseConfiguration(), databaseURL: try StreamingStandby.url([cluster]), devices: devices)
            try await body(cluster, fixture)
        }
    }

    private static func standbyBeforeFailover(_ pair: StreamingStandby, environment: MixedTestEnvironment, devices: Int) async throws {
        let onStandby = CrashFixture(
            environment: environment, configuration: pair.standby.databaseConfiguration(),
            databaseURL: try StreamingStandby.url([pair.standby]), devices: devices)
        let runs = try await onStandby.bugle(["runs"])
        #expect(runs.status == 0, "\(runs.stderr)")
        let refused = try await onStandby.bugle(["run", try onStandby.campaign(policy: .resend, window: 200), "--quiet"])
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("standby in recovery"), "\(refused.stderr)")
        #expect(try await onStandby.latestRunID() == -1, "a run was created on the standby")

        let standbyFirst = CrashFixture(
            environment: environment, configuration: pair.primary.databaseConfiguration(),
            databaseURL: try StreamingStandby.url([pair.standby, pair.primary], attributes: "primary"), devices: devices)
        let chosen = try await standbyFirst.bugle(["runs"])
        #expect(chosen.status == 0, "\(chosen.stderr)")
        #expect(
            chosen.stderr.contains(
                "using the database server \(try StreamingStandby.location(pair.primary)); passed over \(try StreamingStandby.location(pair.standby)): a standby in recovery (target_session_attrs=primary)"),
            "\(chosen.stderr)")
    }

    private static func failover(_ pair: StreamingStandby, environment: MixedTestEnvironment, devices: Int) async throws {
        let listed = CrashFixture(
            environment: environment, configuration: pair.primary.databaseConfiguration(),
            databaseURL: try StreamingStandby.url([pair.primary, pair.standby], attributes: "read-write"), devices: devices)
        let running = try listed.start(["run", try listed.campaign(policy: .resend, window: 200, rate: 150), "--lease-ttl", "4"])
        try await listed.waitUntil("600 deliveries") { listed.delivered >= 600 }
        try await pair.failOver()
        let run = await running.finish(within: Self.ending)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("the database stopped answering"), "\(run.stdout)")
        #expect(run.stdout.contains("the database answers again (\(try StreamingStandby.location(pair.standby))); resuming the run"), "\(run.stdout)")
        #expect(run.stdout.contains("completed"), "\(run.stdout)")
        #expect(run.stderr.contains("abandoned: handing it over to a new database session"), "\(run.stderr)")
        #expect(run.stdout.contains("wrote the ") && run.stdout.contains(" outcome(s) this worker held"), "\(run.stdout)")

        let promoted = CrashFixture(
            environment: environment, configuration: pair.standby.databaseConfiguration(), databaseURL: try StreamingStandby.url([pair.standby]),
            devices: devices)
        try await promoted.expectEveryLiveTokenSentOnce()
    }
}
