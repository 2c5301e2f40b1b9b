import BugleCore
import BugleLegacyAPNs
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Testing

/// Whole legacy iOS campaigns: real PostgreSQL ledger → runner → legacy lane over TLS with a client
/// certificate → in-process legacy simulator.
/// A timing suite (``TimingPhase``): the legacy gateway never confirms success, so delivery is decided by a
/// quiet period that a starved scheduler can outlast.
@Suite("Legacy APNs campaigns end to end (PostgreSQL + legacy simulator over TLS)", .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct LegacyAPNsCampaignTests {
    typealias Support = LedgerTestSupport
    typealias Environment = LegacyTestEnvironment

    /// A campaign routed to the legacy lane.
    static func legacyCampaign(name: String = "legacy", window: Int, policy: AmbiguousPolicy = .drop) -> Campaign {
        var campaign = Support.campaign(name: name, pageSize: 5000, window: window, policy: policy)
        campaign.iosTransport = .legacy
        return campaign
    }

    /// Seeds `count` iOS devices; when `invalidEvery` > 0, every such id gets a `bad0` token (status 8).
    static func seedIOS(_ client: PostgresClient, count: Int, invalidEvery: Int = 0, deadEvery: Int = 0) async throws {
        _ = try await client.query(
            """
            INSERT INTO bugle.devices (id, user_id, token, platform, locale, registered_at)
            SELECT i, 'u' || i,
                   CASE WHEN \(invalidEvery) > 0 AND i % \(invalidEvery) = 0 THEN 'bad0' || lpad(to_hex(i), 60, '0')
                        WHEN \(deadEvery) > 0 AND i % \(deadEvery) = 0 THEN 'dead' || lpad(to_hex(i), 60, '0')
                        ELSE lpad(to_hex(i), 64, '0') END,
                   'ios', CASE WHEN i % 2 = 0 THEN 'de' ELSE 'en' END, now() - interval '1 day'
              FROM generate_series(1, \(count)) i
            """,
            logger: Support.logger
        ).collect()
    }

    static func count(_ client: PostgresClient, _ query: PostgresQuery) async throws -> Int64 {
        try await Support.scalar(client, query, as: Int64.self) ?? -1
    }

    @Test("20,000 iOS devices, 2% invalid tokens spread through: every valid token accepted exactly once, every invalid one deactivated")
    func twentyThousand() async throws {
        try await Environment.withLane(connections: 2, quietPeriod: 1.0) { _, simulator, lane in
            try await Support.withFreshDatabase { client in
                try await Self.seedIOS(client, count: 20_000, invalidEvery: 50)
                let (runID, result) = try await Support.runCampaign(client, Self.legacyCampaign(window: 1000), providers: [.legacyAPNs: lane])
                #expect(result.ending == .completed)

                let records = simulator.accepted()
                var seen: [String: Int] = [:]
                for record in records { seen[record.token, default: 0] += 1 }
                #expect(records.count == 19_600)
                #expect(seen.count == 19_600)
                #expect(seen.values.allSatisfy { $0 == 1 })
                #expect(seen.keys.allSatisfy { !$0.hasPrefix("bad0") })
                #expect(records.allSatisfy { $0.command == 2 && $0.priority == 10 })

                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND deactivation_reason = 'InvalidToken' AND token LIKE 'bad0%'") == 400)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.devices WHERE is_active AND token LIKE 'bad0%'") == 0)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND token NOT LIKE 'bad0%'") == 0)

                let summary = try await RunRepository(client: client, logger: Support.logger).summary(runID: runID)
                #expect(summary.filter { $0.status == "sent" }.map(\.count).reduce(0, +) == 19_600)
                #expect(summary.filter { $0.status == "invalid_token" }.map(\.count).reduce(0, +) == 400)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND provider = 'apns_legacy'") == 20_000)

                let statistics = lane.statistics()
                #expect((statistics.errorResponses["InvalidToken"] ?? 0) >= 400)
                #expect(statistics.resent > 0)
                #expect(statistics.ambiguous == 0)
                #expect((simulator.counters().rejectedByStatus[8] ?? 0) >= 400)
            }
        }
    }

    @Test("status 10 (shutdown) mid-run: reconnected, resent after the last good identifier; 6,000 tokens accepted exactly once")
    func shutdownRecovered() async throws {
        try await Environment.withLane(configure: { $0.faults = .init(shutdownEvery: 1_500) }, quietPeriod: 1.0) { _, simulator, lane in
            try await Support.withFreshDatabase { client in
                try await Self.seedIOS(client, count: 6_000)
                // resend: an ambiguous outcome would be sent again and show up as a duplicate in the simulator.
                let (runID, result) = try await Support.runCampaign(client, Self.legacyCampaign(window: 600, policy: .resend), providers: [.legacyAPNs: lane])
                #expect(result.ending == .completed)
                #expect(simulator.counters().shutdownsSent == 4)
                #expect((lane.statistics().errorResponses["Shutdown"] ?? 0) == 4)
                let records = simulator.accepted()
                #expect(records.count == 6_000)
                #expect(Set(records.map(\.token)).count == 6_000)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'") == 6_000)
            }
        }
    }

    /// Connects that fail used to hand the queued notifications back as provider retries, which an open lane charges
    /// to the recipient: with the gateway down for 20 s, 34–41 of 50 recipients ended `attempts_exhausted:connect_failed`
    /// and a resume never sent them.
    @Test("a gateway that cannot be reached: the run halts on the outage limit, every recipient waits unsent with no attempt charged")
    func unreachableGateway() async throws {
        let closed = try freeLoopbackPort()
        try await Environment.withLane(settings: { $0.port = closed }) { _, simulator, lane in
            try await Support.withFreshDatabase { client in
                try await Self.seedIOS(client, count: 50)
                let (runID, result) = try await Support.runCampaign(client, Self.legacyCampaign(window: 50), providers: [.legacyAPNs: lane]) {
                    $0.providerOutageLimit = .seconds(20)
                }
                guard case .halted(let code, _) = result.ending else {
                    Issue.record("expected a halt, got \(result.ending)")
                    return
                }
                #expect(code == "ProviderUnavailable", "\(code)")
                #expect(simulator.accepted().isEmpty)
                let waiting = try await Self.count(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state IN ('retry_wait', 'pending')")
                #expect(waiting == 50)
                #expect(try await Self.count(client, "SELECT coalesce(sum(attempts), 0)::bigint FROM bugle.run_recipients WHERE run_id = \(runID)") == 0)
                #expect(try await Self.count(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND outcome_code = 'connect_failed'") > 0)
            }
        }
    }

    @Test("feedback tuples deactivate tokens registered before the reported time; a token registered again later stays active")
    func feedbackRespectsReregistration() async throws {
        try await Environment.withLane { _, simulator, lane in
            try await Support.withFreshDatabase { client in
                try await Self.seedIOS(client, count: 10)
                let now = Date().timeIntervalSince1970
                // Device 1: registered 1 day ago, gone 1 hour ago → deactivated.
                // Device 2: gone 1 hour ago, but registered again now (after the report) → stays active.
                // Device 3: already inactive; device 99: unknown token.
                let store = DeviceStore(client: client, logger: Support.logger)
                try await store.register(userID: "u2", token: Environment.liveToken(2), platform: .ios)
                try await store.unregister(token: Environment.liveToken(3), platform: .ios)
                for index in [1, 2, 3, 99] {
                    simulator.queueFeedback(token: Environment.liveToken(index), time: UInt32(now - 3600))
                }
                // Reported twice: the later time wins (still after the registration a day ago).
                simulator.queueFeedback(token: Environment.liveToken(1).uppercased(), time: UInt32(now - 7200))

                let tuples = try await lane.fetchFeedback()
                #expect(tuples.count == 5)
                let result = try await store.deactivate(
                    uninstalled: tuples.map { DeviceStore.Uninstalled(token: $0.tokenHex, since: Date(timeIntervalSince1970: $0.since.secondsSince1970)) },
                    platform: .ios, reason: "feedback"
                )
                #expect(result == DeviceStore.UninstalledResult(deactivated: 1, keptReregistered: 1, notActive: 2))
                let states = try await client.query("SELECT id, is_active, coalesce(deactivation_reason, '') FROM bugle.devices WHERE id <= 3 ORDER BY id", logger: Support.logger)
                var rows: [(Int64, Bool, String)] = []
                for try await row in states.decode((Int64, Bool, String).self) { rows.append(row) }
                #expect(rows.map(\.1) == [false, true, false])
                #expect(rows.map(\.2) == ["feedback", "", "unregistered"])
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active") == 2)
                // Read once: the service's list is now empty.
                #expect(try await lane.fetchFeedback().isEmpty)
            }
        }
    }

    @Test("a legacy campaign's dead tokens are accepted, then reported by the feedback service and deactivated")
    func deadTokensThroughFeedback() async throws {
        try await Environment.withLane { _, simulator, lane in
            try await Support.withFreshDatabase { client in
                try await Self.seedIOS(client, count: 1_000, deadEvery: 100)
                let (runID, result) = try await Support.runCampaign(client, Self.legacyCampaign(window: 200), providers: [.legacyAPNs: lane])
                #expect(result.ending == .completed)
                #expect(simulator.accepted().count == 1_000)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'") == 1_000)
                let tuples = try await lane.fetchFeedback()
                #expect(tuples.count == 10)
                let applied = try await DeviceStore(client: client, logger: Support.logger).deactivate(
                    uninstalled: tuples.map { DeviceStore.Uninstalled(token: $0.tokenHex, since: Date(timeIntervalSince1970: $0.since.secondsSince1970)) },
                    platform: .ios, reason: "feedback"
                )
                #expect(applied.deactivated == 10)
                #expect(try await Self.count(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active AND token LIKE 'dead%' AND deactivation_reason = 'feedback'") == 10)
            }
        }
    }

    @Test("CLI: `bugle run` with ios_transport: legacy sends through the legacy lane and polls feedback at the end; `bugle feedback` reads an empty list")
    func cli() async throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        let simulator = LegacyAPNsSimulator(configuration: environment.simulatorConfiguration())
        let ports = try await simulator.start()
        do {
            try environment.material.writeLegacyProvidersFile(gatewayPort: ports.gateway, feedbackPort: ports.feedback, quietPeriod: 1.0)
            let configuration = try await TestDatabase.fresh()
            let url = try CLITests.url(configuration)
            try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
                try await Self.seedIOS(client, count: 300, invalidEvery: 100, deadEvery: 30)
            }
            let campaign = try Self.legacyCampaign(name: "legacy-cli", filter: "d.is_active")
            let csv = TestScratch.root + "bugle-legacy-\(UUID().uuidString).csv"
            defer { try? FileManager.default.removeItem(atPath: csv) }
            let run = try await CLITests.bugle(
                ["run", campaign, "--providers", environment.material.legacyProvidersFile, "--csv", csv],
                environment: ["BUGLE_DATABASE_URL": url]
            )
            #expect(run.status == 0, "\(run.stderr)")
            // 300 devices: ids 100, 200, 300 are bad0 (status 8); the other 9 multiples of 30 are dead (accepted,
            // then reported by the feedback service).
            #expect(run.stdout.contains("feedback: 9 tuple(s); 9 device(s) deactivated"), "\(run.stdout)")
            #expect(simulator.accepted().count == 297)
            let inactive = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
                try await Self.count(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active")
            }
            #expect(inactive == 12)
            let feedback = try await CLITests.bugle(["feedback", "--providers", environment.material.legacyProvidersFile], environment: ["BUGLE_DATABASE_URL": url])
            #expect(feedback.status == 0, "\(feedback.stderr)")
            #expect(feedback.stdout.contains("feedback: 0 tuple(s)"))
            let missing = try await CLITests.bugle(["feedback", "--providers", environment.material.providersFile], environment: ["BUGLE_DATABASE_URL": url])
            #expect(missing.status == 1)
            // A section switched off is not read (reading empties the service's list): exit 1, no connection.
            let connections = simulator.counters().feedbackConnections
            let disabledFile = environment.directory + "/providers-legacy-off.yaml"
            let text = try String(contentsOfFile: environment.material.legacyProvidersFile, encoding: .utf8)
            try text.replacingOccurrences(of: "enabled: true", with: "enabled: false").write(toFile: disabledFile, atomically: true, encoding: .utf8)
            let disabled = try await CLITests.bugle(["feedback", "--providers", disabledFile], environment: ["BUGLE_DATABASE_URL": url])
            #expect(disabled.status == 1 && disabled.stderr.contains("switched off (enabled: false)"), "\(disabled.stderr)")
            #expect(simulator.counters().feedbackConnections == connections)
        } catch {
            try await simulator.stop()
            throw error
        }
        try await simulator.stop()
    }
}

extension LegacyAPNsCampaignTests {
    /// A campaign file sending the devices `filter` selects through the legacy lane.
    static func legacyCampaign(name: String, filter: String) throws -> String {
        try CLITests.temporaryFile(
            "\(name).yaml",
            """
            name: \(name)
            notification_type: promo
            ios_transport: legacy
            segment:
              sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE \(filter)
            message:
              default_locale: en
              locales:
                en: { title: "Hello", body: "World" }
            """
        )
    }
}
