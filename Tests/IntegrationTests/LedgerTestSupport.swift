import BugleCore
import BugleRunner
import BugleStore
import BugleTesting
import Logging
import PostgresNIO

/// Helpers shared by the segment, ledger and runner integration tests.
enum LedgerTestSupport {
    static var logger: Logger { TestDatabase.logger }

    /// A fresh migrated database and a connected client for the duration of `body`.
    static func withFreshDatabase<R: Sendable>(_ body: (PostgresClient) async throws -> R) async throws -> R {
        let configuration = try await TestDatabase.fresh()
        return try await Database.withClient(configuration, logger: logger, body)
    }

    /// md5 of every row of every table in schema `bugle`, to prove a statement changed nothing.
    static func checksum(_ client: PostgresClient) async throws -> [String: String] {
        let tables = try await client.query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'bugle' ORDER BY 1",
            logger: logger
        )
        var names: [String] = []
        for try await (name,) in tables.decode((String,).self) { names.append(name) }
        var sums: [String: String] = [:]
        for name in names {
            let rows = try await client.query(
                PostgresQuery(unsafeSQL: "SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM bugle.\"\(name)\" t"),
                logger: logger
            )
            for try await (sum,) in rows.decode((String,).self) { sums[name] = sum }
        }
        return sums
    }

    /// Runs a single-value query.
    static func scalar<T: PostgresDecodable & Sendable>(_ client: PostgresClient, _ query: PostgresQuery, as: T.Type = T.self) async throws -> T? {
        // Watched: after a test ends sessions, postgres-nio's pool may hand out a closed connection, and its own
        // `query` would never be answered there.
        let rows = try await client.answeredQuery(query, logger: logger)
        for try await (value,) in rows.decode((T,).self) { return value }
        return nil
    }

    /// A campaign over `bugle.devices` with the given SQL.
    static func campaign(
        name: String = "test-campaign",
        sql: String = "SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d WHERE d.is_active",
        pageSize: Int = 1000,
        dedupe: DedupePeriod = .none,
        window: Int = 200,
        policy: AmbiguousPolicy = .drop,
        maxAttempts: Int = 5
    ) -> Campaign {
        Campaign(
            name: name,
            notificationType: "promo",
            dedupe: dedupe,
            segment: Segment(sql: sql, pageSize: pageSize),
            message: MessageTemplate(
                defaultLocale: "en",
                locales: ["en": LocalizedCopy(title: "Hello", body: "World"), "de": LocalizedCopy(title: "Hallo", body: "Welt")],
                data: ["deeplink": "app://x"],
                apns: APNsOptions(collapseID: "c1")
            ),
            delivery: DeliveryOptions(ambiguousPolicy: policy, inFlightWindow: window, maxAttempts: maxAttempts)
        )
    }

    /// Inserts devices `1...count` with hex iOS tokens (odd ids) and FCM tokens (even ids); `prefix(i)` may
    /// override a token's prefix to script the fake provider.
    static func seed(_ client: PostgresClient, count: Int, deadEvery: Int = 0) async throws {
        _ = try await client.query(
            """
            INSERT INTO bugle.devices (id, user_id, token, platform, locale)
            SELECT i, 'u' || i,
                   CASE WHEN i % 2 = 1
                        THEN (CASE WHEN \(deadEvery) > 0 AND i % \(deadEvery) = 0 THEN 'dead' ELSE 'abcd' END) || md5(i::text) || md5((i + 1)::text)
                        ELSE (CASE WHEN \(deadEvery) > 0 AND i % \(deadEvery) = 0 THEN 'dead' ELSE 'fcm' END) || '-' || md5(i::text)
                   END,
                   CASE WHEN i % 2 = 1 THEN 'ios' ELSE 'android' END,
                   CASE WHEN i % 3 = 0 THEN 'de-AT' ELSE 'en' END
              FROM generate_series(1, \(count)) i
            """,
            logger: logger
        ).collect()
    }

    /// Creates and materializes a run of `campaign`; returns its id and the ledger to drive it with.
    static func materializedRun(_ client: PostgresClient, _ campaign: Campaign, periodKey: String? = nil) async throws -> (Int64, PostgresCampaignStore) {
        let runID = try await RunRepository(client: client, logger: logger).createRun(campaign: campaign, yaml: "x", periodKey: periodKey)
        let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: logger)
        _ = try await Materializer(client: client, logger: logger).materialize(runID: runID, campaign: campaign, reader: reader)
        return (runID, PostgresCampaignStore(client: client, logger: logger))
    }

    /// Creates, materializes and runs a campaign through `providers`; returns the run id and how it ended.
    static func runCampaign(
        _ client: PostgresClient,
        _ campaign: Campaign,
        providers: [ProviderKind: any PushProvider],
        periodKey: String? = nil,
        runnerLogger: Logger? = nil,
        progress: RunProgressBoard? = nil,
        tuning adjust: (inout CampaignRunner.Configuration) -> Void = { _ in }
    ) async throws -> (Int64, RunResult) {
        let runID = try await RunRepository(client: client, logger: logger).createRun(campaign: campaign, yaml: "name: test", periodKey: periodKey)
        let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: logger)
        _ = try await Materializer(client: client, logger: logger).materialize(runID: runID, campaign: campaign, reader: reader)
        // These runs have no other worker to hand over to, so a long lease costs nothing; with the default 30 s, one
        // renewal starved past its TTL/3 by the parallel phase (47 suites on 2 cores) self-fences a healthy run.
        // Lease timing is tested where it is the subject (RunLedgerTests, the crash suite's 3 s leases).
        var tuning = CampaignRunner.Configuration()
        tuning.leaseTTLSeconds = 120
        tuning.describeError = StoreError.safeDescription(of:)
        adjust(&tuning)
        let runner = CampaignRunner(
            campaign: campaign, runID: runID, store: PostgresCampaignStore(client: client, logger: logger),
            providers: providers, control: RunControl(), progress: progress, configuration: tuning, logger: runnerLogger ?? logger
        )
        return (runID, try await runner.run(owner: "test-\(runID)"))
    }
}
