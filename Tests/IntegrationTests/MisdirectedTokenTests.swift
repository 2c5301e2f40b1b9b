import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Testing

/// Tokens sent where they do not belong — the other APNs environment, or a `topic` naming another app of the team —
/// are answered as bad tokens for every device: the run must halt before it deactivates good tokens, and a lane's
/// health is judged by its own deliveries only. Real PostgreSQL ledger → runner → paced lanes over TLS + HTTP/2 → both
/// in-process simulators.
@Suite("Misdirected tokens: wrong environment or topic halts without deactivating (PostgreSQL + simulators over TLS/HTTP2)")
struct MisdirectedTokenTests {
    typealias Support = LedgerTestSupport

    /// `ios` iOS devices whose tokens start with `iosPrefix` (ids 1...ios) and `android` live Android devices after them.
    static func seed(_ client: PostgresClient, ios: Int, iosPrefix: String, android: Int) async throws {
        _ = try await client.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO bugle.devices (id, user_id, token, platform)
                    SELECT i, 'u' || i, '\(iosPrefix)' || lpad(to_hex(i), \(64 - iosPrefix.count), '0'), 'ios'
                      FROM generate_series(1, \(ios)) i
                    UNION ALL
                    SELECT i, 'u' || i, 'live-' || md5(i::text) || ':APA91b', 'android'
                      FROM generate_series(\(ios + 1), \(ios + android)) i
                    """),
            logger: Support.logger
        ).collect()
    }

    static func inactive(_ client: PostgresClient, platform: String) async throws -> Int64? {
        try await Support.scalar(
            client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND platform = \(platform)", as: Int64.self)
    }

    @Test("a mixed run whose iOS tokens are all of the other environment halts on BadDeviceToken although Android delivers first; no iOS token is deactivated")
    func otherLaneDoesNotConfirm() async throws {
        // APNs answers slowly, so FCM's deliveries come first: they used to confirm "the environment" for every lane.
        try await MixedTestEnvironment.with(apns: { $0.faults = .init(latency: .milliseconds(20)) }) { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, ios: 300, iosPrefix: "bad0", android: 300)
                let campaign = Support.campaign(window: 100)
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let (_, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                guard case .halted(let code, let message) = result.ending else {
                    Issue.record("expected a halt, got \(result.ending)")
                    return
                }
                #expect(code == "BadDeviceToken")
                #expect(message.contains("other APNs environment"), "\(message)")
                #expect(!environment.fcm.accepted().isEmpty, "FCM delivered nothing, so the case was not tested")
                #expect(try await Self.inactive(client, platform: "ios") == 0)
            }
        }
    }

    @Test("a topic naming another app of the team: every iOS token answered DeviceTokenNotForTopic halts the run with that code; nothing deactivated")
    func wrongTopicHalts() async throws {
        try await MixedTestEnvironment.with(apns: { $0.otherTopics = ["com.example.other"] }) { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, ios: 200, iosPrefix: "0a", android: 0)
                let campaign = Support.campaign(window: 100)
                let lanes = try environment.lanes(for: campaign) { $0.apns?.topic = "com.example.other" }
                defer { Task { await lanes.shutdown() } }
                let (runID, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                guard case .halted(let code, let message) = result.ending else {
                    Issue.record("expected a halt, got \(result.ending)")
                    return
                }
                #expect(code == "DeviceTokenNotForTopic")
                #expect(message.contains("not the app these device tokens were registered for"), "\(message)")
                #expect(environment.apns.accepted().isEmpty)
                #expect(try await Self.inactive(client, platform: "ios") == 0)
                let invalid = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'invalid_token'",
                    as: Int64.self)
                #expect(invalid == 0)
            }
        }
    }

    @Test("with the right topic, the few tokens answered DeviceTokenNotForTopic are deactivated once the lane has delivered")
    func notForTopicAfterDeliveriesDeactivates() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, ios: 100, iosPrefix: "0b", android: 0)
                // Ten of them the simulator answers DeviceTokenNotForTopic (its `4001` prefix).
                _ = try await client.query(
                    "UPDATE bugle.devices SET token = '4001' || substr(token, 5) WHERE id % 10 = 0", logger: Support.logger
                ).collect()
                let campaign = Support.campaign(window: 100)
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let (runID, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                #expect(result.ending == .completed, "\(result.ending)")
                #expect(environment.apns.accepted().count == 90)
                let deactivated = try await Support.scalar(
                    client,
                    "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND deactivation_reason = 'DeviceTokenNotForTopic' AND token LIKE '4001%'",
                    as: Int64.self)
                #expect(deactivated == 10)
                let invalid = try await Support.scalar(
                    client,
                    "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'invalid_token' AND outcome_code = 'DeviceTokenNotForTopic'",
                    as: Int64.self)
                #expect(invalid == 10)
            }
        }
    }

    /// The auditor's run: 200 Android devices answered SENDER_ID_MISMATCH (a service account of another Firebase
    /// project) were all deactivated, and the run said `completed`.
    @Test("a service account of another Firebase project: every Android token answered SENDER_ID_MISMATCH halts the run although iOS delivers; nothing deactivated")
    func otherFirebaseProjectHalts() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, ios: 200, iosPrefix: "0c", android: 0)
                _ = try await client.query(
                    """
                    INSERT INTO bugle.devices (id, user_id, token, platform)
                    SELECT i, 'u' || i, 'sndr-' || md5(i::text) || ':APA91b', 'android' FROM generate_series(201, 400) i
                    """,
                    logger: Support.logger
                ).collect()
                let campaign = Support.campaign(window: 100)
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let (runID, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                guard case .halted(let code, let message) = result.ending else {
                    Issue.record("expected a halt, got \(result.ending)")
                    return
                }
                #expect(code == "SENDER_ID_MISMATCH")
                #expect(message.contains("not the Firebase project these device tokens were registered with"), "\(message)")
                #expect(try await Self.inactive(client, platform: "android") == 0)
                let invalid = try await Support.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'invalid_token'",
                    as: Int64.self)
                #expect(invalid == 0)
            }
        }
    }

    @Test("with the right project, the few Android tokens answered SENDER_ID_MISMATCH are deactivated once the lane has delivered")
    func senderMismatchAfterDeliveriesDeactivates() async throws {
        try await MixedTestEnvironment.with { environment in
            try await Support.withFreshDatabase { client in
                try await Self.seed(client, ios: 0, iosPrefix: "0d", android: 100)
                _ = try await client.query(
                    "UPDATE bugle.devices SET token = 'sndr' || substr(token, 5) WHERE id % 10 = 0", logger: Support.logger
                ).collect()
                let campaign = Support.campaign(window: 100)
                let lanes = try environment.lanes(for: campaign)
                defer { Task { await lanes.shutdown() } }
                let (_, result) = try await Support.runCampaign(client, campaign, providers: lanes.providers)
                #expect(result.ending == .completed, "\(result.ending)")
                #expect(environment.fcm.accepted().count == 90)
                let deactivated = try await Support.scalar(
                    client,
                    "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND deactivation_reason = 'SENDER_ID_MISMATCH' AND token LIKE 'sndr%'",
                    as: Int64.self)
                #expect(deactivated == 10)
            }
        }
    }
}
