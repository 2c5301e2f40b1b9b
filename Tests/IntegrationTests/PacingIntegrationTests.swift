import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Testing

/// Per-lane pacing measured from the simulators' own records: real PostgreSQL ledger → runner → paced lanes
/// over TLS + HTTP/2 → in-process APNs and FCM simulators.
/// A timing suite (``TimingPhase``): per-second rates measured at simulators that share two cores with the rest
/// of the suite say more about the scheduler than about Bugle.
@Suite("Pacing across lanes (PostgreSQL + both simulators)", .serialized, .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct PacingIntegrationTests {
    typealias Support = LedgerTestSupport

    /// `ios` iOS devices then `android` Android devices, all live.
    static func seed(_ client: PostgresClient, ios: Int, android: Int) async throws {
        _ = try await client.query(
            """
            INSERT INTO bugle.devices (id, user_id, token, platform, locale)
            SELECT i, 'u' || i,
                   CASE WHEN i <= \(ios) THEN lpad(to_hex(i), 64, '0') ELSE 'live-' || md5(i::text) END,
                   CASE WHEN i <= \(ios) THEN 'ios' ELSE 'android' END, 'en'
              FROM generate_series(1, \(ios + android)) i
            """,
            logger: Support.logger
        ).collect()
    }

    /// `count` live iOS devices; every `every`th token starts with the simulator's scripted `prefix` (APNsTokenScript).
    static func seedIOS(_ client: PostgresClient, count: Int, scripted prefix: String, every: Int) async throws {
        _ = try await client.query(
            """
            INSERT INTO bugle.devices (id, user_id, token, platform, locale)
            SELECT i, 'u' || i, CASE WHEN i % \(every) = 0 THEN \(prefix) || lpad(to_hex(i), 60, '0') ELSE lpad(to_hex(i), 64, '0') END,
                   'ios', 'en'
              FROM generate_series(1, \(count)) i
            """,
            logger: Support.logger
        ).collect()
    }

    /// Counts per whole second since the first event, leaving out the first and last (partial) seconds.
    static func fullSeconds(_ times: [Double]) -> [Int] {
        guard let first = times.min(), let last = times.max(), last - first >= 3 else { return [] }
        var counts = [Int](repeating: 0, count: Int(last - first) + 1)
        for time in times { counts[Int(time - first)] += 1 }
        return Array(counts.dropFirst().dropLast())
    }

    @Test("APNs at 500/s and FCM at 300/s for 20 s: every second of each simulator's record is within 5% of its lane's limit")
    func twoLanesAtTheirLimits() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, ios: 10_000, android: 6_000)
                var campaign = Support.campaign(pageSize: 5000, window: 1500)
                campaign.delivery.rateLimits = [.apns: 500, .fcm: 300]
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let (_, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                #expect(result.ending == .completed)
                let apns = Self.fullSeconds(environment.apns.accepted().map(\.time))
                let fcm = Self.fullSeconds(environment.fcm.accepted().map(\.time))
                #expect(apns.count >= 17, "APNs ran \(apns.count + 2) s")
                #expect(fcm.count >= 17, "FCM ran \(fcm.count + 2) s")
                // Every whole second of each simulator's record sits within 5% of its lane's limit: the limiter never
                // overshoots, and neither lane starves the other.
                #expect(apns.allSatisfy { (475...525).contains($0) }, "APNs per second: \(apns)")
                #expect(fcm.allSatisfy { (285...315).contains($0) }, "FCM per second: \(fcm)")
            }
        }
    }

    /// RELIABILITY.md #24: APNs answers 429 `TooManyRequests` for one device token that got too much too fast. Only
    /// those recipients back off; the lane's rate does not change.
    @Test("429 TooManyRequests for 10% of the APNs tokens: only those recipients retry (then fail, attempts exhausted); the lane keeps 500/s")
    func perTokenTooManyRequests() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                // 6,000 iOS devices; every tenth token carries the simulator's 429 prefix.
                try await Self.seedIOS(client, count: 6_000, scripted: "4290", every: 10)
                var campaign = Support.campaign(pageSize: 5000, window: 1000)
                campaign.delivery.rateLimits = [.apns: 500]
                campaign.delivery.maxAttempts = 2
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let (runID, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                #expect(result.ending == .completed)
                let states = try await Support.scalar(
                    client,
                    """
                    SELECT array[count(*) FILTER (WHERE state = 'sent'),
                                 count(*) FILTER (WHERE state = 'failed_permanent' AND outcome_code = 'attempts_exhausted:TooManyRequests' AND attempts = 2)]::bigint[]
                      FROM bugle.run_recipients WHERE run_id = \(runID)
                    """,
                    as: [Int64].self
                )
                #expect(states == [5_400, 600])
                #expect(environment.apns.accepted().count == 5_400)
                // While the first pass runs, 500 requests a second of which about 90% are delivered (less while retries of the
                // 429s share the rate): 400–450 deliveries in
                // every whole second. A lane that took the 429s for throttling halved its rate within a second.
                let perSecond = Self.fullSeconds(environment.apns.accepted().map(\.time))
                let firstPass = perSecond.prefix(9)
                #expect(firstPass.count == 9, "APNs ran \(perSecond.count + 2) s")
                #expect(firstPass.allSatisfy { (380...480).contains($0) }, "APNs deliveries per second: \(perSecond)")
            }
        }
    }

    /// RELIABILITY.md #21: sporadic 5xx are retried with growing, full-jitter backoff and capped attempts. Ten tokens
    /// the simulator answers 500 `InternalServerError` every time: before, their answers charged nothing and were
    /// retried for ever, and the run never ended.
    @Test("tokens APNs answers 500 every time spend their attempts with growing, unsynchronised gaps and end attempts_exhausted; the run completes; everyone else once", arguments: [nil, 2_000.0])
    func persistentServerErrors(_ rate: Double?) async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                // 1,000 iOS devices; every 100th token carries the simulator's 500 prefix.
                try await Self.seedIOS(client, count: 1_000, scripted: "5000", every: 100)
                var campaign = Support.campaign(pageSize: 5000, window: 200)
                if let rate { campaign.delivery.rateLimits = [.apns: rate] }
                campaign.delivery.maxAttempts = 4
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let running = Task { try await Support.runCampaign(client, campaign, providers: lanes.providers) }
                // Before the fix this run never ended: fail instead of hanging the suite.
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(120))
                    running.cancel()
                }
                defer { watchdog.cancel() }
                let (runID, result) = try await running.value
                #expect(result.ending == .completed)
                let states = try await Support.scalar(
                    client,
                    """
                    SELECT array[count(*) FILTER (WHERE state = 'sent' AND attempts = 1),
                                 count(*) FILTER (WHERE state = 'failed_permanent' AND outcome_code = 'attempts_exhausted:InternalServerError'
                                                    AND attempts = 4 AND token LIKE '5000%')]::bigint[]
                      FROM bugle.run_recipients WHERE run_id = \(runID)
                    """,
                    as: [Int64].self
                )
                #expect(states == [990, 10])
                let accepted = environment.apns.accepted().map(\.token)
                #expect(accepted.count == 990)
                #expect(Set(accepted).count == 990)
                // Each failing token was refused at least four times (a refusal that made a storm at the end, when only
                // they were left, charged nothing and came again).
                let refusals = Dictionary(grouping: environment.apns.rejections().filter { $0.reason == "InternalServerError" }) { $0.token ?? "" }
                #expect(refusals.count == 10)
                #expect(refusals.values.allSatisfy { $0.count >= 4 }, "\(refusals.mapValues(\.count))")
                let gaps = refusals.values.map { answers -> [Double] in
                    let times = answers.map(\.time).sorted()
                    return zip(times, times.dropFirst()).map { $1 - $0 }
                }
                // Not synchronised: the first retry's gap differs from token to token (full jitter: a coefficient of
                // variation near 0.58; a fixed delay gives 0).
                let first = gaps.compactMap(\.first)
                let mean = first.reduce(0, +) / Double(first.count)
                let deviation = (first.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(first.count)).squareRoot()
                #expect(deviation / mean > 0.2, "first gaps \(first)")
                // Growing: the gap before the last attempt (up to 8 s) is longer on average than the first (up to 2 s).
                let last = gaps.compactMap(\.last)
                #expect(last.reduce(0, +) / Double(last.count) > mean, "first gaps \(first), last gaps \(last)")
            }
        }
    }

    @Test("a 503 with Retry-After: 5 on FCM pauses FCM for 5 s while APNs keeps its rate")
    func retryAfterPausesOnlyFCM() async throws {
        try await MixedTestEnvironment.with(fcm: {
            $0.faults = .init(unavailableRatio: 0.01, seed: 11)
            $0.retryAfter = .seconds(5)
        }) { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, ios: 4_000, android: 300)
                var campaign = Support.campaign(pageSize: 5000, window: 1000)
                campaign.delivery.rateLimits = [.apns: 400]
                let lanes = try environment.lanes(for: campaign, fcmConcurrency: 50)
                defer { Task { await lanes.shutdown() } }
                let (_, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                #expect(result.ending == .completed)
                #expect(environment.fcm.accepted().count == 300)
                let entries = environment.fcm.requestTimes().sorted { $0.time < $1.time }
                let first = try #require(entries.first { $0.status == 503 }, "no 503 was injected")
                #expect(first.retryAfter == 5)
                // FCM: within Retry-After, only what was in flight while the answer travelled back and was
                // processed (the lane's 50 slots, turning over at most once in that moment) — and after the first
                // second, nothing at all.
                let during = entries.filter { $0.time > first.time && $0.time < first.time + 4.95 }
                #expect(during.count <= 100, "\(during.count) FCM request(s) during the 5 s pause")
                let late = during.filter { $0.time > first.time + 1 }
                #expect(late.isEmpty, "\(late.count) FCM request(s) 1–5 s into the pause")
                // APNs: kept sending at its 400/s during those 5 s (when it had that much left to send).
                let apnsTimes = environment.apns.accepted().map(\.time)
                let apnsDuring = apnsTimes.filter { $0 > first.time + 0.5 && $0 < first.time + 4.5 }.count
                let apnsLeft = apnsTimes.filter { $0 > first.time + 0.5 }.count
                #expect(apnsDuring >= min(apnsLeft, 1_500), "APNs sent \(apnsDuring) in the 4 s of the FCM pause")
            }
        }
    }
}
