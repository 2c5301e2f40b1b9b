import BugleCore
import BugleFCM
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Synchronization
import Testing

/// Whole campaigns through the FCM lane (and APNs beside it): real PostgreSQL ledger → runner → paced lanes
/// over TLS + HTTP/2 → in-process simulators, with OAuth2 tokens from the simulator's token endpoint.
/// A timing suite (``TimingPhase``): access tokens that live 2 s and a quota window of 1 s are timed against a CPU
/// that the parallel phase does not leave them.
@Suite("FCM campaigns end to end (PostgreSQL + simulators over TLS/HTTP2)", .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct FCMCampaignTests {
    typealias Support = LedgerTestSupport

    static func mixedCampaign(window: Int = 1000, rates: [ProviderKind: Double] = [:]) -> Campaign {
        var campaign = Support.campaign(pageSize: 5000, window: window)
        campaign.delivery.rateLimits = rates
        return campaign
    }

    static func run(_ client: PostgresClient, _ campaign: Campaign, lanes: LanePacing.Lanes) async throws -> (Int64, RunResult) {
        defer { Task { await lanes.shutdown() } }
        return try await Support.runCampaign(client, campaign, providers: lanes.providers)
    }

    static func liveTokens(_ client: PostgresClient, platform: String) async throws -> Set<String> {
        var tokens = Set<String>()
        let rows = try await client.query(
            "SELECT token FROM bugle.devices WHERE platform = \(platform) AND token NOT LIKE 'dead%'",
            logger: Support.logger
        )
        for try await (token,) in rows.decode((String,).self) { tokens.insert(token) }
        return tokens
    }

    /// Requests the FCM simulator saw in `(start, end)`.
    static func requests(_ entries: [FCMRequestEntry], after start: Double, before end: Double) -> [FCMRequestEntry] {
        entries.filter { $0.time > start && $0.time < end }
    }

    @Test("20,000 mixed devices, 5% UNREGISTERED, a 429 storm with Retry-After: every live token delivered once, nothing sent to FCM before Retry-After, dead tokens deactivated")
    func mixedTwentyThousand() async throws {
        try await MixedTestEnvironment.with(fcm: {
            $0.quotaPerMinute = 400
            $0.quotaWindow = .seconds(1)
        }) { environment in
            try await Support.withFreshDatabase { client in
                try await MixedTestEnvironment.seed(client, count: 20_000)
                let campaign = Self.mixedCampaign()
                let (runID, result) = try await Self.run(client, campaign, lanes: try environment.lanes(for: campaign, fcmConcurrency: 50))
                #expect(result.ending == .completed)

                // Exactly once per live token, per provider, from the simulators' own records.
                let apnsRecords = environment.apns.accepted()
                let fcmRecords = environment.fcm.accepted()
                #expect(apnsRecords.count == Set(apnsRecords.map(\.token)).count)
                #expect(fcmRecords.count == Set(fcmRecords.compactMap(\.token)).count)
                #expect(Set(apnsRecords.map(\.token)) == (try await Self.liveTokens(client, platform: "ios")))
                #expect(Set(fcmRecords.compactMap(\.token)) == (try await Self.liveTokens(client, platform: "android")))
                #expect(fcmRecords.count == 9_500)

                // The storm happened, and the lane respected every Retry-After.
                let entries = environment.fcm.requestTimes().sorted { $0.time < $1.time }
                let throttled = entries.filter { $0.status == 429 }
                #expect(!throttled.isEmpty)
                #expect(throttled.allSatisfy { ($0.retryAfter ?? 0) >= 1 })
                // After a 429 the only requests the simulator may still see before Retry-After has passed are those
                // already written while the answer travelled back and was processed: at most the lane's 50 slots, all
                // in the first moment. After that moment (a quarter of a second, hundreds of round trips on loopback),
                // none at all until Retry-After has elapsed.
                for answer in throttled {
                    let retryAfter = Double(answer.retryAfter ?? 0)
                    let inFlight = Self.requests(entries, after: answer.time, before: answer.time + 0.25)
                    let early = Self.requests(entries, after: answer.time + 0.25, before: answer.time + retryAfter - 0.05)
                    #expect(inFlight.count <= 50, "\(inFlight.count) requests right after a 429 (the lane has 50 slots)")
                    #expect(early.isEmpty, "\(early.count) requests within Retry-After \(retryAfter) s of a 429")
                    if inFlight.count > 50 || !early.isEmpty { break }
                }

                // 5% of each platform deactivated; nothing else.
                let inactive = try await Support.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self)
                let deadInactive = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND token LIKE 'dead%'", as: Int64.self)
                #expect(inactive == 1_000)
                #expect(deadInactive == 1_000)
                let unregistered = try await Support.scalar(
                    client,
                    "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'invalid_token' AND outcome_code = 'UNREGISTERED'",
                    as: Int64.self)
                #expect(unregistered == 500)
                // No recipient was charged an attempt for the provider's throttling.
                let charged = try await Support.scalar(
                    client, "SELECT max(attempts)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'", as: Int64.self)
                #expect(charged == 1)
            }
        }
    }

    @Test("ios_transport: fcm sends iOS devices through FCM with the campaign's apns override block; nothing reaches APNs")
    func iosThroughFCM() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                _ = try await client.query(
                    """
                    INSERT INTO bugle.devices (id, user_id, token, platform, locale)
                    SELECT i, 'u' || i, 'live-' || md5(i::text) || ':APA91b', CASE WHEN i % 2 = 0 THEN 'ios' ELSE 'android' END, 'en'
                      FROM generate_series(1, 400) i
                    """,
                    logger: Support.logger
                ).collect()
                var campaign = Self.mixedCampaign(window: 200)
                campaign.iosTransport = .fcm
                campaign.message.apns.collapseID = "sale-1"
                let (runID, result) = try await Self.run(client, campaign, lanes: try environment.lanes(for: campaign))
                #expect(result.ending == .completed)
                #expect(environment.apns.accepted().isEmpty)
                let records = environment.fcm.accepted()
                #expect(records.count == 400)
                #expect(Set(records.compactMap(\.token)).count == 400)
                // The simulator validated every apns block against ApnsConfig; the iOS half carried one, Android none.
                let viaAPNsBlock = records.filter { $0.apnsPushType != nil }
                #expect(viaAPNsBlock.count == 200)
                #expect(viaAPNsBlock.allSatisfy { $0.apnsPushType == "alert" && $0.apnsCollapseID == "sale-1" && $0.tag == nil })
                #expect(records.filter { $0.apnsPushType == nil }.allSatisfy { $0.tag != nil })
                let lanes = try await Support.scalar(
                    client, "SELECT count(DISTINCT provider)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND provider = 'fcm'", as: Int64.self)
                let notFCM = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND provider <> 'fcm'", as: Int64.self)
                #expect(lanes == 1)
                #expect(notFCM == 0)
            }
        }
    }

    /// Hands out an expired simulator token first, then valid ones; counts fetches.
    final class ExpiringFirst: FCMAccessTokenFetching {
        let material: SimulatorCertificates
        let fetches = Mutex(0)

        init(material: SimulatorCertificates) {
            self.material = material
        }

        func fetch() async throws(FCMAuthError) -> FCMAccessToken {
            let number = fetches.withLock { count -> Int in
                count += 1
                return count
            }
            if number == 1 {
                // Minted an hour ago for one minute: the simulator answers 401 UNAUTHENTICATED.
                return FCMAccessToken(value: material.fcmAccessToken(lifetime: .seconds(60), now: Date().addingTimeInterval(-3600)), lifetime: .seconds(3600))
            }
            return FCMAccessToken(value: material.fcmAccessToken(), lifetime: .seconds(3600))
        }
    }

    @Test("a token the server no longer accepts (401) is replaced once for all concurrent senders, and every message goes out")
    func refreshAfter401() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await MixedTestEnvironment.seed(client, count: 400, deadEvery: 1_000_000)
                let campaign = Self.mixedCampaign(window: 200)
                let fetcher = ExpiringFirst(material: environment.material)
                let (_, result) = try await Self.run(client, campaign, lanes: try environment.lanes(for: campaign, fcmTokens: fetcher))
                #expect(result.ending == .completed)
                #expect(environment.fcm.accepted().count == 200)
                #expect(environment.fcm.counters().unauthenticated >= 1)
                #expect(fetcher.fetches.withLock { $0 } == 2)
            }
        }
    }

    @Test("access tokens expiring every 2 s during a 5 s run are refreshed from the token endpoint without a failure")
    func accessTokenExpiryMidRun() async throws {
        try await MixedTestEnvironment.with(fcm: { $0.accessTokenLifetime = .seconds(2) }) { environment in
            try await Support.withFreshDatabase { client in
                try await MixedTestEnvironment.seed(client, count: 4_000, deadEvery: 1_000_000)
                let campaign = Self.mixedCampaign(window: 400, rates: [.fcm: 400])
                let (runID, result) = try await Self.run(client, campaign, lanes: try environment.lanes(for: campaign))
                #expect(result.ending == .completed)
                let records = environment.fcm.accepted()
                #expect(records.count == 2_000)
                #expect(Set(records.compactMap(\.token)).count == 2_000)
                #expect(environment.fcm.counters().tokenGrants >= 3)
                let notSent = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state <> 'sent'", as: Int64.self)
                #expect(notSent == 0)
                if notSent != 0 {
                    let rows = try await client.query(
                        "SELECT state, coalesce(outcome_code, ''), count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) GROUP BY 1, 2",
                        logger: Support.logger)
                    for try await (state, code, count) in rows.decode((String, String, Int64).self) {
                        Issue.record("\(state) \(code) \(count)")
                    }
                }
            }
        }
    }

    /// The auditor's run: a metadata server answering 500 for a minute failed all 300 Android recipients
    /// `attempts_exhausted:OAUTH_UNAVAILABLE` in about 55 s, and the run said `completed`: each failed fetch, at once,
    /// was charged as the recipient's retry.
    @Test("the token endpoint down for a while: the FCM lane waits it out, nobody charged or failed; every message goes out once it is back")
    func tokenEndpointOutage() async throws {
        try await MixedTestEnvironment.with(fcm: { $0.faults.tokenOutage = .seconds(3600) }) { environment in
            try await Support.withFreshDatabase { client in
                try await MixedTestEnvironment.seed(client, count: 400, deadEvery: 1_000_000)
                var campaign = Self.mixedCampaign(window: 100)
                // Three attempts: charged as before, every Android recipient had used them up by the third refusal.
                campaign.delivery.maxAttempts = 3
                let fcm = environment.fcm
                let refusals: @Sendable () -> Int = { fcm.counters().tokenErrors["temporarily_unavailable", default: 0] }
                let watcher = Task {
                    while refusals() < 6 { try await Task.sleep(for: .milliseconds(20)) }
                    fcm.endTokenOutage()
                }
                let (runID, result) = try await Self.run(client, campaign, lanes: try environment.lanes(for: campaign))
                watcher.cancel()
                #expect(result.ending == .completed)
                #expect(refusals() >= 6)
                let records = environment.fcm.accepted()
                #expect(records.count == 200)
                #expect(Set(records.compactMap(\.token)).count == 200)
                var notSent: [String] = []
                let rows = try await client.query(
                    "SELECT state || ' ' || coalesce(outcome_code, '') || ' ' || count(*) FROM bugle.run_recipients WHERE run_id = \(runID) AND state <> 'sent' GROUP BY state, outcome_code",
                    logger: Support.logger)
                for try await (line,) in rows.decode((String,).self) { notSent.append(line) }
                #expect(notSent.isEmpty, "\(notSent)")
                // The waits were the lane's: no Android recipient spent an attempt on them.
                let charged = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND platform = 'android' AND attempts > 1", as: Int64.self)
                #expect(charged == 0)
            }
        }
    }
}
