import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO

/// A mixed campaign of `devices` recipients (every 20th token dead) created and materialized on a PostgreSQL cluster
/// of the test's own, so that restarting it or changing its settings touches no other test, with both simulators and
/// paced lanes to them. For the crash suite's database-fault tests, which then drive runners against it.
struct OwnClusterCampaign: Sendable {
    let cluster: EmbeddedCluster
    let configuration: DatabaseConfiguration
    let environment: MixedTestEnvironment
    let campaign: Campaign
    let lanes: LanePacing.Lanes
    let runID: Int64
    let devices: Int
    let logger: Logger

    /// Live (not dead) devices: what every finished run must have delivered.
    var live: Int { devices - devices / 20 }

    /// Notifications both simulators have accepted so far.
    var delivered: Int { environment.apns.counters().accepted + environment.fcm.counters().accepted }

    /// Sets it up, runs `body`, and tears it down (also when `body` throws).
    static func with<R: Sendable>(
        name: String, devices: Int, window: Int, rate: Double, durability: EmbeddedCluster.Durability = .throwaway,
        _ body: (OwnClusterCampaign) async throws -> R
    ) async throws -> R {
        let directory = NSTemporaryDirectory() + "bugle-\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let cluster = EmbeddedCluster(directory: directory, port: 5432, durability: durability)
        defer {
            cluster.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: directory)
        }
        let logger = CrashFixture.logger
        _ = try await cluster.start(logger: TestDatabase.logger)
        let configuration = cluster.databaseConfiguration()
        let environment = try await MixedTestEnvironment.start()
        do {
            var campaign = LedgerTestSupport.campaign(
                name: name, sql: "SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices", window: window, policy: .resend)
            campaign.delivery.rateLimits = [.apns: rate, .fcm: rate]
            let runID = try await Database.withClient(configuration, logger: logger) { client in
                _ = try await Migrator(client: client, logger: logger).migrate()
                try await MixedTestEnvironment.seed(client, count: devices)
                return try await LedgerTestSupport.materializedRun(client, campaign).0
            }
            let lanes = try environment.lanes(for: campaign)
            let setUp = OwnClusterCampaign(
                cluster: cluster, configuration: configuration, environment: environment, campaign: campaign, lanes: lanes, runID: runID, devices: devices, logger: logger)
            let result: R
            do {
                result = try await body(setUp)
            } catch {
                await lanes.shutdown()
                throw error
            }
            await lanes.shutdown()
            try await environment.stop()
            return result
        } catch {
            // Stopping twice (after a failed stop above) is harmless; the first error is the one reported.
            try? await environment.stop()
            throw error
        }
    }

    /// Runner settings: a lease TTL (the runner's default when nil) and how long a ledger call may take.
    static func tuning(leaseTTLSeconds: Int? = nil, databaseDeadline: Duration) -> CampaignRunner.Configuration {
        var tuning = CampaignRunner.Configuration()
        if let leaseTTLSeconds { tuning.leaseTTLSeconds = leaseTTLSeconds }
        tuning.databaseDeadline = databaseDeadline
        return tuning
    }

    /// A runner of this run on `client`, with `control` and `tuning`.
    func runner(_ client: PostgresClient, control: RunControl = RunControl(), tuning: CampaignRunner.Configuration) -> CampaignRunner {
        CampaignRunner(
            campaign: campaign, runID: runID, store: PostgresCampaignStore(client: client, logger: logger), providers: lanes.providers,
            control: control, configuration: tuning, logger: logger)
    }

    /// The run's recipients by state.
    func states() async throws -> [String: Int64] {
        try await Database.withClient(configuration, logger: logger) { client in
            let rows = try await client.query("SELECT state, count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) GROUP BY state", logger: logger)
            var states: [String: Int64] = [:]
            for try await (state, count) in rows.decode((String, Int64).self) { states[state] = count }
            return states
        }
    }

    /// What every finished run must show: the live recipients sent, the dead ones invalid.
    var finishedStates: [String: Int64] { ["sent": Int64(live), "invalid_token": Int64(devices / 20)] }

    /// How often each token was delivered, from both simulators' records.
    func deliveries() -> [String: Int] {
        Dictionary(environment.apns.accepted().map { ($0.token, 1) } + environment.fcm.accepted().map { ($0.target, 1) }, uniquingKeysWith: +)
    }

    /// Deliveries beyond the first of each token.
    func duplicates() -> Int {
        deliveries().values.reduce(0) { $0 + $1 - 1 }
    }

    /// Runs `statement`, then `pg_reload_conf()`, as the cluster's superuser in database `postgres`.
    func administer(_ statement: String) async throws {
        try await Database.withClient(configuration.with(database: "postgres"), logger: logger) { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
            _ = try await client.query("SELECT pg_reload_conf()", logger: logger).collect()
        }
    }
}
