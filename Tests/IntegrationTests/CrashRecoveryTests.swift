import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// RELIABILITY.md §2.1–2.2 with the built `bugle` executable, real PostgreSQL and both simulators over TLS +
/// HTTP/2: deterministic crash points, SIGTERM, a zombie worker, two workers on one run and a PostgreSQL restart.
/// Deliveries are counted from the simulators' records, which outlive every `bugle` process.
/// A timing suite (``TimingPhase``): leases of a few seconds and processes stopped and continued need a CPU that the
/// parallel phase does not leave them.
@Suite(
    "Crash recovery and workers (built executable, simulators, real PostgreSQL)", .serialized, .timeLimit(.minutes(5)),
    .enabled(if: TimingPhase.isActive, TimingPhase.reason)
)
struct CrashRecoveryTests {
    struct FailpointCase: Sendable, CustomStringConvertible {
        var point: Failpoint.Point
        var policy: AmbiguousPolicy
        var description: String { "\(point.rawValue) under \(policy.rawValue)" }
    }

    static let failpointCases: [FailpointCase] = [
        FailpointCase(point: .afterClaim, policy: .resend),
        FailpointCase(point: .afterClaim, policy: .drop),
        FailpointCase(point: .afterResponse, policy: .resend),
        FailpointCase(point: .afterResponse, policy: .drop),
        FailpointCase(point: .afterRecord, policy: .resend),
        FailpointCase(point: .afterRecord, policy: .drop),
    ]

    /// §2.1 #2: (a) after the claim commits → 0 duplicates under resend, the claim `unknown` under drop;
    /// (b) after the responses, before the record → exactly the delivered part of the unrecorded batch duplicates
    /// under resend, the batch `unknown` under drop; (c) after the record → 0 duplicates and 0 unknown.
    @Test("a crash at a failpoint, then resume: the exact duplicates or unknowns the policy promises", arguments: failpointCases)
    func failpoint(_ scenario: FailpointCase) async throws {
        try await CrashFixture.with(devices: 600) { fixture in
            let campaign = try fixture.campaign(policy: scenario.policy, window: 60)
            let crashed = try await fixture.bugle(["run", campaign, "--quiet"], failpoint: "\(scenario.point.rawValue):3")
            #expect(crashed.status == SIGKILL, "expected death by SIGKILL: \(crashed.stderr)")
            let counts = CrashFixture.failpointCounts(crashed.stderr)
            let runID = try await fixture.latestRunID()
            let inFlight = try await fixture.states(runID: runID)["in_flight", default: 0]
            // The dead process's lease has not lapsed yet, but `bugle runs` knows its process is gone.
            let listed = try await fixture.bugle(["runs"])
            #expect(listed.stdout.contains("(no live worker: `bugle resume \(runID)`)"), "\(listed.stdout)")
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            switch (scenario.point, scenario.policy) {
            case (.afterClaim, .resend):
                #expect(counts.first.map { Int64($0) } == inFlight && inFlight > 0, "\(crashed.stderr)")
                #expect(duplicates == 0)
                #expect(unknown == 0)
            case (.afterClaim, .drop):
                #expect(counts.first.map { Int64($0) } == inFlight && inFlight > 0, "\(crashed.stderr)")
                #expect(duplicates == 0)
                #expect(unknown == Int(inFlight))
                // Dropped without ever being sent.
                let dropped = try await fixture.tokens(runID: runID, state: "unknown")
                #expect(dropped.allSatisfy { fixture.deliveries()[$0] == nil })
            case (.afterResponse, .resend):
                #expect(counts.count == 2 && Int64(counts[0]) == inFlight && inFlight > 0, "\(crashed.stderr)")
                #expect(duplicates == counts.last)
                #expect(unknown == 0)
            case (.afterResponse, .drop):
                #expect(counts.count == 2 && Int64(counts[0]) == inFlight && inFlight > 0, "\(crashed.stderr)")
                #expect(duplicates == 0)
                #expect(unknown == counts.first)
            case (.afterRecord, _):
                #expect(inFlight == 0)
                #expect(duplicates == 0)
                #expect(unknown == 0)
            case (.inMaterialize, _):
                Issue.record("not a send-loop failpoint")
            }
        }
    }

    /// Runs a 3,000-device campaign (`drop`, W 200, 400/s per lane) and stops it with SIGTERM after 400 deliveries;
    /// expects the graceful stop's exit 3 and returns the run.
    static func stoppedBySIGTERM(_ fixture: CrashFixture) async throws -> Int64 {
        let campaign = try fixture.campaign(policy: .drop, window: 200, rate: 400)
        let running = try fixture.start(["run", campaign, "--quiet"])
        try await fixture.waitUntil("the first 400 deliveries") { fixture.delivered >= 400 }
        kill(running.process.processIdentifier, SIGTERM)
        let stopped = await running.finish()
        #expect(stopped.status == 3, "\(stopped.stderr)")
        return try await fixture.latestRunID()
    }

    /// §2.1 #3: SIGTERM stops claiming, waits for the answers in flight and records them, exits 3 with the run
    /// paused and nothing in flight; the resume then completes with 0 duplicates and 0 unknown.
    @Test("SIGTERM mid-run: exit 3, nothing in flight; resume gives 0 duplicates and 0 unknown, its --json timing send and report")
    func sigterm() async throws {
        try await CrashFixture.with(devices: 3000) { fixture in
            let runID = try await Self.stoppedBySIGTERM(fixture)
            let states = try await fixture.states(runID: runID)
            #expect(states["in_flight", default: 0] == 0)
            #expect(states["pending", default: 0] > 0, "the run finished before the signal; nothing was interrupted")
            let status = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(client, "SELECT status FROM bugle.runs WHERE id = \(runID)", as: String.self)
            }
            #expect(status == "paused")
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet", "--json"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            // --json: the summary says how long this resume sent and reported (it had only `report`).
            let summary = try JSONSerialization.jsonObject(with: Data(resumed.stdout.utf8)) as? [String: Any]
            let phases = summary?["phase_seconds"] as? [String: Double]
            #expect(phases.map { Set($0.keys) } == ["send", "report"], "\(resumed.stdout)")
            #expect((phases?["send"] ?? 0) > 0, "\(resumed.stdout)")
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates == 0)
            #expect(unknown == 0)
        }
    }

    /// Several `bugle resume` of one paused run started together: one sends it, every other is refused as a resume of
    /// a run with a live worker is (exit 1, "is being sent by", no report written), whether its own check found the
    /// winner's lease or the lease itself was refused (the audit saw those exit 2 and write a report of a running run).
    @Test("four resumes of one paused run at once: one sends it, the others are refused with exit 1 and write no report; nothing sent twice")
    func concurrentResumes() async throws {
        try await CrashFixture.with(devices: 3000) { fixture in
            let runID = try await Self.stoppedBySIGTERM(fixture)
            let reports = try (1...4).map { try CLITests.temporaryFile("resume-\($0).csv", "") }
            for report in reports { try FileManager.default.removeItem(atPath: report) }
            let resumes = try reports.map { try fixture.start(["resume", "\(runID)", "--quiet", "--csv", $0]) }
            var ended: [CLITests.Output] = []
            for resume in resumes { ended.append(await resume.finish()) }
            let winners = ended.indices.filter { ended[$0].status == 0 }
            #expect(winners.count == 1, "\(ended.map { "\($0.status): \($0.stderr)" })")
            for (index, output) in ended.enumerated() where !winners.contains(index) {
                #expect(output.status == 1, "\(output.stderr)")
                #expect(output.stderr.contains("run \(runID) is being sent by"), "\(output.stderr)")
                #expect(!FileManager.default.fileExists(atPath: reports[index]), "a refused resume wrote \(reports[index])")
            }
            for index in winners { #expect(FileManager.default.fileExists(atPath: reports[index])) }
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates == 0)
            #expect(unknown == 0)
        }
    }

    /// §2.1 #4: killed while reading its segment (after its second page is in the ledger). Nothing is sent from a
    /// partial audience and nothing pauses it; `bugle resume` refuses while the segment's reader holds its lease (here a
    /// live process's, set by the test), and once its owner is a process of this host that no longer runs, takes it
    /// over at once, discards the partial rows and reads the segment again from zero.
    @Test("killed while reading its segment: nothing sent, pause refused; resume waits for a live reader, else reads it again from zero and completes with everyone once")
    func killedInMaterialization() async throws {
        try await CrashFixture.with(devices: 3000) { fixture in
            let campaign = try fixture.campaign(policy: .resend, window: 200)
            let crashed = try await fixture.bugle(["run", campaign, "--quiet"], failpoint: "crash_in_materialize:2")
            #expect(crashed.status == SIGKILL, "expected death by SIGKILL: \(crashed.stderr)")
            #expect(crashed.stderr.contains("bugle: failpoint crash_in_materialize: 2 page(s) written"), "\(crashed.stderr)")
            let runID = try await fixture.latestRunID()
            let written = try await fixture.states(runID: runID).values.reduce(0, +)
            #expect(written >= 1_000 && written < 3_000, "\(written) rows written before the crash")
            #expect(fixture.delivered == 0)
            let status = { try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(client, "SELECT status FROM bugle.runs WHERE id = \(runID)", as: String.self)
            } }
            #expect(try await status() == "materializing")
            // A pause would leave a partial audience that a resume then sends as if whole: refused.
            let pause = try await fixture.bugle(["pause", "\(runID)"])
            #expect(pause.status == 1 && pause.stderr.contains("is still reading its segment"), "\(pause.stderr)")
            #expect(try await status() == "materializing")
            // The dead reader's lease has not lapsed; its owner names its pid on this host.
            let deadOwner = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(
                    client, "SELECT materializer FROM bugle.runs WHERE id = \(runID) AND materializer_expires_at > now()", as: String.self)
            } ?? "none"
            let ownerParts = deadOwner.split(separator: ":")
            #expect(ownerParts.count == 3 && String(ownerParts[0]) == ProcessInfo.processInfo.hostName, "\(deadOwner)")
            #expect(kill(pid_t(ownerParts.count == 3 ? String(ownerParts[1]) : "") ?? 0, 0) == -1, "the lease's owner \(deadOwner) still runs")
            // While a live process holds the lease (this test's, as a live reader would), resume refuses and writes nothing.
            let liveOwner = "\(ProcessInfo.processInfo.hostName):\(getpid()):1"
            try await fixture.withClient { client in
                _ = try await client.query("UPDATE bugle.runs SET materializer = \(liveOwner) WHERE id = \(runID)", logger: CrashFixture.logger).collect()
            }
            let refused = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
            try await fixture.withClient { client in
                _ = try await client.query("UPDATE bugle.runs SET materializer = \(deadOwner) WHERE id = \(runID)", logger: CrashFixture.logger).collect()
            }
            #expect(refused.status == 1 && refused.stderr.contains("is still reading its segment in another process"), "\(refused.stderr)")
            #expect(try await fixture.states(runID: runID).values.reduce(0, +) == written)
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(resumed.stdout.contains("(\(written) row(s) written, none sent); reading it again"), "\(resumed.stdout)")
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates == 0)
            #expect(unknown == 0)
        }
    }

    /// A campaign whose segment sleeps 10 ms a row: the count of its bounds alone takes 4 s over 400 devices, so its
    /// reader is surely busy when a test acts on it.
    static func slowSegmentCampaign(_ fixture: CrashFixture) throws -> String {
        try CLITests.temporaryFile(
            "slow-segment.yaml",
            """
            name: slow-segment
            notification_type: crash-test
            dedupe: none
            providers: \(fixture.environment.material.providersFile)
            segment:
              page_size: 100
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices WHERE pg_sleep(0.01) IS NOT NULL
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Slow segment } }
            delivery:
              ambiguous: resend
            """
        )
    }

    /// Waits until the slow segment's statement runs, then `act`s (given its backend's pid).
    static func whenSegmentIsRead(_ fixture: CrashFixture, _ act: (Int32) async throws -> Void) async throws {
        var pid: Int32 = 0
        try await fixture.waitUntil("the segment read under way", seconds: 60) {
            pid = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(
                    client,
                    "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(0.01)%' AND pid <> pg_backend_pid()",
                    as: Int32.self) ?? 0
            }
            return pid > 0
        }
        try await act(pid)
    }

    /// A database blip while the segment was read (a restart, a terminated backend) used to mark the run `failed`, which
    /// no resume can undo: worse than a kill -9 at the same point. The run now stays `materializing`; `run` reads the
    /// segment again once the server answers, and with `--database-outage-limit 0` leaves that to `bugle resume`.
    @Test(
        "the segment reader's backend terminated mid-read: run reads it again and completes; with --database-outage-limit 0 it exits 2 and resume completes",
        arguments: [nil, "0"] as [String?])
    func readerBackendTerminated(_ limit: String?) async throws {
        try await CrashFixture.with(devices: 400) { fixture in
            // 10 ms a row: the count of the bounds alone takes 4 s, so the reader is surely busy when it is terminated.
            let campaign = try Self.slowSegmentCampaign(fixture)
            do {
                let running = try fixture.start(["run", campaign, "--quiet"] + (limit.map { ["--database-outage-limit", $0] } ?? []))
                try await Self.whenSegmentIsRead(fixture) { pid in
                    try await fixture.withClient { client in _ = try await client.query("SELECT pg_terminate_backend(\(pid))", logger: CrashFixture.logger).collect() }
                }
                let output = await running.finish()
                let runID = try await fixture.latestRunID()
                if limit == nil {
                    #expect(output.status == 0, "\(output.stderr)")
                } else {
                    #expect(output.status == 2, "\(output.stderr)")
                    #expect(output.stderr.contains("nothing was sent, and `bugle resume \(runID)` reads the segment again"), "\(output.stderr)")
                    let status = try await fixture.withClient { client in
                        try await LedgerTestSupport.scalar(client, "SELECT status FROM bugle.runs WHERE id = \(runID)", as: String.self)
                    }
                    #expect(status == "materializing")
                    let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
                    #expect(resumed.status == 0, "\(resumed.stderr)")
                }
                let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
                #expect(duplicates == 0 && unknown == 0)
                try await fixture.expectEveryLiveTokenSentOnce()
            }
        }
    }

    /// Ctrl-C or SIGTERM while the segment was read killed the command at once (exit 130 or 143, no word), and SIGINT
    /// inherited as ignored (a script's background job) was dropped: the run went on to send everyone. With `--json`
    /// stdout then stayed empty, so a script could not learn the run to resume.
    @Test("Ctrl-C or SIGTERM while the segment is read: exit 3 naming the signal, nothing sent, the run still materializing; resume completes", arguments: [SIGINT, SIGTERM])
    func interruptedWhileReading(_ signo: Int32) async throws {
        try await CrashFixture.with(devices: 400) { fixture in
            let campaign = try Self.slowSegmentCampaign(fixture)
            let running = try fixture.start(["run", campaign, "--quiet", "--json"])
            try await Self.whenSegmentIsRead(fixture) { _ in kill(running.process.processIdentifier, signo) }
            let output = await running.finish()
            let runID = try await fixture.latestRunID()
            #expect(output.status == 3, "\(output.stderr)")
            let name = signo == SIGINT ? "SIGINT" : "SIGTERM"
            #expect(output.stderr.contains("run \(runID): stopped by \(name) while its segment was read; nothing was sent"), "\(output.stderr)")
            // `--json` gives scripts the run and its state (stdout was empty), with nothing counted: a resume reads again.
            let summary = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
            #expect(summary?["run_id"] as? Int64 == runID && summary?["status"] as? String == "materializing", "\(output.stdout)")
            #expect((summary?["counts"] as? [Any])?.isEmpty == true && (summary?["reason"] as? String)?.contains(name) == true, "\(output.stdout)")
            #expect(fixture.delivered == 0)
            let status = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(client, "SELECT status FROM bugle.runs WHERE id = \(runID)", as: String.self)
            }
            #expect(status == "materializing")
            // `bugle runs` says nobody reads it and how to go on (it showed nothing, as for a run being read).
            let runs = try await fixture.bugle(["runs"])
            #expect(runs.stdout.contains("(nobody is reading its segment: `bugle resume \(runID)` reads it again)"), "\(runs.stdout)")
            let json = try await fixture.bugle(["runs", "--json"])
            #expect(json.stdout.contains("\"live_workers\":0"), "\(json.stdout)")
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            try await fixture.expectEveryLiveTokenSentOnce()
        }
    }

    /// A `bugle tick` stopped by cron's timeout or a shutdown left its run paused for `bugle resume`, and no later tick
    /// took it: the scheduled campaign stalled with no one to notice.
    @Test("SIGTERM to a tick mid-send: exit 3, the answers recorded, the run left for the next tick, which completes it; every live token once")
    func interruptedTick() async throws {
        try await CrashFixture.with(devices: 400) { fixture in
            let sendAt = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3600))
            let campaign = try fixture.campaign(policy: .drop, window: 20, rate: 40, sendAt: sendAt)
            let scheduled = try await fixture.bugle(["run", campaign, "--no-wait", "--quiet", "--csv", "-"])
            #expect(scheduled.status == 0, "\(scheduled.stderr)")
            let runID = try await fixture.latestRunID()
            try await fixture.withClient { client in
                _ = try await client.query(
                    "UPDATE bugle.run_recipients SET next_attempt_at = now() - interval '1 second' WHERE run_id = \(runID)", logger: CrashFixture.logger
                ).collect()
            }
            let ticking = try fixture.start(["tick", "--quiet", "--report-dir", NSTemporaryDirectory()])
            try await fixture.waitUntil("the tick sending") { fixture.delivered >= 20 }
            kill(ticking.process.processIdentifier, SIGTERM)
            let stopped = await ticking.finish()
            #expect(stopped.status == 3, "\(stopped.stderr)")
            #expect((stopped.stdout + stopped.stderr).contains("the next `bugle tick` goes on"), "\(stopped.stdout) \(stopped.stderr)")
            let (status, states) = try await fixture.withClient { client in
                (
                    try await LedgerTestSupport.scalar(
                        client, "SELECT status || ':' || coalesce(pause_reason, '') FROM bugle.runs WHERE id = \(runID)", as: String.self),
                    try await fixture.states(runID: runID)
                )
            }
            #expect(status?.hasPrefix("paused:scheduled: interrupted by SIGTERM") == true, "\(status ?? "no run")")
            #expect((states["pending"] ?? 0) + (states["retry_wait"] ?? 0) > 0, "the tick ended after it had sent everyone: \(states)")
            let again = try await fixture.bugle(["tick", "--quiet", "--report-dir", NSTemporaryDirectory()])
            #expect(again.status == 0, "\(again.stderr)")
            try await fixture.expectEveryLiveTokenSentOnce()
        }
    }

    /// With `--json`, a report that could not be written left stdout empty: the summary went only to the text output.
    @Test("--json with a report that cannot be written: exit 2, and the summary is still one JSON object (report null, kind campaign)")
    func jsonSummaryWhenTheReportFails() async throws {
        try await CrashFixture.with(devices: 40) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 20)
            let output = try await fixture.bugle(["run", campaign, "--quiet", "--json", "--csv", "/dev/full"])
            #expect(output.status == 2, "\(output.stderr)")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stdout)")
            #expect(summary["status"] as? String == "completed")
            #expect(summary["kind"] as? String == "campaign")
            #expect(summary["report"] is NSNull, "\(summary)")
            #expect(output.stderr.contains("write its report again with `bugle report"), "\(output.stderr)")
        }
    }

    /// `bugle cancel` of a run still reading its segment: the reader stops at its next page (it used to read the whole
    /// segment, writing nothing, then say its lease was lost), says why (exit 2), sends nothing, and writes the report
    /// of the cancelled run; `bugle runs` counts the recipients written before the cancel (it showed `-`).
    @Test("cancelled while reading its segment: the reading stops, the run says it was cancelled (exit 2) and sends nothing; its recipients are counted")
    func cancelledInMaterialization() async throws {
        try await CrashFixture.with(devices: 20_000) { fixture in
            // 2,000 pages of 10: seconds of reading, so the cancel lands in the middle of it.
            let campaign = try fixture.campaign(policy: .drop, window: 200, pageSize: 10)
            let report = try CLITests.temporaryFile("cancelled.csv", "")
            try FileManager.default.removeItem(atPath: report)
            let running = try fixture.start(["run", campaign, "--quiet", "--csv", report])
            var runID: Int64 = -1
            try await fixture.waitUntil("the first pages in the ledger") {
                runID = try await fixture.latestRunID()
                guard runID > 0 else { return false }
                return try await fixture.states(runID: runID).values.reduce(0, +) > 0
            }
            let cancel = try await fixture.bugle(["cancel", "\(runID)"])
            #expect(cancel.status == 0, "\(cancel.stderr)")
            let ended = await running.finish()
            #expect(ended.status == 2, "\(ended.stderr)")
            #expect(ended.stderr.contains("run \(runID): stopped reading its segment after"), "\(ended.stderr)")
            #expect(ended.stderr.contains("the run is cancelled; nothing was sent"), "\(ended.stderr)")
            #expect(!ended.stderr.contains("lease"), "\(ended.stderr)")
            // It read on only to the first page that found the run cancelled, not to the segment's end.
            let read = ended.stderr.components(separatedBy: "stopped reading its segment after ").dropFirst().first
                .flatMap { Int($0.prefix { $0.isNumber }) }
            #expect(read.map { $0 < 20_000 } == true, "\(ended.stderr)")
            #expect(fixture.delivered == 0)
            let states = try await fixture.states(runID: runID)
            #expect(states.values.reduce(0, +) < 20_000, "the cancel came after the whole segment was read: \(states)")
            #expect(Set(states.keys).subtracting(["cancelled", "skipped_invalid"]).isEmpty, "\(states)")
            let total = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(client, "SELECT recipients_total FROM bugle.runs WHERE id = \(runID)", as: Int64.self)
            }
            #expect(total != nil && total == states["cancelled"], "recipients_total \(String(describing: total)), states \(states)")
            #expect(FileManager.default.fileExists(atPath: report))
        }
    }

    /// §2.1 #8 (the listmonk shape: a pause and resume that skipped recipients or sent them twice): `bugle pause` from
    /// another terminal five times mid-run, `bugle resume` each time. Each pause ends the worker paused (exit 3) with
    /// nothing in flight; the last resume completes with nobody sent twice and nobody skipped.
    @Test("paused by the operator five times mid-run and resumed each time: nothing sent twice, nobody skipped")
    func operatorPauseResume() async throws {
        try await CrashFixture.with(devices: 4000) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 200, rate: 400)
            var running = try fixture.start(["run", campaign, "--quiet"])
            try await fixture.waitUntil("the run to start sending") { fixture.delivered > 0 }
            let runID = try await fixture.latestRunID()
            for round in 1...5 {
                try await fixture.waitUntil("\(round * 500) deliveries") { fixture.delivered >= round * 500 }
                let pause = try await fixture.bugle(["pause", "\(runID)"])
                #expect(pause.status == 0, "\(pause.stderr)")
                let stopped = await running.finish()
                #expect(stopped.status == 3, "round \(round): \(stopped.stderr)")
                let states = try await fixture.states(runID: runID)
                #expect(states["in_flight", default: 0] == 0, "round \(round): \(states)")
                #expect(states["pending", default: 0] > 0, "round \(round): the run finished before the pause")
                running = try fixture.start(["resume", "\(runID)", "--quiet"])
            }
            let finished = await running.finish()
            #expect(finished.status == 0, "\(finished.stderr)")
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates == 0)
            #expect(unknown == 0)
        }
    }

    /// A paused run whose worker has not left yet (frozen here, as one finishing a slow window would be): `bugle resume`
    /// is refused, saying to wait for it; it used to suggest `bugle worker`, which refuses a paused run. Once the worker
    /// has left (exit 3), the resume completes it.
    @Test("resume of a paused run its worker has not left yet: refused, told to wait for it rather than to join; then resumed")
    func resumeWhileThePausedWorkerLeaves() async throws {
        try await CrashFixture.with(devices: 1000) { fixture in
            let campaign = try fixture.campaign(policy: .resend, window: 100, rate: 200)
            let running = try fixture.start(["run", campaign, "--quiet", "--lease-ttl", "60", "--database-outage-limit", "0"])
            try await fixture.waitUntil("the first 100 deliveries") { fixture.delivered >= 100 }
            let runID = try await fixture.latestRunID()
            kill(running.process.processIdentifier, SIGSTOP)
            let pause = try await fixture.bugle(["pause", "\(runID)"])
            #expect(pause.status == 0, "\(pause.stderr)")
            let refused = try await fixture.bugle(["resume", "\(runID)"])
            kill(running.process.processIdentifier, SIGCONT)
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("run \(runID) is being sent by 1 worker(s)"), "\(refused.stderr)")
            #expect(refused.stderr.contains("it is paused and they are finishing what they sent"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("bugle worker"), "\(refused.stderr)")
            let left = await running.finish()
            #expect(left.status == 3, "\(left.stderr)")
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates == 0)
            #expect(unknown == 0)
        }
    }

    /// How an operator stops a run from outside the worker.
    enum OperatorStop: String, CaseIterable, Sendable {
        /// `sigtermTwice`: SIGTERM twice at once, as GNU `timeout` sends it (to the command, then to its group): one
        /// request, still a graceful stop, not the forced exit a second Ctrl-C a moment later means.
        case pause, cancel, sigint, sigtermTwice
    }

    /// A slow run (5 notifications a second per lane, a window of 400) stopped by the operator: the worker holds a
    /// second of each lane's sends (it used to hold about the whole window), most of them waiting for the lanes' rate.
    /// Those never sent go back unsent at once (`not_sent`,
    /// their attempt given back; `cancelled` once the run is cancelled) instead of going out over the next 40 s; only
    /// what was sent is recorded sent, and nothing is left in flight.
    @Test("a slow run paused, cancelled or interrupted: recipients claimed but not sent go back unsent instead of going out after the stop", arguments: OperatorStop.allCases)
    func stopWithdrawsWaitingSends(_ how: OperatorStop) async throws {
        try await CrashFixture.with(devices: 400) { fixture in
            let campaign = try fixture.campaign(policy: .resend, window: 400, rate: 5)
            let running = try fixture.start(["run", campaign, "--quiet", "--lease-ttl", "6"])
            try await fixture.waitUntil("the first 10 deliveries") { fixture.delivered >= 10 }
            let runID = try await fixture.latestRunID()
            switch how {
            case .pause, .cancel:
                let stop = try await fixture.bugle([how.rawValue, "\(runID)"])
                #expect(stop.status == 0, "\(stop.stderr)")
            case .sigint:
                kill(running.process.processIdentifier, SIGINT)
            case .sigtermTwice:
                kill(running.process.processIdentifier, SIGTERM)
                kill(running.process.processIdentifier, SIGTERM)
            }
            let stopped = await running.finish()
            // At 10 a second in all, the 380 live tokens would have taken 38 s more.
            #expect(fixture.delivered < 200, "\(fixture.delivered) delivered: the claimed recipients went out after the stop")
            let states = try await fixture.states(runID: runID)
            #expect(states["in_flight", default: 0] == 0, "\(states)")
            // Each token the simulators accepted once, and recorded sent; nothing else recorded sent.
            let deliveries = fixture.deliveries()
            #expect(deliveries.values.allSatisfy { $0 == 1 }, "a token delivered twice")
            #expect(Set(deliveries.keys) == (try await fixture.tokens(runID: runID, state: "sent")), "\(states)")
            let notSent = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(
                    client,
                    "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'retry_wait' AND outcome_code = 'not_sent' AND attempts = 0",
                    as: Int64.self)
            } ?? 0
            switch how {
            case .cancel:
                #expect(states["pending", default: 0] + states["retry_wait", default: 0] == 0, "\(states)")
                #expect(states["cancelled", default: 0] >= 200, "\(states)")
                // The summary's rate counts answered notifications, as bugle.run_overview does, not the cancelled ones
                // (it read about 20 times the view's rate here).
                let csv = try CLITests.temporaryFile("cancelled-\(runID).csv", "")
                let summary = try await fixture.bugle(["report", "\(runID)", "--csv", csv]).stdout
                let printed = summary.split(separator: "\n").first.flatMap { $0.components(separatedBy: "s · ").last }
                    .flatMap { Double($0.replacingOccurrences(of: "/s", with: "").replacingOccurrences(of: ",", with: "")) }
                let view = try await fixture.withClient { client in
                    try await LedgerTestSupport.scalar(client, "SELECT rate_per_second FROM bugle.run_overview WHERE run_id = \(runID)", as: Double.self)
                }
                if let printed, let view {
                    // Printed whole from 10/s up, to a tenth below.
                    #expect(abs(printed - view) <= (view >= 9.95 ? 0.5 : 0.05) + 1e-9, "summary \(printed)/s, run_overview \(view)/s: \(summary)")
                } else {
                    Issue.record("no rate: \(summary), view \(String(describing: view))")
                }
            case .pause, .sigint, .sigtermTwice:
                #expect(stopped.status == 3, "\(stopped.stderr)")
                #expect(!stopped.stderr.contains("exiting now"), "\(stopped.stderr)")
                // A lane holds about a second of its sends (5 + 1 each): most of those wait for the rate when the stop comes.
                #expect(notSent >= 4, "\(notSent) handed back unsent; \(states)")
            }
        }
    }

    /// A paced run claims about a second of each lane's sends at a time, not its whole window: with 10/s per lane
    /// and a window of 400, a claim used to hold ~250 recipients of a lane waiting for the rate, and a kill -9 turned
    /// them all `unknown`. Now the rows in flight stay within each lane's claim capacity (rate + burst) plus what waits
    /// to be recorded, while the run goes on and when it is killed.
    @Test("a paced run holds about a second of each lane's sends in flight, not its window: a kill -9 leaves only those in flight")
    func pacedClaimsStaySmall() async throws {
        try await CrashFixture.with(devices: 400) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 400, rate: 10)
            let running = try fixture.start(["run", campaign, "--quiet"])
            try await fixture.waitUntil("the first 10 deliveries") { fixture.delivered >= 10 }
            let runID = try await fixture.latestRunID()
            var most: Int64 = 0
            for target in stride(from: 15, through: 35, by: 5) {
                try await fixture.waitUntil("\(target) deliveries") { fixture.delivered >= target }
                most = max(most, try await fixture.states(runID: runID)["in_flight", default: 0])
            }
            kill(running.process.processIdentifier, SIGKILL)
            _ = await running.finish()
            let held = try await fixture.states(runID: runID)["in_flight", default: 0]
            // Two lanes of 10 + 1, and the answers of the last 100 ms not yet recorded.
            #expect(most <= 40, "\(most) in flight while sending at 10/s per lane")
            #expect(held <= 40, "\(held) left in flight by the kill")
            #expect(most > 0)
        }
    }

    /// A worker killed mid-send, then the run cancelled: what it held in flight used to stay `in_flight` for good (no
    /// command could move it: resume and worker refuse a cancelled run, a second cancel had "nothing to cancel"), and
    /// the reservations of those users stayed held, blocking the type's other campaigns for the day.
    @Test("a run whose worker was killed (kill -9), then cancelled: nothing left in flight or waiting, its unreached users' dedupe reservations released")
    func cancelAfterKill() async throws {
        try await CrashFixture.with(devices: 400) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 400, rate: 10, dedupe: "daily")
            let running = try fixture.start(["run", campaign, "--quiet"])
            try await fixture.waitUntil("the first 20 deliveries") { fixture.delivered >= 20 }
            let runID = try await fixture.latestRunID()
            try await fixture.waitUntil("recipients in flight") { try await fixture.states(runID: runID)["in_flight", default: 0] > 0 }
            kill(running.process.processIdentifier, SIGKILL)
            _ = await running.finish()
            let held = try await fixture.states(runID: runID)["in_flight", default: 0]
            #expect(held > 0, "the kill left nothing in flight; nothing to test")
            let cancelled = try await fixture.bugle(["cancel", "\(runID)"])
            #expect(cancelled.status == 0, "\(cancelled.stderr)")
            #expect(cancelled.stdout.contains("run \(runID): cancelled"), "\(cancelled.stdout)")
            #expect(cancelled.stdout.contains("\(held) recipient(s) left in flight by stopped workers are unknown"), "\(cancelled.stdout)")
            let states = try await fixture.states(runID: runID)
            #expect(states["in_flight", default: 0] == 0 && states["pending", default: 0] == 0 && states["retry_wait", default: 0] == 0, "\(states)")
            #expect(states["unknown", default: 0] == held, "\(states)")
            // Reservations remain only for users this run notified or may have (`unknown`: the killed worker's in-flight
            // sends; `RunLedgerTests.unknownKeepsTheReservation`).
            let unreached = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(
                    client,
                    """
                    SELECT count(*)::bigint FROM bugle.notification_log l
                     WHERE l.run_id = \(runID) AND NOT EXISTS (SELECT 1 FROM bugle.run_recipients r
                                                                WHERE r.run_id = l.run_id AND r.user_id = l.user_id
                                                                  AND r.state IN ('sent', 'unknown'))
                    """, as: Int64.self)
            }
            #expect(unreached == 0, "\(unreached ?? -1) reservation(s) of users the cancelled run never reached")
            // Nothing is left to settle: a second cancel says the run is finished (exit 1), as before.
            let again = try await fixture.bugle(["cancel", "\(runID)"])
            #expect(again.status == 1 && again.stderr.contains("is cancelled; there is nothing to cancel"), "\(again.stderr)")
        }
    }

    /// §2.1 #7: worker A is stopped (SIGSTOP) past its lease; worker B joins, reaps A and takes its in-flight
    /// recipients over; A, continued, finds its lease gone, writes nothing and stops (exit 2). Duplicates ≤ W.
    @Test("a zombie worker (SIGSTOP past its lease) is fenced after another takes over; duplicates stay within W")
    func zombie() async throws {
        try await CrashFixture.with(devices: 2000) { fixture in
            let window = 100
            // Paced to 100/s, the lane holds about a second of sends (W of them) waiting for its rate when A freezes.
            let campaign = try fixture.campaign(policy: .resend, window: window, rate: 100)
            // Without the outage recovery: a renewal caught by the freeze times out on waking, and A would then go on
            // as a database outage (join the run again), which is FailoverTests' subject, not this one.
            let a = try fixture.start(["run", campaign, "--quiet", "--lease-ttl", "3", "--database-outage-limit", "0"])
            try await fixture.waitUntil("A's first 300 deliveries") { fixture.delivered >= 300 }
            kill(a.process.processIdentifier, SIGSTOP)
            let runID = try await fixture.latestRunID()
            // A's lease runs out while it is frozen (the database clock decides).
            try await fixture.waitUntil("A's lease to expire", seconds: 30) {
                try await fixture.withClient { client in
                    try await LedgerTestSupport.scalar(
                        client, "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at >= now()", as: Int64.self
                    ) == 0
                }
            }
            let sentBeforeTakeover = try await fixture.states(runID: runID)["sent", default: 0]
            // Every connection that has delivered so far is A's (B is not started yet).
            let connectionsOfA = (
                apns: Set(fixture.environment.apns.accepted().map(\.connectionID)), fcm: Set(fixture.environment.fcm.accepted().map(\.connectionID))
            )
            let b = try fixture.start(["worker", "\(runID)", "--quiet", "--lease-ttl", "10"])
            // B has taken over once A's row is gone and B's is there.
            try await fixture.waitUntil("B's lease", seconds: 120) {
                if !b.process.isRunning {
                    kill(a.process.processIdentifier, SIGCONT)
                    let early = await b.finish()
                    _ = await a.finish()
                    Issue.record("worker B ended before taking over (exit \(early.status)): \(early.stderr)")
                    throw CancellationError()
                }
                return try await fixture.withClient { client in
                    try await LedgerTestSupport.scalar(
                        client, "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at >= now()", as: Int64.self
                    ) == 1
                }
            }
            let woken = Date().timeIntervalSince1970
            kill(a.process.processIdentifier, SIGCONT)
            let zombie = await a.finish()
            let worker = await b.finish()
            // A held about W sends for its lane's rate when it froze. They used to go out the moment it woke, before
            // its heartbeat learned the lease was gone (B resent the same recipients: the audit counted 158 of 194
            // duplicates from the frozen worker); its requests' gate now closes half a TTL after its last renewal.
            let writtenAfterWaking =
                fixture.environment.apns.accepted().filter { $0.time >= woken && connectionsOfA.apns.contains($0.connectionID) }.count
                + fixture.environment.fcm.accepted().filter { $0.time >= woken && connectionsOfA.fcm.contains($0.connectionID) }.count
            // (A send checked and granted just as A froze can still be written as it wakes: a few, not the held W.
            // Measured with debug builds: 0 now, 25 before.)
            #expect(writtenAfterWaking <= 5, "the zombie wrote \(writtenAfterWaking) requests after waking")
            #expect(zombie.status == 2, "the zombie must stop fenced: \(zombie.stderr)")
            #expect(zombie.stderr.contains("lease"), "\(zombie.stderr)")
            #expect(worker.status == 0, "\(worker.stderr)")
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates <= window)
            #expect(unknown == 0)
            #expect(sentBeforeTakeover > 0)
        }
    }

    /// Scale-out: a second worker joins a running run; both send, and every recipient is delivered exactly once.
    /// §2.1 #10: the window W holds for the run as a whole, sampled from the ledger every 20 ms while both send.
    @Test("a worker whose providers file lacks a lane the run needs is refused alone (exit 1); the run goes on and completes")
    func workerWithoutALane() async throws {
        try await CrashFixture.with(devices: 400) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 100, rate: 50)
            let first = try fixture.start(["run", campaign, "--quiet"])
            try await fixture.waitUntil("the run to start sending") { fixture.delivered >= 20 }
            let runID = try await fixture.latestRunID()
            // The same providers file without its fcm: section.
            let full = try String(contentsOfFile: fixture.environment.material.providersFile, encoding: .utf8)
            var kept: [Substring] = []
            var inFCM = false
            for line in full.split(separator: "\n", omittingEmptySubsequences: false) {
                if let first = line.first, first != " ", first != "#" { inFCM = line.hasPrefix("fcm:") }
                if !inFCM { kept.append(line) }
            }
            #expect(kept.count < full.split(separator: "\n", omittingEmptySubsequences: false).count, "no fcm: section to take out")
            let apnsOnly = try CLITests.temporaryFile("apns-only.yaml", kept.joined(separator: "\n"))
            let joined = try await fixture.bugle(["worker", "\(runID)", "--providers", apnsOnly])
            #expect(joined.status == 1, "\(joined.stderr)")
            #expect(joined.stderr.contains("this worker cannot send it") && joined.stderr.contains("the run goes on with its other workers"), "\(joined.stderr)")
            // It used to halt the run the first worker was delivering.
            let one = await first.finish()
            #expect(one.status == 0, "\(one.stderr)")
            try await fixture.expectEveryLiveTokenSentOnce()
        }
    }

    @Test("SIGTERM to one of two workers: it leaves the run to the other (exit 0, saying so, not pointing at resume); the run completes, everyone once")
    func signalledWorkerLeaves() async throws {
        try await CrashFixture.with(devices: 800) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 100, rate: 60)
            let first = try fixture.start(["run", campaign, "--quiet"])
            try await fixture.waitUntil("the run to start sending") { fixture.delivered >= 20 }
            let runID = try await fixture.latestRunID()
            let second = try fixture.start(["worker", "\(runID)", "--quiet"])
            try await fixture.waitUntil("the second worker to join") {
                try await fixture.withClient { client in
                    try await LedgerTestSupport.scalar(
                        client, "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at > now()", as: Int64.self) ?? 0
                } >= 2
            }
            kill(second.process.processIdentifier, SIGTERM)
            let left = await second.finish()
            #expect(left.status == 0, "\(left.stdout) \(left.stderr)")
            #expect(left.stdout.contains("this worker left (interrupted by SIGTERM); the run goes on with its 1 other worker(s)"), "\(left.stdout)")
            #expect(!left.stdout.contains("bugle resume"), "\(left.stdout)")
            let one = await first.finish()
            #expect(one.status == 0, "\(one.stderr)")
            try await fixture.expectEveryLiveTokenSentOnce()
        }
    }

    /// `bugle worker --json` says how long it sent, as `bugle resume` does: its `phase_seconds` had `report` alone.
    @Test("a worker's --json summary times its send phase (with --csv, send and report), as resume's does")
    func workerPhaseSeconds() async throws {
        try await CrashFixture.with(devices: 800) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 100, rate: 60)
            let first = try fixture.start(["run", campaign, "--quiet"])
            try await fixture.waitUntil("the run to start sending") { fixture.delivered >= 20 }
            let runID = try await fixture.latestRunID()
            let csv = TestScratch.root + "worker-\(runID)-\(UUID().uuidString.prefix(8)).csv"
            let joined = try await fixture.bugle(["worker", "\(runID)", "--quiet", "--json", "--csv", csv])
            let one = await first.finish()
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(one.status == 0, "\(one.stderr)")
            let summary = try JSONSerialization.jsonObject(with: Data(joined.stdout.utf8)) as? [String: Any]
            let phases = summary?["phase_seconds"] as? [String: Double]
            #expect(phases.map { Set($0.keys) } == ["send", "report"], "\(joined.stdout)")
            #expect((phases?["send"] ?? 0) > 0, "\(joined.stdout)")
            try await fixture.expectEveryLiveTokenSentOnce()
        }
    }

    @Test("two workers on one run deliver each recipient exactly once, both send, and never more than W are in flight between them")
    func twoWorkers() async throws {
        try await CrashFixture.with(devices: 4000) { fixture in
            let window = 200
            let campaign = try fixture.campaign(policy: .resend, window: window, rate: 500)
            let first = try fixture.start(["run", campaign, "--quiet", "--lease-ttl", "6"])
            try await fixture.waitUntil("the run to start sending") { fixture.delivered >= 200 }
            let runID = try await fixture.latestRunID()
            // Not quiet: its progress lines must say the run has two workers (their counts are this worker's).
            let secondProcess = try fixture.start(["worker", "\(runID)", "--progress-interval", "0.2", "--lease-ttl", "6"])
            let (largest, samples) = try await fixture.withClient { client -> (Int64, Int) in
                var largest: Int64 = 0
                var samples = 0
                while first.process.isRunning || secondProcess.process.isRunning {
                    let inFlight = try await LedgerTestSupport.scalar(
                        client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'in_flight'", as: Int64.self
                    ) ?? 0
                    largest = max(largest, inFlight)
                    samples += 1
                    try await Task.sleep(for: .milliseconds(20))
                }
                return (largest, samples)
            }
            let one = await first.finish()
            let second = await secondProcess.finish()
            #expect(one.status == 0, "\(one.stderr)")
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.split(separator: "\n").contains { $0.hasPrefix("progress run=") && $0.contains(" workers=2") }, "\(second.stderr)")
            #expect(samples >= 20, "\(samples) samples")
            #expect(largest <= Int64(window), "\(largest) in flight at once, over W = \(window)")
            #expect(largest >= Int64(window / 4), "the window was never used: at most \(largest) in flight")
            // No retries happened, so no recipient was charged more than its one attempt.
            let attempts = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(client, "SELECT max(attempts)::bigint FROM bugle.run_recipients WHERE run_id = \(runID)", as: Int64.self)
            }
            #expect(attempts == 1)
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates == 0)
            #expect(unknown == 0)
            let epochs = try await fixture.withClient { client in
                try await LedgerTestSupport.scalar(
                    client, "SELECT count(DISTINCT claim_epoch)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'",
                    as: Int64.self
                )
            }
            #expect(epochs == 2, "both workers must have sent")
        }
    }

    /// §2.2 #11/#12 in process: the backends are killed, then the server is restarted (`-m immediate`) while the
    /// runner sends. It holds its outcomes, reconnects with backoff and completes: 0 duplicates, 0 lost, nothing
    /// failed. The server is this test's own cluster, so the restart touches no other test.
    @Test("PostgreSQL killed backends and an immediate restart mid-run: the run completes, nothing lost or duplicated")
    func postgresRestart() async throws {
        // Durable: a throwaway cluster's `synchronous_commit=off` loses acknowledged commits in an immediate restart,
        // which would show up here as duplicates that no client could prevent.
        try await OwnClusterCampaign.with(name: "restart", devices: 3000, window: 200, rate: 500, durability: .durable) { run in
            let logger = run.logger
            let ending = try await Database.withClient(run.configuration, logger: logger) { client in
                // A call stuck on a killed backend is abandoned and retried after 5 s (30 s in production).
                async let ending = run.runner(client, tuning: OwnClusterCampaign.tuning(databaseDeadline: .seconds(5))).run(owner: "restart-test")
                try await Self.waitFor { run.delivered >= 500 }
                // Killed backends, three times.
                for _ in 0..<3 {
                    try await Database.withClient(run.configuration.with(database: "postgres"), logger: logger) { admin in
                        _ = try await admin.query(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'bugle' AND pid <> pg_backend_pid()",
                            logger: logger
                        ).collect()
                    }
                    let before = run.delivered
                    try await Self.waitFor { run.delivered >= before + 200 }
                }
                // An immediate restart (no checkpoint: crash recovery on start).
                try await run.cluster.stop(mode: .immediate)
                _ = try await run.cluster.start(logger: TestDatabase.logger)
                return try await ending.ending
            }
            #expect(ending == .completed)
            let states = try await run.states()
            #expect(states == run.finishedStates, "\(states)")
            let deliveries = run.deliveries()
            #expect(deliveries.count == run.live)
            let twice = deliveries.filter { $0.value > 1 }.map(\.key)
            let suspects = try await Database.withClient(run.configuration, logger: logger) { client in
                let rows = try await client.query(
                    """
                    SELECT seq, state, attempts, claim_epoch, coalesce(outcome_code, ''), left(token, 8) FROM bugle.run_recipients
                     WHERE run_id = \(run.runID) AND (token = ANY(\(twice)) OR state = 'skipped_inactive') ORDER BY seq
                    """,
                    logger: logger
                )
                var lines: [String] = []
                for try await row in rows.decode((Int64, String, Int, Int64?, String, String).self) { lines.append("\(row)") }
                return lines
            }
            let apnsTwice = run.environment.apns.accepted().filter { twice.contains($0.token) }.prefix(6).map { "\($0.token.prefix(12)) t=\($0.time) c=\($0.connectionID) s=\($0.streamID)" }
            let fcmTwice = run.environment.fcm.accepted().filter { twice.contains($0.target) }.prefix(6).map { "\($0.target.prefix(12)) \($0)" }
            #expect(twice.isEmpty, "duplicates after the restart: \(apnsTwice) \(fcmTwice) \(suspects)")
        }
    }

    /// §2.2 #15 in process: the server turns read-only mid-run (`default_transaction_read_only`, as after a failover to
    /// a standby). No claim can commit, so nothing is sent beyond what was already claimed; lease renewals fail too,
    /// so the worker stops opening requests at TTL/2. Once the server is writable again the outcomes it held land,
    /// and a resume completes the run: every live token delivered, duplicates within W.
    @Test("PostgreSQL turned read-only mid-run: sends stop at what was claimed, the worker self-fences, its outcomes land once writable, a resume completes")
    func postgresTurnsReadOnly() async throws {
        let window = 200
        try await OwnClusterCampaign.with(name: "read-only", devices: 3000, window: window, rate: 300) { run in
            let tuning = OwnClusterCampaign.tuning(leaseTTLSeconds: 4, databaseDeadline: .seconds(5))
            let (first, sentWhileReadOnly, resumed) = try await Database.withClient(run.configuration, logger: run.logger) { client in
                let control = RunControl()
                async let ending = run.runner(client, control: control, tuning: tuning).run(owner: "read-only-test")
                try await Self.waitFor { run.delivered >= 500 }
                try await run.administer("ALTER SYSTEM SET default_transaction_read_only = on")
                let atSwitch = run.delivered
                // Renewals now fail: within TTL/2 (2 s) of the last one the worker stops opening requests.
                try await Self.waitFor { control.stopRequest == .leaseLost(nil) }
                // Claims committed before the server re-read its settings may still be sent: at most the window,
                // plus one claim that was already running.
                let sentWhileReadOnly = run.delivered - atSwitch
                try await run.administer("ALTER SYSTEM RESET default_transaction_read_only")
                let first = try await ending.ending
                return (first, sentWhileReadOnly, try await run.runner(client, tuning: tuning).run(owner: "read-only-resume").ending)
            }
            #expect(first == .fenced(nil) || first == .fenced(.running), "\(first)")
            #expect(sentWhileReadOnly <= 2 * window, "\(sentWhileReadOnly) sent after the server turned read-only")
            #expect(resumed == .completed)
            let states = try await run.states()
            #expect(states == run.finishedStates, "\(states)")
            #expect(run.deliveries().count == run.live)
            #expect(run.duplicates() <= window, "\(run.duplicates()) duplicates")
        }
    }

    /// §2.2 #13 in process: worker A reaches PostgreSQL through a proxy whose path goes dark (every call hangs, no
    /// error comes back). A stops opening requests before its lease could have expired (renewals time out after
    /// TTL/3, it self-fences at TTL/2); a claim under way is abandoned, not counted as a failure of the run. Then:
    /// - `takeOver`: the path stays dark past the TTL. Worker B, on a direct path, takes the run once A's lease has
    ///   expired, takes A's in-flight recipients back and completes it. When the path returns, A's held outcome writes
    ///   are fenced: they change nothing. Duplicates within W.
    /// - otherwise the path returns first: A records every outcome it holds, hands back what it claimed but never
    ///   sent, and leaves the run paused; a resume completes it with nothing sent twice.
    @Test(
        "PostgreSQL unreachable: the worker stops sending before its lease expires; past the TTL another completes the run and the first is fenced, sooner the first records what it holds and a resume sends nothing twice",
        arguments: [true, false]
    )
    func postgresUnreachable(takeOver: Bool) async throws {
        let window = 200
        try await OwnClusterCampaign.with(name: "dark", devices: 3000, window: window, rate: 300) { run in
            let logger = run.logger
            let socket = try #require(run.configuration.unixSocketPath)
            let proxy = try await BlackholeProxy.start(upstream: socket)
            var throughProxy = DatabaseConfiguration(
                endpoint: .tcp(host: "127.0.0.1", port: proxy.port), username: run.configuration.username, database: run.configuration.database, sslMode: .disable)
            throughProxy.connectTimeout = .seconds(2)
            let tuning = OwnClusterCampaign.tuning(leaseTTLSeconds: 4, databaseDeadline: .seconds(3))
            let control = RunControl()
            let outcome: (RunResult.Ending, Int, RunResult.Ending)
            do {
                outcome = try await Database.withClient(throughProxy, logger: logger) { darkClient in
                    async let ending = run.runner(darkClient, control: control, tuning: tuning).run(owner: "worker-a")
                    try await Self.waitFor { run.delivered >= 500 }
                    proxy.setDark(true)
                    let atDark = run.delivered
                    try await Self.waitFor { control.stopRequest == .leaseLost(nil) }
                    // What A had claimed before the path went dark may still be sent, and nothing after.
                    let sentWhileDark = run.delivered - atDark
                    let resume = {
                        try await Database.withClient(run.configuration, logger: logger) { client in
                            // B starts once A's lease has expired or A has left, as `bugle resume` would be let in.
                            let deadline = ContinuousClock.now + .seconds(60)
                            while try await LedgerTestSupport.scalar(
                                client, "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(run.runID) AND expires_at > now()", as: Int64.self) != 0 {
                                guard ContinuousClock.now < deadline else { throw CancellationError() }
                                try await Task.sleep(for: .milliseconds(50))
                            }
                            return try await run.runner(client, tuning: tuning).run(owner: "worker-b").ending
                        }
                    }
                    if takeOver {
                        let second = try await resume()
                        proxy.setDark(false)
                        return (try await ending.ending, sentWhileDark, second)
                    }
                    proxy.setDark(false)
                    let first = try await ending.ending
                    return (first, sentWhileDark, try await resume())
                }
            } catch {
                await proxy.stop()
                throw error
            }
            await proxy.stop()
            let (first, sentWhileDark, second) = outcome
            #expect(sentWhileDark <= 2 * window, "\(sentWhileDark) sent after the path went dark")
            #expect(second == .completed)
            #expect(first == .fenced(nil) || first == .fenced(.running) || first == .fenced(.completed), "\(first)")
            let states = try await run.states()
            #expect(states == run.finishedStates, "\(states)")
            #expect(run.deliveries().count == run.live)
            #expect(run.duplicates() <= (takeOver ? window : 0), "\(run.duplicates()) duplicates")
        }
    }

    private static func waitFor(seconds: Double = 120, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// §2.1 #1, opt-in (`BUGLE_LONG_TESTS=1`): ten kill -9 / resume cycles at random moments of a 200,000-recipient
    /// mixed campaign. Every recipient ends terminal, none is skipped, and duplicates stay within 10 × W.
    @Test(
        "10 random kill -9 / resume cycles on 200,000 mixed recipients: all terminal, duplicates ≤ 10 × W",
        .enabled(if: ProcessInfo.processInfo.environment["BUGLE_LONG_TESTS"] == "1")
    )
    func randomKills() async throws {
        try await CrashFixture.with(devices: 200_000) { fixture in
            let window = 500
            let campaign = try fixture.campaign(policy: .resend, window: window)
            var generator = SystemRandomNumberGenerator()
            var running = try fixture.start(["run", campaign, "--quiet"])
            var kills = 0
            while kills < 10 {
                let target = fixture.delivered + Int.random(in: 2_000...15_000, using: &generator)
                try await fixture.waitUntil("more deliveries", seconds: 600) { fixture.delivered >= target || !running.process.isRunning }
                guard running.process.isRunning else { break }
                kill(running.process.processIdentifier, SIGKILL)
                _ = await running.finish()
                kills += 1
                running = try fixture.start(["resume", "\(try await fixture.latestRunID())", "--quiet"])
            }
            let last = await running.finish()
            #expect(last.status == 0, "\(last.stderr)")
            let runID = try await fixture.latestRunID()
            if try await fixture.states(runID: runID)["pending", default: 0] > 0 {
                let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet"])
                #expect(resumed.status == 0)
            }
            let (duplicates, unknown) = try await fixture.checkInvariants(runID: runID)
            #expect(duplicates <= kills * window)
            #expect(unknown == 0)
        }
    }
}
