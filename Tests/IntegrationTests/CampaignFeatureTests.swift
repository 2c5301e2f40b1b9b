import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Crypto
import Foundation
import PostgresNIO
import Synchronization
import Testing

/// Marketer features end to end: templates, locales and A/B variants, frequency caps across campaigns, copy
/// rotation across runs, and local-time delivery through a day — real PostgreSQL ledger → runner → lanes over
/// TLS + HTTP/2 → both in-process simulators, checked from the simulators' own records.
@Suite("Campaign features end to end (PostgreSQL + simulators over TLS/HTTP2)")
struct CampaignFeatureTests {
    typealias Support = LedgerTestSupport

    /// Devices `first...last`, user `u<i>`, odd ids iOS (64 hex), even Android; `locale(i)` and `timezone(i)` per device.
    static func seed(
        _ client: PostgresClient, _ ids: ClosedRange<Int>, locale: String = "'en'", timezone: String = "NULL"
    ) async throws {
        _ = try await client.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO bugle.devices (id, user_id, token, platform, locale, timezone)
                    SELECT i, 'u' || i,
                           CASE WHEN i % 2 = 1 THEN lpad(to_hex(i), 64, '0') ELSE 'live-' || md5(i::text) || ':APA91b' END,
                           CASE WHEN i % 2 = 1 THEN 'ios' ELSE 'android' END, \(locale), \(timezone)
                      FROM generate_series(\(ids.lowerBound), \(ids.upperBound)) i
                    """),
            logger: Support.logger
        ).collect()
    }

    /// Runs `campaign` `count` times to completion; returns the titles each FCM target got, with their times.
    static func titlesOverRuns(
        _ count: Int, _ campaign: Campaign, client: PostgresClient, environment: MixedTestEnvironment
    ) async throws -> [String: [(Double, String)]] {
        for _ in 0..<count {
            let lanes = try environment.lanes(for: campaign)
            let (_, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
            await lanes.shutdown()
            #expect(result.ending == .completed)
        }
        var titles: [String: [(Double, String)]] = [:]
        for record in environment.fcm.accepted() { titles[record.target, default: []].append((record.time, record.title ?? "")) }
        return titles
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// device token → (device id, variant, locale tag) from the run's ledger.
    static func ledger(_ client: PostgresClient, runID: Int64) async throws -> [String: (id: Int64, variant: String?, locale: String?)] {
        let rows = try await client.query(
            "SELECT token, device_id, variant, locale FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'",
            logger: Support.logger
        )
        var map: [String: (id: Int64, variant: String?, locale: String?)] = [:]
        for try await (token, id, variant, locale) in rows.decode((String, Int64, String?, String?).self) { map[token] = (id, variant, locale) }
        return map
    }

    @Test("10,000 devices, two locales, templates and two variants: every device's text matches its locale, variant and segment values")
    func templatesLocalesVariants() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, 1...10_000, locale: "CASE WHEN i % 3 = 0 THEN 'pt-BR' WHEN i % 3 = 1 THEN 'en-US' ELSE 'en' END")
                var campaign = Support.campaign(
                    sql: """
                        SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale,
                               CASE WHEN d.id % 10 = 0 THEN NULL ELSE 'N' || d.id END AS first_name
                          FROM bugle.devices d WHERE d.is_active
                        """,
                    pageSize: 2000, window: 1000)
                campaign.message = MessageTemplate(
                    defaultLocale: "en",
                    localeCopies: [
                        "en": [LocalizedCopy(title: "Hi {{first_name}}", body: "Spring sale")],
                        "pt": [LocalizedCopy(title: "Olá {{first_name}}", body: "Promoção")],
                    ],
                    variableDefaults: ["first_name": "friend"],
                    data: ["deeplink": "app://sale"])
                campaign.variants = [
                    CampaignVariant(name: "control", weight: 1),
                    CampaignVariant(
                        name: "bold", weight: 1,
                        localeCopies: ["en": [LocalizedCopy(title: "HI {{uppercased(first_name)}}!", body: "Spring SALE")]],
                        data: ["v": "bold"]),
                ]
                let lanes = try environment.lanes(for: campaign)
                let (runID, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                await lanes.shutdown()
                #expect(result.ending == .completed)

                let ledger = try await Self.ledger(client, runID: runID)
                #expect(ledger.count == 10_000)
                func expected(id: Int64, variant: String?) -> RenderedCopy {
                    let name = id % 10 == 0 ? "friend" : "N\(id)"
                    if id % 3 == 0 { return RenderedCopy(locale: "pt", title: "Olá \(name)", body: "Promoção", data: variant == "bold" ? ["deeplink": "app://sale", "v": "bold"] : ["deeplink": "app://sale"]) }
                    if variant == "bold" { return RenderedCopy(locale: "en", title: "HI \(name.uppercased())!", body: "Spring SALE", data: ["deeplink": "app://sale", "v": "bold"]) }
                    return RenderedCopy(locale: "en", title: "Hi \(name)", body: "Spring sale", data: ["deeplink": "app://sale"])
                }
                // Android: the FCM simulator records each message's title and body.
                let fcm = environment.fcm.accepted()
                #expect(fcm.count == 5_000)
                var wrongFCM = 0
                for record in fcm {
                    guard let entry = ledger[record.target] else { wrongFCM += 1; continue }
                    let copy = expected(id: entry.id, variant: entry.variant)
                    if record.title != copy.title || record.body != copy.body || entry.locale != copy.locale { wrongFCM += 1 }
                }
                #expect(wrongFCM == 0)
                // iOS: the APNs simulator records the payload's hash; it must be the payload of the expected copy.
                let apns = environment.apns.accepted()
                #expect(apns.count == 5_000)
                let builder = APNsPayloadBuilder(template: campaign.message)
                var wrongAPNs = 0
                for record in apns {
                    guard let entry = ledger[record.token] else { wrongAPNs += 1; continue }
                    let payload = try builder.payload(for: expected(id: entry.id, variant: entry.variant))
                    if Self.sha256(payload) != record.payloadSHA256 { wrongAPNs += 1 }
                }
                #expect(wrongAPNs == 0)

                // The split is close to the weights, and the per-variant summary agrees with the ledger.
                let bold = ledger.values.filter { $0.variant == "bold" }.count
                let control = ledger.values.filter { $0.variant == "control" }.count
                #expect(bold + control == 10_000)
                #expect(abs(bold - 5_000) < 400)
                let summary = try await RunRepository(client: client, logger: Support.logger).variantSummary(runID: runID)
                #expect(summary == [
                    VariantSummaryLine(variant: "bold", status: "sent", count: Int64(bold)),
                    VariantSummaryLine(variant: "control", status: "sent", count: Int64(control)),
                ])
                let csv = TestScratch.root + "bugle-variants-\(runID).csv"
                defer { try? FileManager.default.removeItem(atPath: csv) }
                try await ReportExporter(client: client, logger: Support.logger).export(runID: runID, to: csv)
                let lines = try String(contentsOfFile: csv, encoding: .utf8).split(separator: "\r\n")
                let variantColumn = try #require(ReportExporter.header.firstIndex(of: "variant"))
                let csvBold = lines.dropFirst().filter { $0.split(separator: ",", omittingEmptySubsequences: false)[variantColumn] == "bold" }.count
                #expect(csvBold == bold)
            }
        }
    }

    @Test("frequency cap across campaigns: sends of any campaign count; capped users are skipped_frequency; concurrent capped campaigns never both take a user's last slot")
    func frequencyCapAcrossCampaigns() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, 1...500)
                func campaign(_ name: String, users: ClosedRange<Int>, cap: Int?) -> Campaign {
                    var campaign = Support.campaign(
                        name: name,
                        sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d WHERE d.id BETWEEN \(users.lowerBound) AND \(users.upperBound)",
                        window: 100)
                    campaign.delivery.frequencyCap = cap.map { FrequencyCap(count: $0, perSeconds: 86_400) }
                    return campaign
                }
                func run(_ campaign: Campaign) async throws -> (Int64, [String: Int64]) {
                    let lanes = try environment.lanes(for: campaign)
                    let (runID, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                    await lanes.shutdown()
                    #expect(result.ending == .completed)
                    let summary = try await RunRepository(client: client, logger: Support.logger).summary(runID: runID)
                    return (runID, summary.reduce(into: [:]) { $0[$1.status, default: 0] += $1.count })
                }
                // A, uncapped, reaches users 1...100.
                #expect(try await run(campaign("a", users: 1...100, cap: nil)).1 == ["sent": 100])
                // B allows one per day: users A reached are capped.
                #expect(try await run(campaign("b", users: 1...300, cap: 1)).1 == ["sent": 200, "skipped_frequency": 100])
                // C allows two: everyone has exactly one so far.
                #expect(try await run(campaign("c", users: 1...300, cap: 2)).1 == ["sent": 300])
                #expect(try await run(campaign("d", users: 1...300, cap: 2)).1 == ["skipped_frequency": 300])

                // E and F, capped at one, race for users 301...500 at the same time.
                let e = campaign("e", users: 301...500, cap: 1)
                let f = campaign("f", users: 301...500, cap: 1)
                async let first = run(e)
                async let second = run(f)
                let (eCounts, fCounts) = try await (first.1, second.1)
                #expect(eCounts["sent", default: 0] + fCounts["sent", default: 0] == 200)
                #expect(eCounts["skipped_frequency", default: 0] + fCounts["skipped_frequency", default: 0] == 200)

                // From the simulators: users 1...300 got exactly two notifications, users 301...500 exactly one.
                var perToken: [String: Int] = [:]
                for record in environment.fcm.accepted() { perToken[record.target, default: 0] += 1 }
                for record in environment.apns.accepted() { perToken[record.token, default: 0] += 1 }
                let tokens = try await client.query("SELECT id, token FROM bugle.devices", logger: Support.logger)
                var wrong: [Int64] = []
                for try await (id, token) in tokens.decode((Int64, String).self) where perToken[token, default: 0] != (id <= 300 ? 2 : 1) {
                    wrong.append(id)
                }
                #expect(wrong.isEmpty)
                // Slots of users a capped run never reached were released when it ended.
                let unused = try await Support.scalar(
                    client,
                    """
                    SELECT count(*)::bigint FROM bugle.user_sends s
                     WHERE NOT EXISTS (SELECT 1 FROM bugle.run_recipients r WHERE r.run_id = s.run_id AND r.user_id = s.user_id AND r.state = 'sent')
                    """,
                    as: Int64.self)
                #expect(unused == 0)
            }
        }
    }

    @Test("copy rotation across three runs: each user gets copies A, B, C in turn")
    func rotationAcrossRuns() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, 1...60)
                var campaign = Support.campaign()
                campaign.message = MessageTemplate(
                    defaultLocale: "en", localeCopies: ["en": ["A", "B", "C"].map { LocalizedCopy(title: $0, body: "b") }])
                let titles = try await Self.titlesOverRuns(3, campaign, client: client, environment: environment)
                #expect(titles.count == 30)
                #expect(titles.values.allSatisfy { $0.sorted { $0.0 < $1.0 }.map(\.1) == ["A", "B", "C"] })
                // iOS users: the payload hashes follow the same order.
                let builder = APNsPayloadBuilder(template: campaign.message)
                let hashes = try ["A", "B", "C"].map { Self.sha256(try builder.payload(for: RenderedCopy(locale: "en", title: $0, body: "b"))) }
                var ios: [String: [(Double, String)]] = [:]
                for record in environment.apns.accepted() { ios[record.token, default: []].append((record.time, record.payloadSHA256)) }
                #expect(ios.count == 30)
                #expect(ios.values.allSatisfy { $0.sorted { $0.0 < $1.0 }.map(\.1) == hashes })
                let last = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.copy_rotation WHERE last_index = 2", as: Int64.self)
                #expect(last == 60)
            }
        }
    }

    /// The rotation kept the copy index of one of the user's sent devices: with an iPhone in a one-copy locale beside an
    /// Android phone in a three-copy one, it was always 0, and the Android phone got copy B on every run after the first.
    @Test("copy rotation for a user with devices in a one-copy and a three-copy locale: the three-copy device gets A, B, C, A")
    func rotationAcrossDevicesOfOneUser() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, 1...40, locale: "CASE WHEN i % 2 = 1 THEN 'de' ELSE 'en' END")
                // Devices 2k-1 (iOS, de) and 2k (Android, en) belong to one user.
                _ = try await client.query("UPDATE bugle.devices SET user_id = 'u' || ((id + 1) / 2)", logger: Support.logger).collect()
                var campaign = Support.campaign()
                campaign.message = MessageTemplate(
                    defaultLocale: "en",
                    localeCopies: ["en": ["A", "B", "C"].map { LocalizedCopy(title: $0, body: "b") }, "de": [LocalizedCopy(title: "D", body: "b")]])
                let titles = try await Self.titlesOverRuns(4, campaign, client: client, environment: environment)
                #expect(titles.count == 20)
                let orders = Set(titles.values.map { $0.sorted { $0.0 < $1.0 }.map(\.1) })
                #expect(orders == [["A", "B", "C", "A"]], "\(orders)")
            }
        }
    }

    @Test("local-time delivery through a day with an injected clock: each device is sent in the 15-minute tick its zone reaches 20:00")
    func localTimeThroughADay() async throws {
        // 2026-07-01T00:00:00Z (summer time in the northern zones).
        let start = 1_782_864_000.0
        let zones: [(zone: String?, offset: Double)] = [
            ("Asia/Kolkata", 14 * 3600 + 1800),  // UTC+5:30 → 14:30Z
            ("Asia/Kathmandu", 14 * 3600 + 900),  // UTC+5:45 → 14:15Z
            ("America/St_Johns", 22 * 3600 + 1800),  // NDT, UTC−2:30 → 22:30Z
            ("America/New_York", 0),  // EDT: it is 20:00 there at the start → due at once
            ("Europe/London", 19 * 3600),  // BST → 19:00Z
            ("UTC", 20 * 3600),
            (nil, 18 * 3600),  // unknown → fallback Europe/Berlin (CEST) → 18:00Z
            ("Not/AZone", 18 * 3600),
        ]
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                var expected: [Int64: Double] = [:]
                for (index, entry) in zones.enumerated() {
                    let first = index * 10 + 1
                    let zone = entry.zone.map { "'\($0)'" } ?? "NULL"
                    try await Self.seed(client, first...(first + 9), timezone: zone)
                    for id in first...(first + 9) { expected[Int64(id)] = start + entry.offset }
                }
                var campaign = Support.campaign(
                    sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, d.timezone FROM bugle.devices d")
                campaign.delivery.localTime = LocalTimeDelivery(deliverAt: LocalTime(hour: 20, minute: 0), fallbackTimeZone: "Europe/Berlin")
                let runID = try await RunRepository(client: client, logger: Support.logger).createRun(campaign: campaign, yaml: "x", periodKey: nil)
                let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: Support.logger)
                _ = try await Materializer(client: client, logger: Support.logger)
                    .materialize(runID: runID, campaign: campaign, reader: reader, now: Instant(secondsSince1970: start))

                let clock = Mutex(start)
                let store = PostgresCampaignStore(client: client, scheduleClock: { clock.withLock { $0 } }, logger: Support.logger)
                let lanes = try environment.lanes(for: campaign)
                var configuration = CampaignRunner.Configuration()
                configuration.leaseTTLSeconds = 120
                configuration.leaveWhenIdle = .seconds(30)
                var sentAt: [String: Double] = [:]
                var duplicates = 0
                var endings: [RunResult.Ending] = []
                for tick in 0..<96 {
                    let now = start + Double(tick * 900)
                    clock.withLock { $0 = now }
                    let runner = CampaignRunner(
                        campaign: campaign, runID: runID, store: store, providers: lanes.providers, control: RunControl(),
                        configuration: configuration, logger: Support.logger)
                    let result = try await runner.run(owner: "tick-\(tick)")
                    endings.append(result.ending)
                    let tokens = environment.fcm.accepted().map(\.target) + environment.apns.accepted().map(\.token)
                    var counts: [String: Int] = [:]
                    for token in tokens { counts[token, default: 0] += 1 }
                    duplicates = counts.values.filter { $0 > 1 }.count
                    for token in counts.keys where sentAt[token] == nil { sentAt[token] = now }
                    if result.ending == .completed { break }
                }
                await lanes.shutdown()
                #expect(duplicates == 0)
                #expect(endings.last == .completed)
                #expect(endings.dropLast().allSatisfy { if case .scheduled = $0 { return true } else { return false } })

                let devices = try await client.query("SELECT id, token FROM bugle.devices", logger: Support.logger)
                var wrong: [String] = []
                for try await (id, token) in devices.decode((Int64, String).self) where sentAt[token] != expected[id] {
                    wrong.append("device \(id): sent at \(sentAt[token].map { String($0 - start) } ?? "never"), expected \((expected[id] ?? 0) - start)")
                }
                #expect(wrong.isEmpty, "\(wrong.prefix(5))")
            }
        }
    }

    /// Quiet hours are checked again when a claimed recipient is sent, not only when the audience is read: a slow paced
    /// run, a backoff or a resume reaches devices after their quiet hours began. The audience is read at the real now,
    /// outside every device's quiet hours (two hours ahead of UTC, for an hour); the runner's clock then says those two
    /// hours have passed: the UTC devices are now inside them, the UTC−5 ones are not.
    @Test("quiet hours that begin after the audience was read hold (or skip) the devices they cover at send time", arguments: [QuietHoursAction.hold, .skip])
    func quietHoursAtSendTime(_ action: QuietHoursAction) async throws {
        let now = Date().timeIntervalSince1970
        let quietStart = ((now + 7200) / 60).rounded(.down) * 60
        let minute = Int(quietStart / 60) % 1440
        let quietHours = QuietHours(
            start: LocalTime(hour: minute / 60, minute: minute % 60),
            end: LocalTime(hour: (minute + 60) % 1440 / 60, minute: minute % 60))
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, 1...20, timezone: "'UTC'")
                try await Self.seed(client, 21...40, timezone: "'Etc/GMT+5'")
                var campaign = Support.campaign(
                    sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, d.timezone FROM bugle.devices d")
                campaign.delivery.localTime = LocalTimeDelivery(quietHours: quietHours, quietHoursAction: action)
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let progress = RunProgressBoard()
                let (runID, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers, progress: progress) {
                    $0.wallClock = { quietStart + 60 }
                    $0.leaveWhenIdle = .seconds(30)
                }
                let sent = Set(environment.apns.accepted().map(\.token) + environment.fcm.accepted().compactMap(\.token))
                let expected = try await client.query("SELECT token FROM bugle.devices WHERE id > 20", logger: Support.logger)
                var outside = Set<String>()
                for try await (token,) in expected.decode((String,).self) { outside.insert(token) }
                #expect(sent == outside, "\(sent.count) sent; the 20 devices outside their quiet hours expected")

                let rows = try await client.query(
                    """
                    SELECT state, outcome_code, attempts::int8, extract(epoch FROM next_attempt_at - now())::float8
                      FROM bugle.run_recipients WHERE run_id = \(runID) AND device_id <= 20
                    """,
                    logger: Support.logger)
                var covered: [(String, String?, Int64, Double?)] = []
                for try await row in rows.decode((String, String?, Int64, Double?).self) { covered.append(row) }
                #expect(covered.count == 20)
                switch action {
                case .hold:
                    guard case .scheduled = result.ending else {
                        Issue.record("expected the run left scheduled until the quiet hours end, got \(result.ending)")
                        return
                    }
                    // The progress display says until when nothing is due: the end of the quiet hours.
                    let until = progress.snapshot.waitingUntil ?? 0
                    #expect(abs(until - (quietStart + 3600)) < 60, "waiting until \(until - quietStart) s after they began")
                    // Due when their quiet hours end: 59 minutes after the runner's clock.
                    for (state, code, attempts, due) in covered {
                        #expect(state == "retry_wait" && code == "quiet_hours" && attempts == 0, "\(state) \(code ?? "") \(attempts)")
                        #expect((3_480...3_541).contains(due ?? 0), "due in \(due ?? 0) s")
                    }
                case .skip:
                    #expect(result.ending == .completed, "\(result.ending)")
                    // The progress display counts them finished (it read 20 of 40 at the end).
                    #expect(progress.snapshot.platforms.values.map(\.skipped).reduce(0, +) == 20)
                    #expect(progress.snapshot.finished == 40)
                    for (state, code, attempts, _) in covered {
                        #expect(state == "skipped_quiet_hours" && code == "quiet_hours" && attempts == 0, "\(state) \(code ?? "") \(attempts)")
                    }
                }
            }
        }
    }
    /// A device held by quiet hours into another dedupe period kept the period it was planned in: held from late
    /// evening to the next morning (UTC), its user was deduped under the day before, so the next day's campaign of the
    /// type notified them a second time that day. The audience is read today outside every device's quiet hours; the
    /// runner's clock is a day ahead, inside the UTC devices' quiet hours, so the hold ends on a later day.
    @Test("a device held by quiet hours into the next dedupe period is deduped in the period it is sent in")
    func quietHoursHoldMovesTheDedupePeriod() async throws {
        let now = Date().timeIntervalSince1970
        let quietStart = ((now + 86_400 + 7200) / 60).rounded(.down) * 60
        let minute = Int(quietStart / 60) % 1440
        let quietHours = QuietHours(
            start: LocalTime(hour: minute / 60, minute: minute % 60),
            end: LocalTime(hour: (minute + 60) % 1440 / 60, minute: minute % 60))
        let heldPeriod = try #require(PeriodKey.key(for: .daily, at: Date(timeIntervalSince1970: quietStart + 3600)))
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, 1...10, timezone: "'UTC'")
                try await Self.seed(client, 11...20, timezone: "'Etc/GMT+5'")
                var campaign = Support.campaign(
                    sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, d.timezone FROM bugle.devices d")
                campaign.dedupe = .daily
                campaign.delivery.localTime = LocalTimeDelivery(quietHours: quietHours, quietHoursAction: .hold)
                let plannedPeriod = try #require(PeriodKey.key(for: campaign, now: Date()))
                #expect(plannedPeriod != heldPeriod)
                // Another campaign of the type already notified u1 in the period the hold ends in.
                _ = try await client.query(
                    "INSERT INTO bugle.notification_log (user_id, notification_type, period_key, run_id, status) VALUES ('u1', 'promo', \(heldPeriod), 999999, 'sent')",
                    logger: Support.logger
                ).collect()
                var lanes = try environment.lanes(for: campaign)
                let (runID, first) = try await Support.runCampaign(client, campaign, providers: lanes.providers, periodKey: plannedPeriod) {
                    $0.wallClock = { quietStart + 60 }
                    $0.leaveWhenIdle = .seconds(30)
                }
                await lanes.shutdown()
                guard case .scheduled = first.ending else {
                    Issue.record("expected the run left until the quiet hours end, got \(first.ending)")
                    return
                }
                let held = try await client.query(
                    "SELECT device_id, period_key FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'retry_wait' ORDER BY device_id",
                    logger: Support.logger)
                var periods: [Int64: String?] = [:]
                for try await (id, key) in held.decode((Int64, String?).self) { periods[id] = key }
                #expect(periods == Dictionary(uniqueKeysWithValues: (1...10).map { (Int64($0), Optional(heldPeriod)) }))
                let flagged = try await Support.scalar(client, "SELECT recipient_periods FROM bugle.runs WHERE id = \(runID)", as: Bool.self)
                #expect(flagged == true)

                // The quiet hours end: the held devices are claimed again, in the period they are sent in.
                _ = try await client.query(
                    "UPDATE bugle.run_recipients SET next_attempt_at = now() WHERE run_id = \(runID) AND state = 'retry_wait'",
                    logger: Support.logger
                ).collect()
                _ = try await client.query("UPDATE bugle.runs SET status = 'ready' WHERE id = \(runID)", logger: Support.logger).collect()
                lanes = try environment.lanes(for: campaign)
                var tuning = CampaignRunner.Configuration()
                tuning.leaseTTLSeconds = 120
                tuning.wallClock = { quietStart + 3660 }
                let second = try await CampaignRunner(
                    campaign: campaign, runID: runID, store: PostgresCampaignStore(client: client, logger: Support.logger),
                    providers: lanes.providers, control: RunControl(), configuration: tuning, logger: Support.logger
                ).run(owner: "test-again-\(runID)")
                await lanes.shutdown()
                #expect(second.ending == .completed, "\(second.ending)")
                let u1 = try await Support.scalar(
                    client, "SELECT state || '/' || outcome_code FROM bugle.run_recipients WHERE run_id = \(runID) AND device_id = 1", as: String.self)
                #expect(u1 == "skipped_dedup/already_notified", "u1 was notified in that period by the other campaign")
                let log = try await client.query(
                    "SELECT period_key, status, count(*)::int8 FROM bugle.notification_log WHERE run_id = \(runID) GROUP BY 1, 2 ORDER BY 1, 2",
                    logger: Support.logger)
                var rows: [String] = []
                for try await (key, status, count) in log.decode((String, String, Int64).self) { rows.append("\(key) \(status) \(count)") }
                // u2…u10 are sent in the period the hold ended in; u11…u20 (never held) in the planned one; the planned
                // day's reservations of the held users were released when the run ended.
                #expect(rows == ["\(plannedPeriod) sent 10", "\(heldPeriod) sent 9"], "\(rows)")
            }
        }
    }
}
