import BugleCore
import BugleRunner
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

@Suite("Run ledger end to end (real PostgreSQL, fake provider lane)")
struct RunLedgerTests {
    typealias Support = LedgerTestSupport

    /// A segment that lists some devices a second time under another device id (an even id first, an odd one again).
    struct Relisting: Sendable, CustomTestStringConvertible {
        var devices: Int
        /// The segment's second branch: the devices listed again, under their second device id.
        var again: String
        var pageSize: Int
        var duplicates: Int64
        var testDescription: String { "\(devices) devices, \(duplicates) listed again, pages of \(pageSize)" }

        static let cases = [
            // Every third device, right after itself (the same page) or about two pages later (a page read while the
            // first one's insert may still be running).
            Relisting(
                devices: 1_000,
                again: "SELECT d.id * 2 + CASE WHEN d.id % 6 = 0 THEN 1 ELSE 101 END, d.user_id, d.token, d.platform FROM bugle.devices d WHERE d.id % 3 = 0",
                pageSize: 50, duplicates: 333),
            // Every device: every hash repeats.
            Relisting(devices: 2_000, again: "SELECT d.id * 2 + 1, d.user_id, d.token, d.platform FROM bugle.devices d", pageSize: 500, duplicates: 2_000),
        ]
    }

    /// The materializer's duplicate-token sieve: the default; one so small that most tokens are false candidates;
    /// one that overflows, so the collapse reads every row.
    struct Sieve: Sendable, CustomTestStringConvertible {
        var sieve: RepeatedTokenSieve
        var testDescription: String

        static let cases = [
            Sieve(sieve: RepeatedTokenSieve(), testDescription: "default sieve"),
            Sieve(sieve: RepeatedTokenSieve(log2Bits: 10, candidateLimit: 1_000_000), testDescription: "false candidates"),
            Sieve(sieve: RepeatedTokenSieve(candidateLimit: 10), testDescription: "overflowing sieve"),
        ]
    }

    @Test("a run reading its segment cannot be paused (it would keep a partial audience), only cancelled; it reads every page and becomes ready")
    func pauseRefusedWhileMaterializing() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 300)
            let campaign = Support.campaign(pageSize: 100)
            let repository = RunRepository(client: client, logger: Support.logger)
            let runID = try await repository.createRun(campaign: campaign, yaml: "name: test", periodKey: nil)
            #expect(try await repository.setStatus(runID: runID, to: .paused, reason: "operator") == false)
            #expect(try await repository.run(id: runID)?.status == .materializing)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: Support.logger)
            let report = try await Materializer(client: client, logger: Support.logger).materialize(runID: runID, campaign: campaign, reader: reader)
            #expect(report.recipients == 300)
            #expect(try await repository.run(id: runID)?.status == .ready)
            #expect(try await repository.setStatus(runID: runID, to: .paused, reason: "operator"))
            // Cancel applies while materializing.
            let other = try await repository.createRun(campaign: campaign, yaml: "name: other", periodKey: nil)
            #expect(try await repository.setStatus(runID: other, to: .cancelled, reason: "operator"))
            #expect(try await repository.run(id: other)?.status == .cancelled)
            // Its reader writes nothing, says it found the run closed, and leaves it cancelled (not ready).
            let closed = try await Materializer(client: client, logger: Support.logger).materialize(runID: other, campaign: campaign, reader: reader)
            #expect(closed.closed && closed.recipients == 0)
            #expect(try await repository.run(id: other)?.status == .cancelled)
            #expect(try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(other)", as: Int64.self) == 0)
            #expect(!report.closed)
        }
    }

    @Test("a token listed twice, on the same page or pages apart, becomes one recipient; the rest are counted as collapsed", arguments: Relisting.cases, Sieve.cases)
    func duplicateTokensCollapseAcrossPages(_ relisting: Relisting, _ sieve: Sieve) async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: relisting.devices)
            let sql = "SELECT d.id * 2 AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d UNION ALL " + relisting.again
            let campaign = Support.campaign(sql: sql, pageSize: relisting.pageSize)
            let runID = try await RunRepository(client: client, logger: Support.logger).createRun(campaign: campaign, yaml: "name: test", periodKey: nil)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: Support.logger)
            let report = try await Materializer(client: client, logger: Support.logger, sieve: sieve.sieve).materialize(runID: runID, campaign: campaign, reader: reader)
            let devices = Int64(relisting.devices)
            #expect(report.recipients == devices)
            #expect(report.skipped[.duplicateToken] == relisting.duplicates)
            let rows = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID)", as: Int64.self)
            #expect(rows == devices)
            let firstSeen = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND device_id % 2 = 0", as: Int64.self)
            #expect(firstSeen == devices, "the earlier listing of a token is the one kept")
            let collapsed = try await Support.scalar(client, "SELECT duplicates_collapsed FROM bugle.runs WHERE id = \(runID)", as: Int64.self)
            #expect(collapsed == relisting.duplicates)
            // The dry run's counts (the scan's sieve, and the database's full count) agree with what the real run collapsed.
            #expect(try await reader.read(duplicateSieve: RepeatedTokenSieve()) { _ in }.duplicateTokens == relisting.duplicates)
            #expect(try await reader.duplicateTokenCount() == relisting.duplicates)
        }
    }

    /// RELIABILITY.md #35: one token listed for several users goes to the one registered latest (the segment's
    /// `registered_at`), NULLs last, the first listed among equal times; a user with three devices gets three.
    static let sharedTokens = """
        SELECT * FROM (VALUES
          (1::bigint, 'alice', 'aaaa0000aaaa0000', 'ios', '2026-01-01 00:00+00'::timestamptz),
          (2, 'bob', 'aaaa0000aaaa0000', 'ios', '2026-03-01 00:00+00'),
          (3, 'carol', 'aaaa0000aaaa0000', 'ios', NULL),
          (4, 'dave', 'bbbb0000bbbb0000', 'ios', NULL),
          (5, 'erin', 'bbbb0000bbbb0000', 'ios', NULL),
          (6, 'frank', 'fcm-shared', 'android', '2026-02-01 00:00+00'),
          (7, 'gina', 'fcm-shared', 'android', '2026-02-01 00:00+00'),
          (8, 'hal', 'cccc0000cccc0001', 'ios', NULL),
          (9, 'hal', 'cccc0000cccc0002', 'ios', '2025-05-05 00:00+00'),
          (10, 'hal', 'fcm-hal-3', 'android', NULL),
          (11, 'ivy', 'fcm-late', 'android', '2026-04-01 00:00+00'),
          (12, 'jack', 'fcm-late', 'android', 'infinity')
        ) AS v(device_id, user_id, token, platform, registered_at)
        """

    @Test("a token listed for several users is kept for the one registered latest (registered_at; NULLs last; first listed on a tie)", arguments: Sieve.cases)
    func sharedTokenGoesToLatestRegistered(_ sieve: Sieve) async throws {
        try await Support.withFreshDatabase { client in
            let campaign = Support.campaign(sql: Self.sharedTokens, pageSize: 4)
            let runID = try await RunRepository(client: client, logger: Support.logger).createRun(campaign: campaign, yaml: "name: test", periodKey: nil)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: Support.logger)
            let report = try await Materializer(client: client, logger: Support.logger, sieve: sieve.sieve).materialize(runID: runID, campaign: campaign, reader: reader)
            #expect(report.recipients == 7)
            #expect(report.skipped[.duplicateToken] == 5)
            let rows = try await client.query(
                "SELECT device_id, user_id FROM bugle.run_recipients WHERE run_id = \(runID) ORDER BY device_id", logger: Support.logger
            )
            var kept: [String] = []
            for try await (device, user) in rows.decode((Int64, String).self) { kept.append("\(device):\(user)") }
            #expect(kept == ["2:bob", "4:dave", "6:frank", "8:hal", "9:hal", "10:hal", "12:jack"])
        }
    }

    @Test("the shared token's latest owner is the one sent and logged; a user with three devices gets three sends and one notification_log row")
    func sharedTokenSendsAndLogs() async throws {
        try await Support.withFreshDatabase { client in
            let apns = FakeProvider(kind: .apns)
            let fcm = FakeProvider(kind: .fcm)
            let campaign = Support.campaign(sql: Self.sharedTokens, pageSize: 4, dedupe: .daily)
            let (runID, result) = try await Support.runCampaign(client, campaign, providers: [.apns: apns, .fcm: fcm], periodKey: "d:2026-11-26")
            #expect(result.ending == .completed)
            let sent = (apns.delivered + fcm.delivered).map(\.deviceID).sorted()
            #expect(sent == [2, 4, 6, 8, 9, 10, 12])
            let logged = try await client.query(
                "SELECT user_id, count(*)::bigint FROM bugle.notification_log WHERE status = 'sent' GROUP BY user_id ORDER BY user_id",
                logger: Support.logger
            )
            var perUser: [String: Int64] = [:]
            for try await (user, count) in logged.decode((String, Int64).self) { perUser[user] = count }
            #expect(perUser == ["bob": 1, "dave": 1, "frank": 1, "hal": 1, "jack": 1])
            let collapsed = try await Support.scalar(client, "SELECT duplicates_collapsed FROM bugle.runs WHERE id = \(runID)", as: Int64.self)
            #expect(collapsed == 5)
        }
    }

    @Test("a registered_at column that is not a timestamp is refused before anything is written, naming the column and its type", arguments: [
        ("'2026-01-01'::text", "text"), ("42", "integer"),
    ])
    func registeredAtMustBeATimestamp(_ value: String, _ type: String) async throws {
        try await Support.withFreshDatabase { client in
            let sql = "SELECT 1::bigint AS device_id, 'u' AS user_id, 'aaaa0000aaaa0000' AS token, 'ios' AS platform, \(value) AS registered_at"
            let campaign = Support.campaign(sql: sql)
            let repository = RunRepository(client: client, logger: Support.logger)
            let runID = try await repository.createRun(campaign: campaign, yaml: "name: test", periodKey: nil)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: Support.logger)
            let error = await #expect(throws: SegmentError.self) {
                _ = try await Materializer(client: client, logger: Support.logger).materialize(runID: runID, campaign: campaign, reader: reader)
            }
            #expect(error?.message.contains("registered_at column is of type \(type)") == true, "\(String(describing: error))")
            #expect(try await repository.run(id: runID)?.status == .failed)
            let rows = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID)", as: Int64.self)
            #expect(rows == 0)
        }
    }

    @Test("materialized rows keep awkward text through COPY (tabs, newlines, backslashes, quotes); skipped rows finish at the writing transaction's time; a claim returns the same text, NULLs in place")
    func copiedRowsKeepTheirText() async throws {
        try await Support.withFreshDatabase { client in
            let sql = """
                SELECT * FROM (VALUES
                  (1::bigint, 'tab' || chr(9) || 'x' || chr(10) || 'y' || chr(13) || 'z\\w', 'abcd' || md5('1') || md5('2'), 'ios', 'de-AT',
                   'a\\b "c"' || chr(10) || 'd' || chr(9) || '\\N', 'Europe/Vienna'),
                  (2, 'ünï\\', 'fcm-' || md5('x'), 'android', NULL, NULL, NULL),
                  (3, 'skip\\me' || chr(9), NULL, 'ios', 'en', 'x', NULL)
                ) AS v(device_id, user_id, token, platform, locale, note, timezone)
                """
            let campaign = Support.campaign(sql: sql, pageSize: 2)
            let before = try await Support.scalar(client, "SELECT now()", as: Date.self)
            let (runID, store) = try await Support.materializedRun(client, campaign)
            let rows = try await client.query(
                """
                SELECT seq, user_id, token IS NOT DISTINCT FROM (CASE seq WHEN 1 THEN 'abcd' || md5('1') || md5('2') WHEN 2 THEN 'fcm-' || md5('x') END), state, coalesce(variables->>'note', '<null>'), coalesce(outcome_code, ''),
                       finished_at IS NOT NULL AND finished_at >= \(before ?? Date.distantPast) AND finished_at <= now(),
                       next_attempt_at = '-infinity'
                  FROM bugle.run_recipients WHERE run_id = \(runID) ORDER BY seq
                """,
                logger: Support.logger
            )
            var seen: [(Int64, String, Bool, String, String, String, Bool, Bool)] = []
            for try await row in rows.decode((Int64, String, Bool, String, String, String, Bool, Bool).self) { seen.append(row) }
            #expect(seen.map(\.0) == [1, 2, 3])
            #expect(seen.map(\.1) == ["tab\tx\ny\rz\\w", "ünï\\", "skip\\me\t"])
            #expect(seen.map(\.2) == [true, true, true], "tokens stored as read; none for the skipped row")
            #expect(seen.map(\.3) == ["pending", "pending", "skipped_invalid"])
            #expect(seen.map(\.4) == ["a\\b \"c\"\nd\t\\N", "<null>", "<null>"])
            #expect(seen.map(\.5) == ["", "", SkipReason.missingToken.rawValue])
            #expect(seen.map(\.6) == [false, false, true], "only the skipped row is finished, at the transaction's time")
            #expect(seen.map(\.7) == [true, true, true])
            // The claim returns its rows as one row of arrays (ClaimedColumns): the same text, NULLs in their places.
            let lease = try #require(try await store.acquireLease(runID: runID, owner: "w", ttlSeconds: 120, mode: .exclusive))
            guard case .claimed(let claimed) = try await store.claim(lease, limits: [.apns: 5, .fcm: 5], claimID: 1) else {
                Issue.record("fenced")
                return
            }
            #expect(claimed.map(\.seq) == [1, 2])
            #expect(claimed.map(\.userID) == ["tab\tx\ny\rz\\w", "ünï\\"])
            #expect(claimed.map(\.platform) == [.ios, .android])
            #expect(claimed.map(\.locale) == ["de", "en"], "normalized at materialization")
            #expect(claimed.map(\.timezone) == ["Europe/Vienna", nil])
            #expect(claimed.map { $0.variables["note"] ?? nil } == ["a\\b \"c\"\nd\t\\N", nil])
            #expect(claimed.map(\.attempts) == [1, 1])
            #expect(claimed.map(\.deviceID) == [1, 2])
        }
    }

    @Test("the ledger without a foreign key: rows are only written into a materializing run, and deleting a run deletes its ledger")
    func ledgerFollowsItsRun() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 300)
            let campaign = Support.campaign(pageSize: 100)
            let repository = RunRepository(client: client, logger: Support.logger)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: Support.logger)
            let materializer = Materializer(client: client, logger: Support.logger)

            let cancelled = try await repository.createRun(campaign: campaign, yaml: "name: test", periodKey: nil)
            _ = try await client.query("UPDATE bugle.runs SET status = 'cancelled' WHERE id = \(cancelled)", logger: Support.logger).collect()
            let none = try await materializer.materialize(runID: cancelled, campaign: campaign, reader: reader)
            #expect(none.recipients == 0)
            #expect(try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(cancelled)", as: Int64.self) == 0)
            #expect(try await Support.scalar(client, "SELECT status FROM bugle.runs WHERE id = \(cancelled)", as: String.self) == "cancelled")

            let kept = try await repository.createRun(campaign: campaign, yaml: "name: test", periodKey: nil)
            let deleted = try await repository.createRun(campaign: campaign, yaml: "name: test", periodKey: nil)
            for run in [kept, deleted] {
                #expect(try await materializer.materialize(runID: run, campaign: campaign, reader: reader).recipients == 300)
            }
            _ = try await client.query("DELETE FROM bugle.runs WHERE id = \(deleted)", logger: Support.logger).collect()
            #expect(try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(deleted)", as: Int64.self) == 0)
            #expect(try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(kept)", as: Int64.self) == 300)
        }
    }

    @Test("time paused after sending began is kept on every status change and left out of the rate; a wait before it is not")
    func pausedTimeIsNotSendingTime() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 200, deadEvery: 0)
            let (runID, result) = try await Support.runCampaign(client, Support.campaign(pageSize: 100, window: 32), providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)])
            #expect(result.ending == .completed)
            let repository = RunRepository(client: client, logger: Support.logger)
            #expect(try await repository.run(id: runID)?.pausedSeconds == 0)
            // Each statement is its own transaction, so `now()` moves on; a pause's start is moved back by hand to
            // stand for the time it lasted (the trigger fires on status changes only).
            let steps: [PostgresQuery] = [
                // A run scheduled for later waits paused before it sends: that wait is not sending time.
                "UPDATE bugle.runs SET status = 'paused', started_at = NULL, finished_at = NULL WHERE id = \(runID)",
                "UPDATE bugle.runs SET paused_at = now() - interval '50 seconds' WHERE id = \(runID)",
                // Sending begins as a lease sets it; then moved back to stand for a run begun 100 s ago.
                "UPDATE bugle.runs SET status = 'running', started_at = coalesce(started_at, now()) WHERE id = \(runID)",
                "UPDATE bugle.runs SET started_at = now() - interval '100 seconds' WHERE id = \(runID)",
                // Paused for 60 s by an operator, resumed.
                "UPDATE bugle.runs SET status = 'paused', pause_reason = 'paused by operator' WHERE id = \(runID)",
                "UPDATE bugle.runs SET paused_at = now() - interval '60 seconds' WHERE id = \(runID)",
                "UPDATE bugle.runs SET status = 'running', pause_reason = NULL WHERE id = \(runID)",
                // Halted for 10 s, then finished by a cancel while still paused: the last pause counts up to the end.
                "UPDATE bugle.runs SET status = 'paused', pause_reason = 'halted' WHERE id = \(runID)",
                "UPDATE bugle.runs SET paused_at = now() - interval '10 seconds' WHERE id = \(runID)",
                "UPDATE bugle.runs SET status = 'cancelled', finished_at = now() WHERE id = \(runID)",
            ]
            for step in steps { _ = try await client.answeredQuery(step, logger: Support.logger).collect() }
            let record = try #require(try await repository.run(id: runID))
            #expect(record.pausedSeconds >= 70 && record.pausedSeconds < 75, "\(record.pausedSeconds)")
            let duration = try #require(record.durationSeconds)
            #expect(duration >= 100 && duration < 105, "\(duration)")
            // 200 answered over the ~30 s it was not paused, in the record and in the analysts' view alike.
            let rate = try #require(record.rate(answered: 200))
            #expect(rate > 200 / 35 && rate < 200 / 25, "\(rate)")
            let viewed = try await Support.scalar(client, "SELECT rate_per_second FROM bugle.run_overview WHERE run_id = \(runID)", as: Double.self)
            #expect(viewed.map { abs($0 - rate) < 0.01 } == true, "\(viewed ?? -1) against \(rate)")
            let paused = try await Support.scalar(client, "SELECT paused_seconds FROM bugle.run_overview WHERE run_id = \(runID)", as: Double.self)
            #expect(paused == record.pausedSeconds)
            // A status update that changes nothing, or a pause's reason rewritten, keeps the clock as it is.
            _ = try await client.answeredQuery("UPDATE bugle.runs SET status = 'cancelled' WHERE id = \(runID)", logger: Support.logger).collect()
            #expect(try await repository.run(id: runID)?.pausedSeconds == record.pausedSeconds)
        }
    }

    /// After kill -9, the time until `bugle resume` counted as sending time: a run killed and resumed 25 s later read
    /// 42.6 s at 47/s for 17.6 s of sending at 113/s.
    @Test("time with every worker dead counts as paused: from the last lease's expiry to a resume, or to a cancel")
    func deadWorkerTimeIsNotSendingTime() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 20)
            let (runID, store) = try await Support.materializedRun(client, Support.campaign())
            let repository = RunRepository(client: client, logger: Support.logger)
            let first = try #require(try await store.acquireLease(runID: runID, owner: "killed", ttlSeconds: 30, mode: .exclusive))
            #expect(try await repository.run(id: runID)?.pausedSeconds == 0)
            // The worker is killed; its lease expired 20 s ago (moved back by hand to stand for the wait).
            _ = try await client.answeredQuery(
                "UPDATE bugle.run_workers SET expires_at = now() - interval '20 seconds' WHERE run_id = \(runID) AND epoch = \(first.epoch)",
                logger: Support.logger
            ).collect()
            _ = try await client.answeredQuery("UPDATE bugle.runs SET started_at = now() - interval '60 seconds' WHERE id = \(runID)", logger: Support.logger).collect()
            let second = try #require(try await store.acquireLease(runID: runID, owner: "resumed", ttlSeconds: 30, mode: .exclusive))
            let afterResume = try #require(try await repository.run(id: runID)?.pausedSeconds)
            #expect(afterResume >= 20 && afterResume < 25, "\(afterResume)")
            // A live worker: taking another lease beside it (a join) or pausing the run counts nothing more.
            _ = try await store.acquireLease(runID: runID, owner: "joined", ttlSeconds: 30, mode: .join)
            #expect(try await repository.run(id: runID)?.pausedSeconds == afterResume)
            // Both die; the run is cancelled 30 s after the last lease expired.
            _ = try await client.answeredQuery(
                "UPDATE bugle.run_workers SET expires_at = now() - interval '30 seconds' - (epoch - \(second.epoch)) * interval '5 seconds' WHERE run_id = \(runID)",
                logger: Support.logger
            ).collect()
            #expect(try await repository.setStatus(runID: runID, to: .cancelled, reason: "cancelled by operator"))
            let afterCancel = try #require(try await repository.run(id: runID)?.pausedSeconds)
            #expect(afterCancel - afterResume >= 30 && afterCancel - afterResume < 35, "\(afterCancel - afterResume)")
        }
    }

    @Test("every live recipient delivered once, dead tokens deactivated, invalid rows skipped; CSV and summary agree")
    func endToEnd() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 2_000, deadEvery: 25)
            _ = try await client.query(
                "INSERT INTO bugle.devices (id, user_id, token, platform) VALUES (3001, 'u3001', 'zz-not-hex', 'ios')",
                logger: Support.logger
            ).collect()
            let apns = FakeProvider(kind: .apns)
            let fcm = FakeProvider(kind: .fcm)
            let campaign = Support.campaign(pageSize: 300, window: 64)
            let (runID, result) = try await Support.runCampaign(client, campaign, providers: [.apns: apns, .fcm: fcm])
            #expect(result.ending == .completed)

            let delivered = apns.delivered + fcm.delivered
            #expect(delivered.count == 2_000 - 80)
            #expect(Set(delivered.map(\.seq)).count == delivered.count)
            #expect(delivered.allSatisfy { !$0.token.hasPrefix("dead") })
            #expect(apns.delivered.allSatisfy { $0.platform == .ios && $0.apns?.collapseID == "c1" })

            let inactive = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND deactivation_reason = 'Unregistered'", as: Int64.self)
            #expect(inactive == 80)

            let repository = RunRepository(client: client, logger: Support.logger)
            let summary = try await repository.summary(runID: runID)
            let count = { (status: String) in summary.filter { $0.status == status }.map(\.count).reduce(0, +) }
            #expect(count("sent") == 1_920)
            #expect(count("invalid_token") == 80)
            #expect(summary.contains { $0.status == "skipped_invalid" && $0.reason == "malformed_token" && $0.count == 1 })
            let record = try await repository.run(id: runID)
            #expect(record?.status == .completed)
            #expect(record?.recipientsTotal == 2_000)
            let overview = try await client.query(
                "SELECT status, duration_seconds, rate_per_second, (totals->>'sent')::bigint FROM bugle.run_overview WHERE run_id = \(runID)",
                logger: Support.logger
            )
            for try await (status, duration, rate, sentTotal) in overview.decode((String, Double?, Double?, Int64?).self) {
                #expect(status == "completed")
                #expect((duration ?? 0) > 0)
                #expect((rate ?? 0) > 0)
                #expect(sentTotal == 1_920)
            }

            let directory = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-csv-\(runID)-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let first = directory.appendingPathComponent("a.csv").path
            let second = directory.appendingPathComponent("b.csv").path
            let exporter = ReportExporter(client: client, logger: Support.logger)
            let rows = try await exporter.export(runID: runID, to: first)
            #expect(rows == 2_001)
            let csv = try String(contentsOfFile: first, encoding: .utf8)
            let lines = csv.split(separator: "\r\n")
            #expect(lines.first == Substring(ReportExporter.header.joined(separator: ",")))
            #expect(lines.count == 2_002)
            #expect(lines.filter { $0.split(separator: ",", omittingEmptySubsequences: false)[5] == "sent" }.count == 1_920)
            // Regeneration from the ledger gives the same bytes.
            try await exporter.export(runID: runID, to: second)
            #expect(try Data(contentsOf: URL(fileURLWithPath: first)) == Data(contentsOf: URL(fileURLWithPath: second)))
            #expect(!FileManager.default.fileExists(atPath: first + ".tmp-\(getpid())"))
        }
    }

    @Test("a token that re-registered after the 410 timestamp stays active")
    func reRegisteredTokenStaysActive() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 100, deadEvery: 10)
            // Device 10 re-registered just now; the provider says the token died an hour ago.
            _ = try await client.query("UPDATE bugle.devices SET registered_at = now() WHERE id = 10", logger: Support.logger).collect()
            _ = try await client.query("UPDATE bugle.devices SET registered_at = now() - interval '2 hours' WHERE id <> 10", logger: Support.logger).collect()
            let hourAgo = Instant(secondsSince1970: Date().timeIntervalSince1970 - 3600)
            let providers: [ProviderKind: any PushProvider] = [.apns: FakeProvider(kind: .apns, invalidSince: hourAgo), .fcm: FakeProvider(kind: .fcm, invalidSince: hourAgo)]
            let (_, result) = try await Support.runCampaign(client, Support.campaign(), providers: providers)
            #expect(result.ending == .completed)
            let active10 = try await Support.scalar(client, "SELECT is_active FROM bugle.devices WHERE id = 10", as: Bool.self)
            #expect(active10 == true)
            let inactive = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self)
            #expect(inactive == 9)
        }
    }

    /// A segment whose `device_id` column is wrong (here a join that pairs each dead token with the next device's id)
    /// must not switch off a device whose token the provider never refused: deactivation needs the id and the token.
    /// (Each dead device swaps ids with the next: a device id on two tokens is refused.)
    @Test("a dead token listed under another device's id deactivates nothing: the device keeps its own live token")
    func deactivationMatchesTheToken() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 100, deadEvery: 10)
            let sql = """
                SELECT CASE WHEN d.token LIKE 'dead%' THEN d.id + 1 WHEN d.id % 10 = 1 AND d.id > 1 THEN d.id - 1 ELSE d.id END AS device_id,
                       d.user_id, d.token, d.platform, d.locale
                  FROM bugle.devices d WHERE d.is_active
                """
            let campaign = Support.campaign(sql: sql)
            let (_, result) = try await Support.runCampaign(client, campaign, providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)])
            #expect(result.ending == .completed)
            let inactive = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self)
            #expect(inactive == 0, "devices switched off for a token they do not hold")
            // With the right ids the same dead tokens are deactivated (so the run above did reach them).
            let (_, again) = try await Support.runCampaign(client, Support.campaign(name: "right-ids"), providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)])
            #expect(again.ending == .completed)
            let deactivated = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND token LIKE 'dead%'", as: Int64.self)
            #expect(deactivated == 10)
        }
    }

    /// FCM's UNREGISTERED carries no timestamp, and such answers deactivated a device whatever its `registered_at`.
    @Test("an invalid-token answer without a timestamp spares a device that registered again after it was claimed")
    func registeredAgainAfterTheClaim() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 100, deadEvery: 10)
            // Half the dead devices register again (the same token) after the send: their registered_at is later.
            _ = try await client.query(
                "UPDATE bugle.devices SET registered_at = now() + interval '1 hour' WHERE token LIKE 'dead%' AND id % 20 = 0",
                logger: Support.logger
            ).collect()
            let again = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.devices WHERE registered_at > now()", as: Int64.self)
            let (_, result) = try await Support.runCampaign(client, Support.campaign(), providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)])
            #expect(result.ending == .completed)
            let (deactivated, spared) = (
                try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self),
                try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE is_active AND token LIKE 'dead%'", as: Int64.self)
            )
            #expect((1..<10).contains(again ?? 0), "\(String(describing: again))")
            #expect(spared == again, "re-registered devices switched off")
            #expect(deactivated == 10 - (again ?? 0))
        }
    }

    /// The claim reserved the dedupe period for every claimed user before the cap skipped some of them, and the capped
    /// ones kept the reservation until the run ended: the type's other campaigns skipped users who got nothing.
    @Test("a user the frequency cap skips keeps no dedupe reservation of the run that skipped them")
    func cappedUserHoldsNoDedupeReservation() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 10)
            // Users 1...5 were notified an hour ago by another campaign (the cap counts sent ledger rows of any run).
            var earlier = Support.campaign(name: "earlier", sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d WHERE d.id <= 5")
            earlier.notificationType = "other"
            let (_, first) = try await Support.runCampaign(client, earlier, providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)])
            #expect(first.ending == .completed)
            var capped = Support.campaign(name: "capped", dedupe: .daily)
            capped.delivery.frequencyCap = FrequencyCap(count: 1, perSeconds: 86_400)
            let (runID, store) = try await Support.materializedRun(client, capped, periodKey: "d:2026-12-02")
            let lease = try #require(try await store.acquireLease(runID: runID, owner: "w", ttlSeconds: 120, mode: .exclusive))
            guard case .claimed(let claimed) = try await store.claim(lease, limits: [.apns: 50, .fcm: 50], claimID: 1) else {
                Issue.record("fenced")
                return
            }
            #expect(claimed.count == 5, "users 6...10 are sent")
            let reserved = try await Support.scalar(
                client, "SELECT string_agg(user_id, ',' ORDER BY user_id) FROM bugle.notification_log WHERE run_id = \(runID)", as: String.self)
            #expect(reserved == "u10,u6,u7,u8,u9", "\(reserved ?? "none")")
        }
    }

    /// A local-time run made at 23:50 for the next morning took the dedupe period of its creation for everyone, so the
    /// next day's campaign of the type reached the same users again (and a campaign of the creation day would have held
    /// them back from a delivery the next day). Each recipient now takes the period it is due in.
    @Test("a local-time run made the evening before dedupes each recipient under the day it is due, as a dry run estimates")
    func localTimeRunDedupesOnTheDayItIsDue() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 10)
            // 09:00 in New York is 14:00Z, in Tokyo 00:00Z: both on 2026-12-02, the run is made on 2026-12-01 at 23:50Z.
            _ = try await client.query(
                "UPDATE bugle.devices SET timezone = CASE WHEN id <= 5 THEN 'America/New_York' ELSE 'Asia/Tokyo' END", logger: Support.logger
            ).collect()
            let created = 1_796_169_000.0  // 2026-12-01T23:50:00Z
            let sql = "SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, d.timezone FROM bugle.devices d"
            var morning = Support.campaign(name: "morning", sql: sql, dedupe: .daily)
            morning.delivery.localTime = LocalTimeDelivery(deliverAt: LocalTime(hour: 9, minute: 0), fallbackTimeZone: "UTC")
            let runKey = try #require(PeriodKey.key(for: morning, now: Date(timeIntervalSince1970: created)))
            #expect(runKey == "d:2026-12-01")

            // Before the run: users nobody notified, in both the run's period and the recipients' own.
            var before = try #require(try await ClaimRulesEstimate.make(for: morning, now: Date(timeIntervalSince1970: created), client: client, logger: Support.logger))
            var report = DryRunReport(campaign: morning, now: Int(created), collectsUserIDs: true)
            let reader = SegmentReader(client: client, segment: morning.segment, useReaderRole: false, logger: Support.logger)
            var pages: [([String], [String])] = []
            _ = try await reader.read { rows in
                _ = report.add(rows, csv: false)
                pages.append((report.pageUserIDs, report.pagePeriodKeys))
            }
            for (users, keys) in pages { try await before.add(userIDs: users, periodKeys: keys) }
            #expect(before.deduped == 0 && before.periodsJudged == ["d:2026-12-02"], "\(before.periodsJudged)")

            let runID = try await RunRepository(client: client, logger: Support.logger).createRun(campaign: morning, yaml: "x", periodKey: runKey)
            _ = try await Materializer(client: client, logger: Support.logger)
                .materialize(runID: runID, campaign: morning, reader: reader, now: Instant(secondsSince1970: created))
            let keys = try await Support.scalar(
                client, "SELECT string_agg(DISTINCT period_key, ',') FROM bugle.run_recipients WHERE run_id = \(runID)", as: String.self)
            #expect(keys == "d:2026-12-02")

            // The run sends at 20:00Z on 2026-12-02, when every device is due.
            let store = PostgresCampaignStore(client: client, scheduleClock: { 1_796_241_600.0 }, logger: Support.logger)
            var configuration = CampaignRunner.Configuration()
            configuration.leaseTTLSeconds = 120
            let result = try await CampaignRunner(
                campaign: morning, runID: runID, store: store, providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)],
                control: RunControl(), configuration: configuration, logger: Support.logger
            ).run(owner: "w")
            #expect(result.ending == .completed)
            let logged = try await Support.scalar(
                client,
                "SELECT string_agg(DISTINCT period_key || '/' || status, ',') || ' ' || count(*) FROM bugle.notification_log WHERE run_id = \(runID)",
                as: String.self)
            #expect(logged == "d:2026-12-02/sent 10")

            // The next day's campaign of the type reaches none of them again.
            let (nextID, next) = try await Support.runCampaign(
                client, Support.campaign(name: "next-day", dedupe: .daily), providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)],
                periodKey: "d:2026-12-02")
            #expect(next.ending == .completed)
            let states = try await Support.scalar(
                client, "SELECT string_agg(DISTINCT state, ',') || ' ' || count(*) FROM bugle.run_recipients WHERE run_id = \(nextID)", as: String.self)
            #expect(states == "skipped_dedup 10")

            // A dry run of the morning campaign now says each user was notified in the period their device is due in.
            var after = try #require(try await ClaimRulesEstimate.make(for: morning, now: Date(timeIntervalSince1970: created), client: client, logger: Support.logger))
            for (users, keys) in pages { try await after.add(userIDs: users, periodKeys: keys) }
            #expect(after.deduped == 10)
        }
    }

    /// Recipients skipped when the audience was read (a NULL variable under `on_null: skip`) were written without their
    /// locale and variant, so an A/B arm whose copy needs the variable vanished from the per-variant counts and the CSV.
    @Test("a recipient skipped for a NULL template variable keeps its locale and A/B variant in the ledger")
    func skippedRowsKeepTheirVariant() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 40)
            let campaign = try CampaignLoader.load(
                yaml: """
                    name: ab-null
                    notification_type: promo
                    segment:
                      sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, CASE WHEN d.id % 2 = 0 THEN 'X1' END AS code FROM bugle.devices d
                    message:
                      default_locale: en
                      on_null: skip
                      locales: { en: { title: Hi, body: Sale }, de-AT: { title: Hallo, body: Angebot } }
                    variants:
                      - { name: plain, weight: 1 }
                      - { name: coded, weight: 1, data: { code: "{{code}}" } }
                    """,
                path: "ab-null.yaml")
            let (runID, _) = try await Support.materializedRun(client, campaign)
            let (skipped, placed) = (
                try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'skipped_invalid'", as: Int64.self),
                try await Support.scalar(
                    client,
                    "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'skipped_invalid' AND variant = 'coded' AND locale IN ('en', 'de-AT')",
                    as: Int64.self)
            )
            #expect((skipped ?? 0) > 0)
            #expect(placed == skipped, "\(String(describing: placed)) of \(String(describing: skipped)) skipped rows kept locale and variant")
        }
    }

    /// Runs a materialized run to completion through two fake lanes (claims of `claimBatch`); returns the lanes.
    private static func runWithFakeLanes(
        _ campaign: Campaign, runID: Int64, store: PostgresCampaignStore, claimBatch: Int
    ) async throws -> (apns: FakeProvider, fcm: FakeProvider) {
        let apns = FakeProvider(kind: .apns)
        let fcm = FakeProvider(kind: .fcm)
        var tuning = CampaignRunner.Configuration()
        tuning.leaseTTLSeconds = 120
        tuning.claimBatch = claimBatch
        let runner = CampaignRunner(
            campaign: campaign, runID: runID, store: store, providers: [.apns: apns, .fcm: fcm],
            control: RunControl(), configuration: tuning, logger: Support.logger
        )
        let result = try await runner.run(owner: "test-\(runID)")
        #expect(result.ending == .completed)
        return (apns, fcm)
    }

    /// The run's recipients the claim skipped (`skipped_inactive`), by device, with their outcome codes; each is
    /// expected to have been charged no attempt.
    private static func skippedAtClaim(_ client: PostgresClient, runID: Int64) async throws -> [Int64: String] {
        let skipped = try await client.query(
            "SELECT device_id, outcome_code, attempts FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'skipped_inactive'",
            logger: Support.logger
        ).collect()
        var codes: [Int64: String] = [:]
        for row in skipped {
            let (id, code, attempts) = try row.decode((Int64, String, Int).self)
            codes[id] = code
            #expect(attempts == 0, "a skipped row is charged no attempt")
        }
        return codes
    }

    /// A token that moved to another user after the segment was read was sent under the old user (a personalised copy
    /// reached the new owner's phone), and a deleted device was sent too: the claim checked deactivation only.
    @Test("devices moved to another user or deleted after materialization are skipped at claim; one moved back is sent")
    func movedOrDeletedAfterMaterializationAreSkipped() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 200)
            let campaign = Support.campaign(window: 50)
            let (runID, store) = try await Support.materializedRun(client, campaign)
            // Ten devices change hands by statement, one by re-registration (the import's and the API's upsert), one
            // moves away and back, five are deleted, and one only changes locale (not a move).
            _ = try await client.query("UPDATE bugle.devices SET user_id = 'new-' || id WHERE id % 20 = 7", logger: Support.logger).collect()
            let movedToken = try #require(try await Support.scalar(client, "SELECT token FROM bugle.devices WHERE id = 40", as: String.self))
            try await DeviceStore(client: client, logger: Support.logger).register(userID: "someone-else", token: movedToken, platform: .android)
            _ = try await client.query("UPDATE bugle.devices SET user_id = 'x' WHERE id = 50", logger: Support.logger).collect()
            _ = try await client.query("UPDATE bugle.devices SET user_id = 'u50' WHERE id = 50", logger: Support.logger).collect()
            _ = try await client.query("DELETE FROM bugle.devices WHERE id IN (60, 61, 62, 63, 64)", logger: Support.logger).collect()
            _ = try await client.query("UPDATE bugle.devices SET locale = 'fr', user_id = user_id WHERE id = 70", logger: Support.logger).collect()
            let (apns, fcm) = try await Self.runWithFakeLanes(campaign, runID: runID, store: store, claimBatch: 30)
            let codes = try await Self.skippedAtClaim(client, runID: runID)
            var expected: [Int64: String] = [40: "device_moved", 60: "device_deleted", 61: "device_deleted", 62: "device_deleted", 63: "device_deleted", 64: "device_deleted"]
            for id in stride(from: Int64(7), through: 200, by: 20) { expected[id] = "device_moved" }
            #expect(codes == expected)
            let sentTokens = Set((apns.delivered + fcm.delivered).map(\.token))
            #expect(sentTokens.count == 200 - expected.count, "every other device is sent once, 50 (moved back) and 70 (locale) too")
            #expect(!sentTokens.contains(movedToken))
            let summary = try await Support.scalar(
                client, "SELECT sum(count)::bigint FROM bugle.run_summary WHERE run_id = \(runID) AND status = 'skipped_inactive' AND reason = 'device_moved'", as: Int64.self)
            #expect(summary == 11, "the summary names the reason (10 iOS, 1 Android)")
            // The change log is pruned when a run finishes, keeping what an unfinished run may still need (a day's margin).
            let logged = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.device_changes", as: Int64.self)
            #expect(logged == 18, "10 + 1 + 2 moves and 5 deletes noted; the locale change is not a move")
            _ = try await client.query("UPDATE bugle.device_changes SET changed_at = now() - interval '2 days'", logger: Support.logger).collect()
            let second = try await Support.materializedRun(client, campaign)
            _ = try await Self.runWithFakeLanes(campaign, runID: second.0, store: second.1, claimBatch: 30)
            let left = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.device_changes", as: Int64.self)
            #expect(left == 0)
        }
    }

    @Test("devices deactivated after materialization are skipped at claim, unspent; a re-registered one is sent")
    func deactivatedAfterMaterializationAreSkipped() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 300)
            let campaign = Support.campaign(window: 50)
            let (runID, store) = try await Support.materializedRun(client, campaign)
            // 30 devices sign out after the segment was read; device 13 signs in again before the send.
            _ = try await client.query(
                "UPDATE bugle.devices SET is_active = false, deactivated_at = now(), deactivation_reason = 'unregistered' WHERE id % 10 = 3",
                logger: Support.logger
            ).collect()
            _ = try await client.query("UPDATE bugle.devices SET is_active = true WHERE id = 13", logger: Support.logger).collect()
            let (apns, fcm) = try await Self.runWithFakeLanes(campaign, runID: runID, store: store, claimBatch: 40)
            let skipped = try await Self.skippedAtClaim(client, runID: runID)
            #expect(Set(skipped.values) == ["device_inactive"])
            #expect(skipped.keys.sorted() == [3] + Array(stride(from: Int64(23), through: 293, by: 10)))
            let sent = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'", as: Int64.self)
            #expect(sent == 271)
            let sentTokens = Set((apns.delivered + fcm.delivered).map(\.token))
            #expect(sentTokens.count == 271)
            let inactiveTokens = try await client.query("SELECT token FROM bugle.devices WHERE NOT is_active", logger: Support.logger).collect()
            for row in inactiveTokens {
                let (token,) = try row.decode((String,).self)
                #expect(!sentTokens.contains(token), "an inactive device was sent to")
            }
        }
    }

    @Test("two campaigns with the same type and period notify each user once")
    func dedupeAcrossCampaigns() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 500)
            let first = FakeProvider(kind: .apns)
            let firstFCM = FakeProvider(kind: .fcm)
            let second = FakeProvider(kind: .apns)
            let secondFCM = FakeProvider(kind: .fcm)
            async let a = Support.runCampaign(client, Support.campaign(name: "a", dedupe: .daily, window: 50), providers: [.apns: first, .fcm: firstFCM], periodKey: "d:2026-11-22")
            async let b = Support.runCampaign(client, Support.campaign(name: "b", dedupe: .daily, window: 50), providers: [.apns: second, .fcm: secondFCM], periodKey: "d:2026-11-22")
            let ((_, resultA), (_, resultB)): ((Int64, RunResult), (Int64, RunResult))
            do {
                ((_, resultA), (_, resultB)) = try await (a, b)
            } catch {
                Issue.record("run failed: \(String(reflecting: error))")
                return
            }
            #expect(resultA.ending == .completed)
            #expect(resultB.ending == .completed)
            let users = (first.delivered + firstFCM.delivered + second.delivered + secondFCM.delivered).map(\.deviceID)
            #expect(users.count == 500)
            #expect(Set(users).count == 500)
            let logRows = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.notification_log WHERE status = 'sent'", as: Int64.self)
            #expect(logRows == 500)
            let skipped = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE state = 'skipped_dedup'", as: Int64.self)
            #expect(skipped == 500)
        }
    }

    /// A user whose only recipient ended `unknown` (it may have been delivered: a timeout, a lost connection, a crash)
    /// had their dedupe reservation and frequency-cap slot released when the run ended, so the next campaign of the
    /// type notified them again the same period, even under `ambiguous: drop`.
    @Test("a user whose recipient ended unknown keeps the run's dedupe reservation and cap slot: the next campaign skips them")
    func unknownKeepsTheReservation() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 40)
            // Devices 1…5 get ambiguous answers (`a1a1…`): `unknown` under `drop`.
            _ = try await client.query(
                "UPDATE bugle.devices SET token = 'a1a1' || substr(token, 5) WHERE id <= 5 AND platform = 'ios'", logger: Support.logger
            ).collect()
            var first = Support.campaign(name: "first", dedupe: .daily, policy: .drop)
            first.delivery.frequencyCap = FrequencyCap(count: 1, perSeconds: 3600)
            let (firstRun, firstResult) = try await Support.runCampaign(
                client, first, providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)], periodKey: "d:2026-11-22")
            #expect(firstResult.ending == .completed)
            let unknown = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(firstRun) AND state = 'unknown'", as: Int64.self)
            #expect(unknown == 3, "devices 1, 3 and 5 (iOS) answered ambiguously")
            let kept = try await Support.scalar(
                client,
                "SELECT count(*)::bigint FROM bugle.notification_log WHERE run_id = \(firstRun) AND user_id IN ('u1', 'u3', 'u5')",
                as: Int64.self)
            #expect(kept == 3, "their reservations are kept")
            let capKept = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.user_sends WHERE run_id = \(firstRun) AND user_id IN ('u1', 'u3', 'u5')", as: Int64.self)
            #expect(capKept == 3, "and their cap slots")
            let second = FakeProvider(kind: .apns)
            let (secondRun, _) = try await Support.runCampaign(
                client, Support.campaign(name: "second", dedupe: .daily), providers: [.apns: second, .fcm: FakeProvider(kind: .fcm)],
                periodKey: "d:2026-11-22")
            let again = try await Support.scalar(
                client,
                "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(secondRun) AND device_id IN (1, 3, 5) AND state = 'skipped_dedup'",
                as: Int64.self)
            #expect(again == 3, "the next campaign of the type skips them as already notified")
        }
    }

    /// The lease was renewed only once the lanes had warmed up: a warm-up longer than the TTL (a slow endpoint or
    /// proxy) let the lease lapse, and a worker joining the run reaped this one before it sent anything.
    @Test("the lease is renewed while the lanes warm up: a warm-up longer than the TTL keeps the worker")
    func leaseRenewedDuringWarmUp() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 20)
            let campaign = Support.campaign()
            let (runID, store) = try await Support.materializedRun(client, campaign)
            let (warmedUp, warm) = AsyncStream<Void>.makeStream()
            var tuning = CampaignRunner.Configuration()
            // Short enough to outlast in the test, long enough that the parallel phase's load does not starve renewals
            // past half of it (at 3 s one run self-fenced).
            tuning.leaseTTLSeconds = 8
            let runner = CampaignRunner(
                campaign: campaign, runID: runID, store: store,
                providers: [.apns: WarmingProvider(FakeProvider(kind: .apns), warmedUp: warmedUp), .fcm: FakeProvider(kind: .fcm)],
                control: RunControl(), configuration: tuning, logger: Support.logger
            )
            async let result = runner.run(owner: "warming-\(runID)")
            // The worker's row is renewed (its expiry moves past the first one) while the APNs lane is still warming up;
            // without renewals it lapses, and this wait ends at its bound.
            var firstExpiry: Double?
            var renewed = false
            let bound = ContinuousClock.now + .seconds(30)
            while !renewed, ContinuousClock.now < bound {
                let expiry = try await Support.scalar(
                    client, "SELECT coalesce(extract(epoch FROM max(expires_at))::float8, 0) FROM bugle.run_workers WHERE run_id = \(runID)", as: Double.self)
                if let expiry, expiry > 0 {
                    if let firstExpiry { renewed = expiry > firstExpiry } else { firstExpiry = expiry }
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(renewed, "the lease was renewed during the warm-up")
            // Past the TTL, a joining worker finds this one live, not expired.
            try await Task.sleep(for: .seconds(8.5))
            let live = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(runID) AND expires_at > now()", as: Int64.self)
            #expect(live == 1)
            warm.finish()
            #expect(try await result.ending == .completed)
        }
    }

    @Test("a halting answer pauses the run with its reason, deactivates nothing, and charges no attempt")
    func haltPausesTheRun() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 40)
            _ = try await client.query("UPDATE bugle.devices SET token = 'ha17-' || id WHERE platform = 'android'", logger: Support.logger).collect()
            let (runID, result) = try await Support.runCampaign(client, Support.campaign(window: 4), providers: [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)])
            guard case .halted(let code, _) = result.ending else {
                Issue.record("expected a halt, got \(result.ending)")
                return
            }
            #expect(code == "InvalidProviderToken")
            let record = try await RunRepository(client: client, logger: Support.logger).run(id: runID)
            #expect(record?.status == .paused)
            #expect(record?.pauseReason?.contains("InvalidProviderToken") == true)
            let inactive = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self)
            #expect(inactive == 0)
            let charged = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE state = 'retry_wait' AND attempts > 0", as: Int64.self)
            #expect(charged == 0)
        }
    }

    /// A campaign whose copy fits (it validates) but whose segment values make payloads too large: `long` picks the
    /// devices whose `blurb` column is 5,000 bytes, over the APNs and FCM limits.
    static func oversizedValues(_ long: String) -> Campaign {
        var campaign = Support.campaign(
            sql: """
                SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale,
                       CASE WHEN \(long) THEN repeat('x', 5000) ELSE 'short' END AS blurb
                  FROM bugle.devices d
                """,
            window: 4)
        campaign.message = MessageTemplate(defaultLocale: "en", localeCopies: ["en": [LocalizedCopy(title: "News", body: "{{blurb}}")]])
        return campaign
    }

    @Test("segment values that make every iOS payload too large halt the run after ten in a row: those fail payload_too_large, no iOS request is sent, the run is paused saying why")
    func oversizedValuesHalt() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 200)
            let apns = FakeProvider(kind: .apns)
            let (runID, result) = try await Support.runCampaign(
                client, Self.oversizedValues("d.platform = 'ios'"), providers: [.apns: apns, .fcm: FakeProvider(kind: .fcm)])
            guard case .halted(let code, let message) = result.ending else {
                Issue.record("expected a halt, got \(result.ending)")
                return
            }
            #expect(code == "payload_too_large")
            #expect(message.contains("the last 10 ios payloads rendered over the platform's size limit"), "\(message)")
            #expect(apns.delivered.isEmpty)
            let failed = try #require(try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'failed_permanent' AND outcome_code = 'payload_too_large'",
                as: Int64.self))
            // The tenth trips it; at most a window's worth more were already composed.
            #expect(failed >= 10 && failed <= 10 + 4, "\(failed)")
            let unsentIOS = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND platform = 'ios' AND state IN ('pending', 'retry_wait')",
                as: Int64.self)
            #expect(unsentIOS == 100 - failed)
            let record = try await RunRepository(client: client, logger: Support.logger).run(id: runID)
            #expect(record?.status == .paused)
            #expect(record?.pauseReason?.hasPrefix("halted: payload_too_large: ") == true, "\(record?.pauseReason ?? "nil")")
        }
    }

    @Test("a few values too long fail only their recipients: the run completes, every other device sent")
    func fewOversizedValuesComplete() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 200)
            let apns = FakeProvider(kind: .apns)
            let fcm = FakeProvider(kind: .fcm)
            // One iOS device in five does not fit (ids 1, 11, 21, …; odd ids are iOS): never ten in a row.
            let (runID, result) = try await Support.runCampaign(client, Self.oversizedValues("d.id % 10 = 1"), providers: [.apns: apns, .fcm: fcm])
            #expect(result.ending == .completed, "\(result.ending)")
            let failed = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND outcome_code = 'payload_too_large'", as: Int64.self)
            #expect(failed == 20)
            #expect(apns.delivered.count + fcm.delivered.count == 180)
        }
    }

    /// One device the provider throttles on its own (FCM's per-device message rate is answered `QUOTA_EXCEEDED` too):
    /// its provider-level retries are free only up to ``RecipientSender/freeProviderRetries``, then charged, so it ends
    /// `attempts_exhausted` and the run completes instead of retrying it until the outage breaker fails the run.
    @Test("a recipient the provider throttles every time is charged after ten free retries: it ends attempts_exhausted, the run completes")
    func endlessQuotaIsCharged() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 12)
            _ = try await client.query("UPDATE bugle.devices SET token = 'quota-' || id WHERE id = 2", logger: Support.logger).collect()
            let fcm = FakeProvider(kind: .fcm)
            let (runID, result) = try await Support.runCampaign(
                client, Support.campaign(window: 4, maxAttempts: 3), providers: [.apns: FakeProvider(kind: .apns), .fcm: fcm])
            #expect(result.ending == .completed, "\(result.ending)")
            let code = try await Support.scalar(
                client, "SELECT state || ' ' || outcome_code FROM bugle.run_recipients WHERE run_id = \(runID) AND device_id = 2", as: String.self)
            #expect(code == "failed_permanent attempts_exhausted:QUOTA_EXCEEDED")
            // Ten free retries, then one charged per attempt: the claims that send it count its attempts from one.
            #expect(fcm.answerCounts["QUOTA_EXCEEDED"] == 10 + 3)
        }
    }

    @Test("retries: provider-level 503 is not charged, recipient 429 exhausts attempts; ambiguous follows the policy")
    func retriesAndAmbiguity() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 12)
            _ = try await client.query(
                """
                UPDATE bugle.devices SET token = CASE
                    WHEN id IN (1, 2) THEN '5030' || md5(id::text)
                    WHEN id IN (3, 4) THEN '4290' || md5(id::text)
                    WHEN id IN (5, 6) THEN 'a1a1' || md5(id::text)
                    ELSE token END
                """,
                logger: Support.logger
            ).collect()
            let apns = FakeProvider(kind: .apns)
            let campaign = Support.campaign(window: 8, policy: .drop, maxAttempts: 2)
            let (runID, result) = try await Support.runCampaign(client, campaign, providers: [.apns: apns, .fcm: FakeProvider(kind: .fcm)])
            #expect(result.ending == .completed)
            let rows = try await client.query(
                "SELECT device_id, state, outcome_code, attempts FROM bugle.run_recipients WHERE run_id = \(runID) AND device_id <= 6 ORDER BY device_id",
                logger: Support.logger
            )
            var states: [Int64: (String, String?, Int)] = [:]
            for try await (id, state, code, attempts) in rows.decode((Int64, String, String?, Int).self) { states[id] = (state, code, attempts) }
            #expect(states[1]?.0 == "sent")
            #expect(states[1]?.2 == 1)
            #expect(states[3]?.0 == "failed_permanent")
            #expect(states[3]?.1 == "attempts_exhausted:TooManyRequests")
            #expect(states[5]?.0 == "unknown")
        }
    }

    @Test("a claim whose answer is held back while the worker stops is abandoned, not a failure: the run ends as the stop says, outcomes recorded, the claim's rows handed back unsent")
    func claimAbandonedOnStop() async throws {
        try await Support.withFreshDatabase { client in
            try await APNsCampaignTests.seedLiveIOS(client, count: 2_000)
            let campaign = Support.campaign(window: 300)
            let (runID, ledger) = try await Support.materializedRun(client, campaign)
            let provider = FakeProvider(kind: .apns)
            let store = ClaimStallingStore(ledger, stallAt: 3)
            let control = RunControl()
            var tuning = CampaignRunner.Configuration()
            tuning.leaseTTLSeconds = 120
            tuning.claimBatch = 100
            let runner = CampaignRunner(
                campaign: campaign, runID: runID, store: store, providers: [.apns: provider], control: control, configuration: tuning, logger: Support.logger)
            async let ending = runner.run(owner: "stalled-claim")
            var stalledIterator = store.stalled.makeAsyncIterator()
            let held = try #require(await stalledIterator.next())
            // The stop a failed lease renewal requests, while the third claim's answer is still out.
            control.requestStop(.leaseLost(nil))
            store.release()
            let result = try await ending
            #expect(result.ending == .fenced(nil))
            let rows = try await client.query(
                "SELECT state, coalesce(outcome_code, ''), count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) GROUP BY 1, 2", logger: Support.logger)
            var states: [String: Int64] = [:]
            for try await (state, code, count) in rows.decode((String, String, Int64).self) { states["\(state)/\(code)"] = count }
            // Every answer the lane gave is recorded; the held claim's rows are back, never sent; nothing in flight.
            #expect(held > 0)
            #expect(states["sent/delivered"] == Int64(provider.delivered.count), "\(states)")
            #expect(states["retry_wait/claim_answer_lost"] == Int64(held), "\(states)")
            #expect(states.keys.allSatisfy { !$0.hasPrefix("in_flight") }, "\(states)")
            #expect(Set(provider.delivered.map(\.seq)).count == provider.delivered.count)
        }
    }

    @Test("crash recovery: in-flight rows of an older epoch become unknown (drop) or retry_wait (resend)")
    func crashRecovery() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 30)
            for policy in [AmbiguousPolicy.drop, .resend] {
                let logger = Support.logger
                let campaign = Support.campaign(name: "crash-\(policy.rawValue)", window: 10, policy: policy)
                let (runID, store) = try await Support.materializedRun(client, campaign)
                guard let lease = try await store.acquireLease(runID: runID, owner: "w1", ttlSeconds: 60, mode: .exclusive) else {
                    Issue.record("no lease")
                    return
                }
                guard case .claimed(let claimed) = try await store.claim(lease, limits: [.apns: 50, .fcm: 50], claimID: 1) else {
                    Issue.record("fenced")
                    return
                }
                #expect(claimed.count == 10)  // the window caps the claim
                // While w1's lease lives, nobody else may take the run alone.
                let refused = try await store.acquireLease(runID: runID, owner: "w2", ttlSeconds: 30, mode: .exclusive)
                #expect(refused == nil)
                // A runner refused the lease ends `notGranted` (the CLI's exit 1), not fenced (exit 2), having sent nothing.
                let provider = FakeProvider(kind: .apns)
                let refusedRun = try await CampaignRunner(
                    campaign: campaign, runID: runID, store: store, providers: [.apns: provider, .fcm: FakeProvider(kind: .fcm)], control: RunControl(),
                    logger: logger
                ).run(owner: "w3")
                #expect(refusedRun.ending == .notGranted && refusedRun.attempted == 0 && provider.delivered.isEmpty)
                // "kill -9": the lease expires without any outcome recorded.
                _ = try await client.query("UPDATE bugle.run_workers SET expires_at = now() - interval '1 second' WHERE run_id = \(runID)", logger: logger).collect()
                let second = try await store.acquireLease(runID: runID, owner: "w2", ttlSeconds: 30, mode: .exclusive)
                #expect(second?.recoveredInFlight == 10)
                #expect((second?.epoch ?? 0) > lease.epoch)
                // The zombie's writes change nothing.
                let zombie = try await store.record(lease, outcomes: claimed.map { RecipientOutcome(seq: $0.seq, state: .sent, code: "delivered") })
                #expect(zombie == false)
                let expected = policy == .drop ? "unknown" : "retry_wait"
                let n = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = \(expected)", as: Int64.self)
                #expect(n == 10)
            }
        }
    }

    @Test("taking over an expired lease ends the frozen worker's sessions, even one busy holding the run's row lock")
    func takeoverEndsFrozenSessions() async throws {
        let configuration = try await TestDatabase.fresh()
        let logger = Support.logger
        try await Database.withClient(configuration, logger: logger) { client in
            try await Support.seed(client, count: 10)
            let campaign = Support.campaign(name: "frozen", window: 10, policy: .resend)
            let (runID, _) = try await Support.materializedRun(client, campaign)
            try await Database.withClient(configuration.taggingSessions("4242:frozen"), logger: logger) { frozenClient in
                let a = PostgresCampaignStore(client: frozenClient, sessionTag: "4242:frozen", logger: logger)
                let b = PostgresCampaignStore(client: client, sessionTag: "4343:taker", logger: logger)
                guard let leaseA = try await a.acquireLease(runID: runID, owner: "a", ttlSeconds: 30, mode: .exclusive) else {
                    Issue.record("A got no lease")
                    return
                }
                // A's session holds the run row's lock inside a statement that never ends (as a backend blocked writing
                // to a stopped process does): idle_in_transaction_session_timeout cannot release it.
                let frozen = Task {
                    try await frozenClient.query(
                        "SELECT pg_sleep(3600) FROM bugle.runs WHERE id = \(runID) FOR UPDATE", logger: logger
                    ).collect()
                }
                try await Self.waitForLockHolder(client, runID: runID)
                _ = try await client.query(
                    "UPDATE bugle.run_workers SET expires_at = now() - interval '1 second' WHERE run_id = \(runID) AND epoch = \(leaseA.epoch)",
                    logger: logger
                ).collect()
                // B joins without waiting on A's lock: A's session is ended first (a hang fails the deadline).
                let leaseB = try await OperationDeadline.run(within: .seconds(60)) {
                    try await b.acquireLease(runID: runID, owner: "b", ttlSeconds: 30, mode: .join)
                }
                #expect(leaseB != nil)
                #expect(leaseB?.liveWorkers == 1)
                await #expect(throws: (any Error).self) { try await frozen.value }
                let tags = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_workers WHERE run_id = \(runID) AND session_tag = '4343:taker'", as: Int64.self)
                #expect(tags == 1)
            }
        }
    }

    /// Waits until some session holds a row lock of the run (the frozen statement has started).
    static func waitForLockHolder(_ client: PostgresClient, runID: Int64) async throws {
        for _ in 0..<3000 {
            let waiting = try await Support.scalar(
                client,
                "SELECT count(*)::bigint FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(3600)%' AND state = 'active'",
                as: Int64.self)
            if (waiting ?? 0) > 0 { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the frozen statement never started")
    }

    @Test("two workers on one run: each its own epoch, the window W shared, a reaped worker's rows recovered and its writes fenced")
    func twoWorkers() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 40)
            let logger = Support.logger
            let campaign = Support.campaign(name: "two-workers", window: 10, policy: .resend)
            let (runID, store) = try await Support.materializedRun(client, campaign)
            // Leases of 600 s: A is expired by hand below, and a stalled machine must not expire it earlier.
            // A worker cannot join a run nobody started.
            #expect(try await store.acquireLease(runID: runID, owner: "b", ttlSeconds: 600, mode: .join) == nil)
            guard let a = try await store.acquireLease(runID: runID, owner: "a", ttlSeconds: 600, mode: .exclusive),
                let b = try await store.acquireLease(runID: runID, owner: "b", ttlSeconds: 600, mode: .join)
            else {
                Issue.record("no lease")
                return
            }
            #expect(b.epoch > a.epoch)
            #expect(b.liveWorkers == 2)
            guard case .claimed(let first) = try await store.claim(a, limits: [.apns: 6, .fcm: 6], claimID: 1),
                case .claimed(let second) = try await store.claim(b, limits: [.apns: 6, .fcm: 6], claimID: 1)
            else {
                Issue.record("fenced")
                return
            }
            // W = 10 holds for the run: what A holds leaves B the rest.
            #expect(first.count + second.count == 10)
            #expect(Set(first.map(\.seq)).isDisjoint(with: second.map(\.seq)))
            let renewal = try await store.renewLease(b, ttlSeconds: 600)
            #expect(renewal.held && renewal.liveWorkers == 2)
            // A stops renewing; B's next renewal reaps it and recovers A's in-flight rows.
            _ = try await client.query(
                "UPDATE bugle.run_workers SET expires_at = now() - interval '1 second' WHERE run_id = \(runID) AND epoch = \(a.epoch)",
                logger: logger
            ).collect()
            let takeover = try await store.renewLease(b, ttlSeconds: 600)
            #expect(takeover.held && takeover.liveWorkers == 1)
            #expect(takeover.recoveredInFlight == Int64(first.count))
            // A, the zombie: its outcome writes and claims change nothing, and its renewal reports the loss.
            #expect(try await store.record(a, outcomes: first.map { RecipientOutcome(seq: $0.seq, state: .sent, code: "delivered") }) == false)
            #expect(try await store.claim(a, limits: [.apns: 5], claimID: 2) == .fenced(.running))
            #expect(try await store.renewLease(a, ttlSeconds: 600).held == false)
            let sentByA = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'", as: Int64.self)
            #expect(sentByA == 0)
            // B's own writes still land; B leaving as the last worker with `lastWorkerOnly` pauses the run.
            #expect(try await store.record(b, outcomes: second.map { RecipientOutcome(seq: $0.seq, state: .sent, code: "delivered") }))
            #expect(try await store.finish(b, status: .paused, reason: "interrupted", lastWorkerOnly: true))
            let status = try await Support.scalar(client, "SELECT status FROM bugle.runs WHERE id = \(runID)", as: String.self)
            #expect(status == "paused")
        }
    }

    @Test("a lost claim is handed back by its id only, unspent; rows of claims that answered are never touched")
    func lostClaimHandBack() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 20)
            let logger = Support.logger
            let campaign = Support.campaign(name: "lost-claim", window: 20, policy: .resend)
            let (runID, store) = try await Support.materializedRun(client, campaign)
            let lease = try #require(try await store.acquireLease(runID: runID, owner: "w", ttlSeconds: 120, mode: .exclusive))
            // Claim 1 "answered" (held); claim 2's answer was lost.
            guard case .claimed(let held) = try await store.claim(lease, limits: [.apns: 4, .fcm: 4], claimID: 1),
                case .claimed(let lost) = try await store.claim(lease, limits: [.apns: 3, .fcm: 3], claimID: 2)
            else {
                Issue.record("fenced")
                return
            }
            #expect(held.count == 8 && lost.count == 6)
            #expect(try await store.releaseUnheld(lease, claimIDs: [3]) == 0)
            #expect(try await store.releaseUnheld(lease, claimIDs: [2]) == 6)
            let rows = try await client.query(
                "SELECT state, attempts, count(*)::int FROM bugle.run_recipients WHERE run_id = \(runID) AND state IN ('in_flight', 'retry_wait') GROUP BY 1, 2 ORDER BY 1",
                logger: logger
            )
            var seen: [String] = []
            for try await (state, attempts, count) in rows.decode((String, Int, Int).self) { seen.append("\(state):\(attempts):\(count)") }
            #expect(seen == ["in_flight:1:8", "retry_wait:0:6"])
        }
    }

    @Test("claims start each lane at its floor yet skip nothing: a rolled-back claim's rows, retries, every row in the end")
    func claimFloors() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 30)
            let logger = Support.logger
            let campaign = Support.campaign(name: "floors", dedupe: .daily, window: 100, policy: .resend)
            let runID = try await RunRepository(client: client, logger: logger).createRun(campaign: campaign, yaml: "x", periodKey: "d:2026-11-25")
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: logger)
            _ = try await Materializer(client: client, logger: logger).materialize(runID: runID, campaign: campaign, reader: reader)
            let store = PostgresCampaignStore(client: client, logger: logger)
            let lease = try #require(try await store.acquireLease(runID: runID, owner: "w", ttlSeconds: 120, mode: .exclusive))
            // The claim's dedupe reservation fails after its rows were picked and updated: the claim rolls back.
            _ = try await client.query(
                """
                CREATE FUNCTION bugle.refuse_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$
                """,
                logger: logger
            ).collect()
            _ = try await client.query(
                "CREATE TRIGGER refuse BEFORE INSERT ON bugle.notification_log FOR EACH ROW EXECUTE FUNCTION bugle.refuse_log()",
                logger: logger
            ).collect()
            await #expect(throws: (any Error).self) { try await store.claim(lease, limits: [.apns: 4, .fcm: 4], claimID: 1) }
            _ = try await client.query("DROP TRIGGER refuse ON bugle.notification_log", logger: logger).collect()
            // The next claim takes the same rows: the rolled-back claim moved no floor.
            guard case .claimed(let first) = try await store.claim(lease, limits: [.apns: 4, .fcm: 4], claimID: 2) else {
                Issue.record("fenced")
                return
            }
            var lowest: [Int64] = []
            let rows = try await client.query(
                """
                SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY provider ORDER BY seq) AS k
                                   FROM bugle.run_recipients WHERE run_id = \(runID)) x
                 WHERE k <= 4 ORDER BY seq
                """,
                logger: logger
            )
            for try await (seq,) in rows.decode((Int64,).self) { lowest.append(seq) }
            #expect(first.map(\.seq).sorted() == lowest)
            // Two answers are retries: due again at once, behind every row the floors pass over.
            let retried = Set(first.prefix(2).map(\.seq))
            var outcomes = first.map { recipient in
                retried.contains(recipient.seq)
                    ? RecipientOutcome(seq: recipient.seq, state: .retryWait, code: "unavailable", retryAfterSeconds: 0, refundAttempt: true)
                    : RecipientOutcome(seq: recipient.seq, state: .sent, code: "delivered")
            }
            var claims: [Int64: Int] = [:]
            for recipient in first { claims[recipient.seq, default: 0] += 1 }
            var claimID: Int64 = 3
            while true {
                #expect(try await store.record(lease, outcomes: outcomes))
                guard case .claimed(let next) = try await store.claim(lease, limits: [.apns: 4, .fcm: 4], claimID: claimID) else {
                    Issue.record("fenced")
                    return
                }
                if next.isEmpty { break }
                for recipient in next { claims[recipient.seq, default: 0] += 1 }
                outcomes = next.map { RecipientOutcome(seq: $0.seq, state: .sent, code: "delivered") }
                claimID += 1
                if claimID > 40 { Issue.record("the claims never ran dry"); break }
            }
            #expect(claims.count == 30)
            #expect(claims.filter { $0.value == 2 }.keys.sorted() == retried.sorted())
            #expect(claims.values.allSatisfy { $0 <= 2 })
            let sent = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'", as: Int64.self)
            #expect(sent == 30)
        }
    }

    @Test("the progress count reads the snapshot fixed before snapshotTaken: outcomes recorded after it still count as left")
    func progressCountIsOfTheSnapshotBeforeTheSends() async throws {
        try await Support.withFreshDatabase { client in
            try await Support.seed(client, count: 20)
            let campaign = Support.campaign(name: "progress-snapshot", window: 20, policy: .resend)
            let (runID, store) = try await Support.materializedRun(client, campaign)
            let lease = try #require(try await store.acquireLease(runID: runID, owner: "w", ttlSeconds: 120, mode: .exclusive))
            let before = try #require(
                try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'pending'", as: Int64.self
                )
            )
            #expect(before > 5)
            // The send loop starts when snapshotTaken is called: claim and record 5 sends from another session then.
            let progress = try await store.progress(runID: runID) {
                guard case .claimed(let claimed) = try? await store.claim(lease, limits: [.apns: 5, .fcm: 0], claimID: 1) else {
                    Issue.record("no claim")
                    return
                }
                let recorded = try? await store.record(lease, outcomes: claimed.map { RecipientOutcome(seq: $0.seq, state: .sent, code: "delivered") })
                #expect(claimed.count == 5 && recorded == true)
            }
            #expect(progress.pending == before && progress.inFlight == 0 && progress.retryWait == 0)
            let after = try await Support.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'pending'", as: Int64.self
            )
            #expect(after == before - 5)
        }
    }
}

/// A lane whose warm-up lasts until the test says so.
private struct WarmingProvider: PushProvider {
    let inner: FakeProvider
    let warmedUp: AsyncStream<Void>

    init(_ inner: FakeProvider, warmedUp: AsyncStream<Void>) {
        self.inner = inner
        self.warmedUp = warmedUp
    }

    var kind: ProviderKind { inner.kind }
    func send(_ request: PushRequest) async -> SendOutcome { await inner.send(request) }
    func shutdown() async {}
    func prepare() async {
        for await _ in warmedUp {}
    }
}
