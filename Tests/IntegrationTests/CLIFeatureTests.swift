import BugleCore
import BugleSimulator
import BugleStore
import BugleTesting
import Crypto
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

/// `bugle send-test`, `bugle run --no-wait` + `bugle tick`, and `bugle validate` against the segment, through the
/// built executable, a real PostgreSQL database and both in-process simulators (checked from their own records).
@Suite("bugle send-test, run --no-wait + tick, validate with the database (built executable, simulators, real PostgreSQL)")
struct CLIFeatureTests {
    typealias Support = LedgerTestSupport


    /// A fresh migrated database with `devices` live demo devices, and its URL for the CLI.
    static func seededDatabase(devices: Int) async throws -> (DatabaseConfiguration, String) {
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: Support.logger) { client in
            try await MixedTestEnvironment.seed(client, count: devices, deadEvery: 1_000_000)
        }
        return (configuration, try CLITests.url(configuration))
    }

    /// A fresh report path in the temporary directory.
    static func csvPath(_ name: String) -> String {
        URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-\(name)-\(UUID().uuidString).csv").path
    }

    /// How many times each token appears in `tokens`.
    static func tally(_ tokens: [String]) -> [String: Int] {
        tokens.reduce(into: [:]) { $0[$1, default: 0] += 1 }
    }

    /// Active device tokens per platform (`ios`, `android`), optionally of one user.
    static func tokens(_ client: PostgresClient, platform: String, user: String? = nil) async throws -> [String] {
        let filter = user.map { " AND user_id = '\($0)'" } ?? ""
        let rows = try await client.query(
            PostgresQuery(unsafeSQL: "SELECT token FROM bugle.devices WHERE is_active AND platform = '\(platform)'\(filter) ORDER BY id"),
            logger: Support.logger
        )
        var tokens: [String] = []
        for try await (token,) in rows.decode((String,).self) { tokens.append(token) }
        return tokens
    }

    /// PostgreSQL's `md5(text)`, as the seeded Android tokens hold it.
    static func md5(_ text: String) -> String {
        Insecure.MD5.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func count(_ client: PostgresClient, _ sql: String) async throws -> Int64 {
        try await Support.scalar(client, PostgresQuery(unsafeSQL: sql), as: Int64.self) ?? -1
    }

    // MARK: - send-test

    /// The auditor's case: a segment choosing the locale (`'de' AS locale`) was tested in the device's own (`en`).
    @Test("send-test renders the copy in the locale the campaign's segment gives the device, as the real run does; a device outside the segment keeps its own")
    func sendTestTakesTheSegmentsLocale() async throws {
        try await MixedTestEnvironment.with { environment in
            let (_, url) = try await Self.seededDatabase(devices: 20)
            let file = try CLITests.temporaryFile(
                "send-test-locale.yaml",
                """
                name: send-test-locale
                notification_type: cli-send-test-locale
                segment:
                  sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, 'de' AS locale FROM bugle.devices d WHERE d.is_active AND d.id <> 4
                message:
                  default_locale: en
                  locales:
                    en: { title: Hello, body: english }
                    de: { title: Hallo, body: deutsch }
                """
            )
            // u2 and u4 are Android devices 2 and 4 with locale `en` (device 4 is outside the segment).
            let test = try await CLITests.bugle(
                ["send-test", file, "--user", "u2", "--user", "u4", "--providers", environment.material.providersFile, "--csv", Self.csvPath("send-test-locale"), "--quiet"],
                environment: ["BUGLE_DATABASE_URL": url])
            #expect(test.status == 0, "\(test.stdout) \(test.stderr)")
            let titles = Dictionary(uniqueKeysWithValues: environment.fcm.accepted().map { ($0.target, $0.title ?? "") })
            #expect(titles.count == 2, "\(titles)")
            #expect(titles.first { $0.key.contains(Self.md5("2")) }?.value == "Hallo", "\(titles)")
            #expect(titles.first { $0.key.contains(Self.md5("4")) }?.value == "Hello", "\(titles)")
        }
    }

    /// The auditor's case: `bugle resume` of a send-test killed while reading its seeds read the campaign's whole
    /// segment and sent to every user in it (and applied the campaign's schedule): the seeds are not stored with the run.
    @Test("a send-test killed while reading its seeds is neither resumed nor joined (it would read the whole segment): refused, nothing sent; cancel ends it")
    func interruptedSendTestIsNotResumed() async throws {
        try await MixedTestEnvironment.with { environment in
            let (configuration, url) = try await Self.seededDatabase(devices: 20)
            let file = try CLITests.temporaryFile(
                "send-test-killed.yaml",
                """
                name: send-test-killed
                notification_type: cli-send-test-killed
                dedupe: daily
                segment:
                  sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE d.is_active
                message:
                  default_locale: en
                  locales: { en: { title: Hi, body: Test } }
                """
            )
            let env = ["BUGLE_DATABASE_URL": url]
            let crashed = try await CLITests.bugle(
                ["send-test", file, "--user", "u3", "--providers", environment.material.providersFile, "--quiet"],
                environment: env.merging(["BUGLE_FAILPOINT": "crash_in_materialize:1"]) { $1 })
            #expect(crashed.status == SIGKILL, "\(crashed.stderr)")
            let runID = try await Database.withClient(configuration, logger: Support.logger) { client in
                try await Support.scalar(client, "SELECT id FROM bugle.runs WHERE kind = 'test' AND status = 'materializing'", as: Int64.self)
            }
            let id = try #require(runID)
            for command in ["resume", "worker"] {
                let refused = try await CLITests.bugle([command, String(id), "--providers", environment.material.providersFile, "--quiet"], environment: env)
                #expect(refused.status == 1, "\(command): \(refused.stderr)")
                #expect(refused.stderr.contains("run \(id) is a test send (`bugle send-test`), which is not resumed or joined"), "\(command): \(refused.stderr)")
            }
            #expect(environment.apns.accepted().isEmpty && environment.fcm.accepted().isEmpty)
            let cancelled = try await CLITests.bugle(["cancel", String(id)], environment: env)
            #expect(cancelled.status == 0, "\(cancelled.stderr)")
        }
    }

    @Test("send-test --user u3 reaches exactly u3's two devices with rendered copy, as a test run that consumes no dedupe")
    func sendTest() async throws {
        try await MixedTestEnvironment.with { environment in
            let configuration = try await TestDatabase.fresh()
            let url = try CLITests.url(configuration)
            try await Database.withClient(configuration, logger: Support.logger) { client in
                // u1...u20, odd ids iOS, even ids Android, none with a scripted (dead) token; u3 also has device 21 (Android).
                try await MixedTestEnvironment.seed(client, count: 20, deadEvery: 1_000_000)
                _ = try await client.query(
                    """
                    INSERT INTO bugle.devices (id, user_id, token, platform, locale)
                    VALUES (21, 'u3', 'live-' || md5('21') || ':APA91b', 'android', 'en')
                    """,
                    logger: Support.logger
                ).collect()
            }
            let file = try CLITests.temporaryFile(
                "send-test.yaml",
                """
                name: send-test-feature
                notification_type: cli-send-test
                dedupe: daily
                segment:
                  sql: |
                    SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, 'N' || d.id AS first_name
                      FROM bugle.devices d WHERE d.is_active
                message:
                  default_locale: en
                  locales:
                    en: { title: "Hi {{first_name}}", body: "From the CLI" }
                """
            )
            let providers = environment.material.providersFile
            let env = ["BUGLE_DATABASE_URL": url]

            let test = try await CLITests.bugle(
                ["send-test", file, "--user", "u3", "--providers", providers, "--csv", Self.csvPath("send-test"), "--quiet"], environment: env)
            #expect(test.status == 0, "\(test.stdout) \(test.stderr)")
            // The campaign's on_null is skip (the default): the test renders a NULL value where the run would skip.
            #expect(test.stdout.contains("message.on_null is skip: the real run skips a recipient whose template variable is NULL"), "\(test.stdout)")

            let (u3iOS, u3Android, iosTokens, androidTokens) = try await Database.withClient(configuration, logger: Support.logger) { client in
                (
                    try await Self.tokens(client, platform: "ios", user: "u3"), try await Self.tokens(client, platform: "android", user: "u3"),
                    try await Self.tokens(client, platform: "ios"), try await Self.tokens(client, platform: "android")
                )
            }
            #expect(u3iOS.count == 1 && u3Android.count == 1)
            #expect(iosTokens.count == 10 && androidTokens.count == 11)
            let testAPNs = environment.apns.accepted()
            let testFCM = environment.fcm.accepted()
            // Exactly u3's devices: device 3 (iOS) and device 21 (Android), once each.
            #expect(testAPNs.map(\.token) == u3iOS)
            #expect(testFCM.map(\.target) == u3Android)
            #expect(testFCM.first?.title == "Hi N21", "\(testFCM)")
            #expect(testFCM.first?.body == "From the CLI")
            // The iOS payload is the one of the copy rendered from device 3's segment row (its locale `de` falls back to en).
            let campaign = try CampaignLoader.load(path: file)
            let expected = try APNsPayloadBuilder(template: campaign.message).payload(for: RenderedCopy(locale: "en", title: "Hi N3", body: "From the CLI"))
            let expectedSHA = SHA256.hash(data: expected).map { String(format: "%02x", $0) }.joined()
            #expect(testAPNs.first?.payloadSHA256 == expectedSHA)

            // Recorded as a test run with no dedupe period; nothing written to the dedupe log or the frequency window.
            try await Database.withClient(configuration, logger: Support.logger) { client in
                let rows = try await client.query(
                    "SELECT kind, period_key, status, recipients_total FROM bugle.runs ORDER BY id", logger: Support.logger)
                var runs: [(String, String?, String, Int64?)] = []
                for try await row in rows.decode((String, String?, String, Int64?).self) { runs.append(row) }
                #expect(runs.count == 1)
                #expect(runs.first?.0 == "test")
                #expect(runs.first.map { $0.1 == nil } == true, "period_key: \(String(describing: runs.first?.1))")
                #expect(runs.first?.2 == "completed")
                #expect(runs.first?.3 == 2)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.notification_log") == 0)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.user_sends") == 0)
            }

            // The real run afterwards still reaches every device of all 20 users, u3 included.
            let real = try await CLITests.bugle(
                ["run", file, "--providers", providers, "--csv", Self.csvPath("send-test-real"), "--quiet"], environment: env)
            #expect(real.status == 0, "\(real.stdout) \(real.stderr)")
            let apnsTally = Self.tally(environment.apns.accepted().map(\.token))
            let fcmTally = Self.tally(environment.fcm.accepted().map(\.target))
            // u3's devices twice (test + run), every other device once.
            #expect(apnsTally == Dictionary(uniqueKeysWithValues: iosTokens.map { ($0, u3iOS.contains($0) ? 2 : 1) }))
            #expect(fcmTally == Dictionary(uniqueKeysWithValues: androidTokens.map { ($0, u3Android.contains($0) ? 2 : 1) }))
            let (realRuns, logged, loggedUsers, realSent) = try await Database.withClient(configuration, logger: Support.logger) { client in
                (
                    try await Self.count(client, "SELECT count(*)::bigint FROM bugle.runs WHERE kind = 'campaign' AND period_key IS NOT NULL AND status = 'completed'"),
                    try await Self.count(client, "SELECT count(*)::bigint FROM bugle.notification_log WHERE status = 'sent'"),
                    try await Self.count(client, "SELECT count(DISTINCT user_id)::bigint FROM bugle.notification_log"),
                    try await Self.count(client, "SELECT count(*)::bigint FROM bugle.run_recipients r JOIN bugle.runs u ON u.id = r.run_id WHERE u.kind = 'campaign' AND r.state = 'sent'")
                )
            }
            #expect(realRuns == 1)
            // `bugle runs` tells the test send from the campaign run (it listed both alike).
            let listed = try await CLITests.bugle(["runs"], environment: env).stdout.split(separator: "\n")
            #expect(listed.filter { $0.hasSuffix("send-test-feature (test send)") }.count == 1, "\(listed)")
            #expect(listed.filter { $0.hasSuffix("send-test-feature") }.count == 1, "\(listed)")
            let json = try await CLITests.bugle(["runs", "--json"], environment: env).stdout
            #expect(json.contains("\"kind\":\"test\"") && json.contains("\"kind\":\"campaign\""), "\(json)")
            #expect(logged == 20)
            #expect(loggedUsers == 20)
            #expect(realSent == 21)

            // A seed without an active device, alone or beside one that has devices, and no seed at all: exit 1 naming
            // the seed, nothing sent to anyone, no run recorded.
            let nobody = try await CLITests.bugle(
                ["send-test", file, "--user", "nobody", "--providers", providers, "--csv", Self.csvPath("send-test-nobody"), "--quiet"], environment: env)
            #expect(nobody.status == 1, "\(nobody.stdout) \(nobody.stderr)")
            #expect(nobody.stderr.contains("no active device matches the seed(s) users nobody; nothing was sent"), "\(nobody.stderr)")
            let deadToken = "dead-" + String(repeating: "0", count: 40)
            let mixed = try await CLITests.bugle(
                ["send-test", file, "--user", "u5", "--user", "nobody", "--token", u3iOS[0], "--token", deadToken, "--providers", providers,
                 "--csv", Self.csvPath("send-test-mixed"), "--quiet"],
                environment: env)
            #expect(mixed.status == 1, "\(mixed.stdout) \(mixed.stderr)")
            #expect(mixed.stderr.contains("users nobody; 1 token(s) \(TokenFingerprint.of(deadToken)); nothing was sent"), "\(mixed.stderr)")
            #expect(!mixed.stderr.contains("u5") && !(mixed.stdout + mixed.stderr).contains(deadToken), "\(mixed.stderr)")
            let runsAfter = try await Database.withClient(configuration, logger: Support.logger) { client in
                try await Self.count(client, "SELECT count(*)::bigint FROM bugle.runs")
            }
            #expect(runsAfter == 2, "only the test send and the real run that worked are recorded")
            let noSeed = try await CLITests.bugle(["send-test", file, "--providers", providers, "--quiet"], environment: env)
            #expect(noSeed.status == 1, "\(noSeed.stdout) \(noSeed.stderr)")
            #expect(noSeed.stderr.contains("--user"), "\(noSeed.stderr)")
            #expect(environment.apns.accepted().count == 11)
            #expect(environment.fcm.accepted().count == 12)
            // An iOS token in capitals, as an engineer may paste it: stored lowercase, it matched no device (exit 1).
            let upper = try await CLITests.bugle(
                ["send-test", file, "--token", u3iOS[0].uppercased(), "--providers", providers, "--csv", Self.csvPath("send-test-upper"), "--quiet"],
                environment: env)
            #expect(upper.status == 0, "\(upper.stdout) \(upper.stderr)")
            #expect(environment.apns.accepted().count == 12)
            #expect(environment.apns.accepted().last?.token == u3iOS[0])
        }
    }

    // MARK: - run --no-wait + tick

    @Test("run --no-wait with send_at ahead schedules (until when, as an instant) and exits 0; tick sends nothing before send_at (--json: one line), everything once after, its report in --report-dir")
    func noWaitThenTick() async throws {
        try await MixedTestEnvironment.with { environment in
            let (configuration, url) = try await Self.seededDatabase(devices: 40)
            // An hour ahead, so no load can make the set-up reach it; the hour then passes by moving the ledger's
            // due times back (below), which is all `tick` reads.
            let sendAt = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3600).rounded(.up))
            let sendAtText = ISO8601DateFormatter().string(from: sendAt)
            let file = try CLITests.temporaryFile(
                "scheduled.yaml",
                """
                name: scheduled-feature
                notification_type: cli-scheduled
                dedupe: none
                segment:
                  sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE d.is_active
                message:
                  default_locale: en
                  locales:
                    en: { title: "Later", body: "At send_at" }
                delivery:
                  send_at: \(sendAtText)
                """
            )
            let workDirectory = (file as NSString).deletingLastPathComponent
            let providers = environment.material.providersFile
            let env = ["BUGLE_DATABASE_URL": url]

            let scheduled = try await CLITests.bugle(
                ["run", file, "--no-wait", "--providers", providers, "--csv", Self.csvPath("no-wait"), "--quiet"], environment: env)
            #expect(scheduled.status == 0, "\(scheduled.stdout) \(scheduled.stderr)")
            #expect(scheduled.stdout.contains("scheduled"), "\(scheduled.stdout)")
            #expect(environment.apns.accepted().count == 0)
            #expect(environment.fcm.accepted().count == 0)
            try await Database.withClient(configuration, logger: Support.logger) { client in
                let status = try await Support.scalar(client, "SELECT status || ':' || coalesce(pause_reason, '') FROM bugle.runs", as: String.self)
                // The instant the recipients are due, not "due in N s" (stale as soon as written).
                #expect(status == "paused:scheduled: next recipients due at \(sendAtText)", "\(status ?? "no run")")
                // Nothing sent yet: not started, so its duration will count from the tick that sends (it counted from
                // the run's creation, an hour before anything was sent).
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.runs WHERE started_at IS NULL") == 1)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE state = 'pending'") == 40)
            }

            let early = try await CLITests.bugle(["tick", "--providers", providers, "--quiet", "--json"], in: URL(fileURLWithPath: workDirectory), environment: env)
            #expect(early.status == 0, "\(early.stdout) \(early.stderr)")
            #expect(early.stdout == "{\"runs_due\":0}\n", "\(early.stdout)")
            #expect(early.stderr.contains("no scheduled run has recipients due"), "\(early.stderr)")
            let missing = try await CLITests.bugle(
                ["tick", "--providers", providers, "--quiet", "--report-dir", workDirectory + "/no-such-dir"], environment: env)
            #expect(missing.status != 0 && missing.stderr.contains("--report-dir \(workDirectory)/no-such-dir: no such directory"), "\(missing.stderr)")
            let notDirectory = try await CLITests.bugle(["tick", "--providers", providers, "--quiet", "--report-dir", file], environment: env)
            #expect(notDirectory.status != 0 && notDirectory.stderr.contains("--report-dir \(file): not a directory"), "\(notDirectory.stderr)")
            // `bugle runs` says why the run is paused: when it is due.
            let runs = try await CLITests.bugle(["runs"], environment: env)
            #expect(runs.stdout.contains("(scheduled: next recipients due at \(sendAtText))"), "\(runs.stdout)")
            #expect(environment.apns.accepted().count == 0)
            #expect(environment.fcm.accepted().count == 0)
            // Every recipient is due exactly at send_at.
            try await Database.withClient(configuration, logger: Support.logger) { client in
                let due = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE next_attempt_at = to_timestamp(\(sendAt.timeIntervalSince1970))",
                    as: Int64.self)
                #expect(due == 40)
                // The hour passes.
                _ = try await client.query("UPDATE bugle.run_recipients SET next_attempt_at = next_attempt_at - interval '3601 seconds'", logger: Support.logger).collect()
            }
            let reports = workDirectory + "/reports-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: true)
            let due = try await CLITests.bugle(
                ["tick", "--providers", providers, "--quiet", "--report-dir", reports], in: URL(fileURLWithPath: workDirectory), environment: env)
            #expect(due.status == 0, "\(due.stdout) \(due.stderr)")
            let (iosTokens, androidTokens, status) = try await Database.withClient(configuration, logger: Support.logger) { client in
                (
                    try await Self.tokens(client, platform: "ios"), try await Self.tokens(client, platform: "android"),
                    try await Support.scalar(client, "SELECT status FROM bugle.runs", as: String.self)
                )
            }
            #expect(iosTokens.count == 20 && androidTokens.count == 20)
            #expect(Self.tally(environment.apns.accepted().map(\.token)) == Dictionary(uniqueKeysWithValues: iosTokens.map { ($0, 1) }))
            #expect(Self.tally(environment.fcm.accepted().map(\.target)) == Dictionary(uniqueKeysWithValues: androidTokens.map { ($0, 1) }))
            #expect(status == "completed")
            let started = try await Database.withClient(configuration, logger: Support.logger) { client in
                try await Self.count(client, "SELECT count(*)::bigint FROM bugle.runs WHERE started_at IS NOT NULL AND finished_at >= started_at")
            }
            #expect(started == 1)
            #expect(FileManager.default.fileExists(atPath: reports + "/bugle-run-1.csv"), "tick writes the run's report in --report-dir")
            #expect(!FileManager.default.fileExists(atPath: workDirectory + "/bugle-run-1.csv"))

            let again = try await CLITests.bugle(["tick", "--providers", providers, "--quiet"], in: URL(fileURLWithPath: workDirectory), environment: env)
            #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
            #expect(again.stdout.contains("no scheduled run has recipients due"), "\(again.stdout)")
            #expect(environment.apns.accepted().count == 20)
            #expect(environment.fcm.accepted().count == 20)
        }
    }

    /// `tick` and `resume` rebuild a run's campaign from the stored text and file path: a path stored as typed resolved a
    /// relative `providers:` against the directory they ran in, and one run that failed so ended the tick, leaving every
    /// run due after it unsent.
    @Test("a campaign run by a relative path, with a relative providers:, is ticked from another directory; a run whose files are gone is said and skipped, the next one sent")
    func tickFromAnotherDirectory() async throws {
        try await MixedTestEnvironment.with { environment in
            let (configuration, url) = try await Self.seededDatabase(devices: 20)
            let providersFile = URL(fileURLWithPath: environment.material.providersFile)
            let folder = providersFile.deletingLastPathComponent().appendingPathComponent("campaigns-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let sendAt = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3600))
            try """
                name: relative-tick
                notification_type: cli-relative
                dedupe: none
                providers: ../\(providersFile.lastPathComponent)
                segment:
                  sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE d.is_active
                message:
                  default_locale: en
                  locales:
                    en: { title: "Later", body: "From a relative path" }
                delivery:
                  send_at: \(sendAt)
                """.write(to: folder.appendingPathComponent("relative.yaml"), atomically: true, encoding: .utf8)
            let env = ["BUGLE_DATABASE_URL": url]
            for _ in 0..<2 {
                let scheduled = try await CLITests.bugle(["run", "relative.yaml", "--no-wait", "--quiet", "--csv", Self.csvPath("relative")], in: folder, environment: env)
                #expect(scheduled.status == 0, "\(scheduled.stderr)")
            }
            try await Database.withClient(configuration, logger: Support.logger) { client in
                let stored = try await Support.scalar(client, "SELECT campaign_file FROM bugle.runs WHERE id = 2", as: String.self)
                #expect(stored == folder.appendingPathComponent("relative.yaml").path, "\(stored ?? "none")")
                // Run 1's campaign file and folder are gone (moved away since): its providers file cannot be found.
                _ = try await client.query("UPDATE bugle.runs SET campaign_file = '/nonexistent/moved/relative.yaml' WHERE id = 1", logger: Support.logger).collect()
                _ = try await client.query("UPDATE bugle.run_recipients SET next_attempt_at = now() - interval '1 second'", logger: Support.logger).collect()
            }
            let reports = FileManager.default.temporaryDirectory.path
            let tick = try await CLITests.bugle(["tick", "--quiet", "--report-dir", reports], in: URL(fileURLWithPath: "/"), environment: env)
            #expect(tick.status == 2, "\(tick.stderr)")
            #expect(tick.stderr.contains("run 1: not sent: ") && tick.stderr.contains("/nonexistent/providers.yaml"), "\(tick.stderr)")
            let statuses = try await Database.withClient(configuration, logger: Support.logger) { client in
                try await Support.scalar(client, "SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM bugle.runs", as: String.self)
            }
            #expect(statuses == "1:paused,2:completed", "\(statuses ?? "none")")
            #expect(environment.apns.accepted().count + environment.fcm.accepted().count == 20)
            // With --json, the run that cannot be sent has its line (a tick whose due runs could none be sent printed
            // nothing on stdout).
            let json = try await CLITests.bugle(["tick", "--quiet", "--json", "--report-dir", reports], in: URL(fileURLWithPath: "/"), environment: env)
            #expect(json.status == 2, "\(json.stderr)")
            let line = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
            #expect(line["run_id"] as? Int == 1 && line["status"] as? String == "paused", "\(line)")
            #expect((line["not_sent"] as? String)?.contains("/nonexistent/providers.yaml") == true, "\(line)")
            // Past its deadline, it is closed although its providers file is still missing (closing needs none; it
            // stayed scheduled, said at every tick).
            let past = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-7200))
            let deadline = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-3600))
            try await Database.withClient(configuration, logger: Support.logger) { client in
                _ = try await client.query(
                    PostgresQuery(
                        unsafeSQL: "UPDATE bugle.runs SET campaign_yaml = regexp_replace(campaign_yaml, 'send_at: [^\\n]+', 'send_at: \(past)\n  not_after: \(deadline)') WHERE id = 1"),
                    logger: Support.logger
                ).collect()
            }
            let closing = try await CLITests.bugle(["tick", "--quiet", "--report-dir", reports], in: URL(fileURLWithPath: "/"), environment: env)
            #expect(closing.status == 0, "\(closing.stderr)")
            #expect(closing.stdout.contains("run 1: delivery.not_after"), "\(closing.stdout)")
            let closed = try await Database.withClient(configuration, logger: Support.logger) { client in
                try await Support.scalar(client, "SELECT status FROM bugle.runs WHERE id = 1", as: String.self)
            }
            #expect(closed == "completed", "\(closed ?? "none")")
        }
    }

    // MARK: - validate against the segment

    /// SQL the server refuses passed `bugle validate` (`ok`, exit 0) whenever the copy used no template variable; the run
    /// then failed on it.
    @Test("validate prepares an untemplated segment too when a database is named: SQL the server refuses exits 1; without one, a note")
    func validateUntemplatedSegment() async throws {
        let (_, url) = try await Self.seededDatabase(devices: 2)
        func campaign(_ name: String, sql: String) throws -> String {
            try CLITests.temporaryFile(
                "\(name).yaml",
                """
                name: \(name)
                notification_type: cli-validate-sql
                segment:
                  sql: \(sql)
                message:
                  default_locale: en
                  locales:
                    en: { title: "Hi", body: "Welcome back" }
                """
            )
        }
        let env = ["BUGLE_DATABASE_URL": url]
        for (name, sql) in [("two-statements", "SELECT 1; SELECT 2"), ("no-such-table", "SELECT id AS device_id FROM nowhere")] {
            let bad = try campaign(name, sql: sql)
            let refused = try await CLITests.bugle(["validate", bad], environment: env)
            #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains("\(bad): segment.sql"), "\(refused.stderr)")
            let offline = try await CLITests.bugle(["validate", bad, "--offline"], environment: env)
            #expect(offline.status == 0 && offline.stdout.contains("segment.sql not checked (--offline)"), "\(offline.stdout) \(offline.stderr)")
            // No database named and no embedded cluster running: nothing is started, and a note says so.
            let home = NSTemporaryDirectory() + "bugle-validate-\(UUID().uuidString)"
            let unchecked = try await CLITests.bugle(["validate", bad], environment: ["BUGLE_HOME": home])
            #expect(unchecked.status == 0, "\(unchecked.stdout) \(unchecked.stderr)")
            #expect(unchecked.stderr.contains("segment.sql not checked: no database named"), "\(unchecked.stderr)")
            #expect(!FileManager.default.fileExists(atPath: home + "/postgres"), "no cluster was created")
        }
        let good = try campaign("fine-sql", sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d")
        let accepted = try await CLITests.bugle(["validate", good], environment: env)
        #expect(accepted.status == 0 && accepted.stdout.contains("segment prepared"), "\(accepted.stdout) \(accepted.stderr)")
    }

    @Test("validate prepares a templated segment: an unknown variable exits 1 naming file, key path and variable; run and the dry run refuse it before writing")
    func validateTemplateVariables() async throws {
        try await MixedTestEnvironment.with { environment in
            let (configuration, url) = try await Self.seededDatabase(devices: 10)
            func campaign(_ name: String, variable: String) throws -> String {
                try CLITests.temporaryFile(
                    "\(name).yaml",
                    """
                    name: \(name)
                    notification_type: cli-validate-vars
                    segment:
                      sql: |
                        SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, 'N' || d.id AS first_name
                          FROM bugle.devices d WHERE d.is_active
                    message:
                      default_locale: en
                      locales:
                        en: { title: "Hi {{\(variable)}}", body: "Welcome back" }
                    """
                )
            }
            let bad = try campaign("typo", variable: "first_nam")
            let good = try campaign("fine", variable: "first_name")
            let env = ["BUGLE_DATABASE_URL": url]

            let refused = try await CLITests.bugle(["validate", bad], environment: env)
            #expect(refused.status == 1, "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains(bad), "\(refused.stderr)")
            #expect(refused.stderr.contains("message.locales.en.title"), "\(refused.stderr)")
            #expect(refused.stderr.contains("{{first_nam}}"), "\(refused.stderr)")

            let offline = try await CLITests.bugle(["validate", bad, "--offline"], environment: env)
            #expect(offline.status == 0, "\(offline.stdout) \(offline.stderr)")
            #expect(offline.stdout.contains("--offline"), "\(offline.stdout)")

            let accepted = try await CLITests.bugle(["validate", good], environment: env)
            #expect(accepted.status == 0, "\(accepted.stdout) \(accepted.stderr)")
            #expect(accepted.stdout.contains("first_name"), "\(accepted.stdout)")

            // The dry run refuses it too, rather than counting every recipient as null_variable; no preview is written.
            let preview = Self.csvPath("validate-dry-run")
            let dry = try await CLITests.bugle(["run", bad, "--dry-run", "--csv", preview], environment: env)
            #expect(dry.status == 1, "\(dry.stdout) \(dry.stderr)")
            #expect(dry.stderr.contains("\(bad): message.locales.en.title: template variable {{first_nam}}"), "\(dry.stderr)")
            #expect(!dry.stdout.contains("null_variable"), "\(dry.stdout)")
            #expect(!FileManager.default.fileExists(atPath: preview))
            let dryGood = try await CLITests.bugle(["run", good, "--dry-run"], environment: env)
            #expect(dryGood.status == 0, "\(dryGood.stdout) \(dryGood.stderr)")
            #expect(dryGood.stdout.contains("10 row(s) read, 10 would be sent"), "\(dryGood.stdout)")

            let run = try await CLITests.bugle(
                ["run", bad, "--providers", environment.material.providersFile, "--csv", Self.csvPath("validate-run"), "--quiet"], environment: env)
            #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
            #expect(run.stderr.contains("{{first_nam}}"), "\(run.stderr)")
            #expect(environment.apns.accepted().count == 0)
            #expect(environment.fcm.accepted().count == 0)
            let runs = try await Database.withClient(configuration, logger: Support.logger) { client in
                try await Self.count(client, "SELECT count(*)::bigint FROM bugle.runs")
            }
            #expect(runs == 0)
        }
    }
}
