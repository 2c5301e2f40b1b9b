import BugleCore
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

@Suite("Migrator")
struct MigratorTests {
    private let logger = TestDatabase.logger

    /// Columns, constraints and indexes of schema `bugle`, as comparable text.
    static func schemaSnapshot(_ client: PostgresClient) async throws -> [String] {
        var lines: [String] = []
        let columns = try await client.query(
            """
            SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || \
            COALESCE(column_default, '') FROM information_schema.columns WHERE table_schema = 'bugle'
            ORDER BY table_name, ordinal_position
            """
        )
        for try await line in columns.decode(String.self) { lines.append(line) }
        let constraints = try await client.query(
            """
            SELECT conrelid::regclass::text || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
            WHERE connamespace = 'bugle'::regnamespace ORDER BY 1
            """
        )
        for try await line in constraints.decode(String.self) { lines.append(line) }
        let indexes = try await client.query("SELECT indexdef FROM pg_indexes WHERE schemaname = 'bugle' ORDER BY 1")
        for try await line in indexes.decode(String.self) { lines.append(line) }
        return lines
    }

    @Test func migratingTwiceAppliesNothingAndKeepsTheSchema() async throws {
        let configuration = try await TestDatabase.fresh()  // already migrated once
        try await Database.withClient(configuration, logger: self.logger) { client in
            let migrator = Migrator(client: client, logger: self.logger)
            let before = try await Self.schemaSnapshot(client)
            #expect(try await migrator.migrate() == [])
            #expect(try await Self.schemaSnapshot(client) == before)
            let status = try await migrator.status()
            #expect(status.map(\.version) == Migration.all.map(\.version))
            #expect(status.allSatisfy { $0.isApplied && $0.isKnown })

            let tables = try await client.query(
                "SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables WHERE table_schema = 'bugle'"
            )
            for try await names in tables.decode(String.self) {
                #expect(names == "copy_rotation,device_changes,devices,notification_log,run_overview,run_recipients,run_summary,run_variant_summary,run_workers,runs,schema_migrations,user_sends")
            }
            #expect(before.contains("CREATE UNIQUE INDEX devices_platform_token_key ON bugle.devices USING btree (platform, token)"))
            #expect(before.contains { $0.contains("run_recipients_lane_ready_idx") && $0.contains("WHERE (state = ANY") })
            // Version 5 dropped the run-wide ready index that the per-lane one supersedes.
            #expect(!before.contains { $0.contains("INDEX run_recipients_ready_idx") })
        }
    }

    @Test func concurrentMigrationsApplyEachVersionOnce() async throws {
        let server = try await TestDatabase.server()
        let name = "bugle_race_\(UInt32.random(in: 0...UInt32.max))"
        try await Database.createDatabase(named: name, using: server, logger: self.logger)
        let configuration = server.with(database: name)
        let logger = self.logger
        async let first = Database.withClient(configuration, logger: logger) { client in
            try await Migrator(client: client, logger: logger).migrate()
        }
        async let second = Database.withClient(configuration, logger: logger) { client in
            try await Migrator(client: client, logger: logger).migrate()
        }
        let results = try await [first, second]
        #expect(results.flatMap { $0 }.sorted() == Migration.all.map(\.version))
        try await Database.withClient(configuration, logger: logger) { client in
            let status = try await Migrator(client: client, logger: logger).status()
            #expect(status.count == Migration.all.count && status.allSatisfy(\.isApplied))
        }
    }

    /// A login whose sessions are read-only (as on a standby, or after `default_transaction_read_only` was set for the
    /// database) is refused before the schema is touched, with what to do; `bugle` exits 2 saying so at once.
    @Test("a read-only login: refused before any migration, naming why, for commands that write (exit 2); bugle runs still lists runs on it")
    func refusesAReadOnlyLogin() async throws {
        let configuration = try await TestDatabase.fresh()
        let database = try #require(configuration.database)
        try await Database.withClient(configuration, logger: logger) { client in
            try await client.query("ALTER DATABASE \(unescaped: "\"" + database + "\"") SET default_transaction_read_only = on", logger: logger)
        }
        do {
            try await Database.withClient(configuration, logger: logger) { client in
                _ = try await Migrator(client: client, logger: logger).migrate()
            }
            Issue.record("a read-only login was migrated")
        } catch let error as StoreError {
            #expect(error.code == .readOnlyServer, "\(error)")
            #expect(error.message.hasPrefix("this login's sessions are read-only (default_transaction_read_only is on"), "\(error)")
            #expect(error.message.hasSuffix("this command writes: point the database URL at the primary, or use a login that can write"))
        }
        let url = try CLITests.url(configuration)
        let prune = try await CLITests.bugle(["devices", "prune", "--not-seen-for", "90d"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(prune.status == 2, "\(prune.stderr)")
        #expect(prune.stderr.contains("read_only_server: this login's sessions are read-only"), "\(prune.stderr)")
        // Reading works on a replica whose schema is current (every migration applied by fresh()).
        let runs = try await CLITests.bugle(["runs"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(runs.status == 0, "\(runs.stderr)")
        // With a migration missing, even reading is refused, saying which.
        try await Database.withClient(configuration, logger: logger) { client in
            try await client.withConnection { connection in
                try await connection.query("SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", logger: logger)
                try await connection.query(
                    "DELETE FROM bugle.schema_migrations WHERE version = (SELECT max(version) FROM bugle.schema_migrations)", logger: logger)
            }
        }
        let behind = try await CLITests.bugle(["runs"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(behind.status == 2 && behind.stderr.contains("and the schema lacks 1 migration(s) from version"), "\(behind.stderr)")
    }

    @Test func refusesADatabaseNewerThanThisBuild() async throws {
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            try await client.query("INSERT INTO bugle.schema_migrations (version, name) VALUES (999, 'from_the_future')")
            let migrator = Migrator(client: client, logger: self.logger)
            await #expect(throws: StoreError.self) { try await migrator.migrate() }
            let status = try await migrator.status()
            #expect(status.last?.version == 999 && status.last?.isKnown == false)
        }
    }

    @Test func createsTheSegmentReaderRoleWhenPermitted() async throws {
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let rows = try await client.query(
                "SELECT rolsuper, current_setting('server_version_num')::int >= 140000 FROM pg_roles WHERE rolname = current_user"
            )
            var privileged = false
            for try await (isSuper, modern) in rows.decode((Bool, Bool).self) { privileged = isSuper && modern }
            let available = try await Migrator(client: client, logger: self.logger).segmentReaderRoleAvailable()
            #expect(available == privileged)
            guard available else { return }
            try await client.withTransaction(logger: self.logger) { connection in
                try await connection.query("SET LOCAL ROLE bugle_segment_reader", logger: self.logger)
                let count = try await connection.query("SELECT count(*) FROM bugle.devices", logger: self.logger)
                for try await value in count.decode(Int64.self) { #expect(value == 0) }
                await #expect(throws: (any Error).self) {
                    try await connection.query(
                        "INSERT INTO bugle.devices (user_id, token, platform) VALUES ('u', 't', 'web')",
                        logger: self.logger
                    )
                }
            }
        }
    }

    /// Roles are cluster-wide: Bugle processes on several databases of one cluster (or tests) granting the reader role
    /// its login at the same moment each update the same catalog row, and all but one used to fail with "tuple
    /// concurrently updated". On a cluster of its own, since it takes the login away between rounds.
    @Test("granting bugle_segment_reader its login from eight databases of one cluster at once: every call succeeds")
    func concurrentReaderLoginGrants() async throws {
        let directory = NSTemporaryDirectory() + "bugle-roles-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cluster = EmbeddedCluster(directory: directory, port: try freeLoopbackPort(), durability: .throwaway)
        defer { cluster.stopBlocking(mode: .immediate) }
        try await cluster.start(logger: self.logger)
        let admin = cluster.databaseConfiguration().with(database: "postgres")
        let databases = (1...8).map { "roles\($0)" }
        try await Database.withClient(admin, logger: self.logger) { client in
            for name in databases { try await client.query("CREATE DATABASE \(unescaped: name)") }
        }
        for name in databases {
            try await Database.withClient(admin.with(database: name), logger: self.logger) { client in
                _ = try await Migrator(client: client, logger: self.logger).migrate()
            }
        }
        for round in 1...5 {
            try await Database.withClient(admin, logger: self.logger) { client in
                try await client.query("ALTER ROLE bugle_segment_reader NOLOGIN")
            }
            let granted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for name in databases {
                    group.addTask {
                        try await Database.withClient(admin.with(database: name), logger: self.logger) { client in
                            try await Migrator(client: client, logger: self.logger).allowSegmentReaderLogin()
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(granted == Array(repeating: true, count: databases.count), "round \(round)")
        }
    }
}

/// Analysts read reports from a replica: `bugle report` on a database whose sessions are read-only writes the CSV from
/// the ledger and prints the summary stored when the run last wrote it, rebuilding nothing; a command that writes is
/// still refused there.
@Test("bugle report on a read-only database (as on a replica): the CSV and the stored summary, nothing written; a writing command refused")
func reportOnAReadOnlyDatabase() async throws {
    try await CrashFixture.with(devices: 200) { fixture in
        let run = try await fixture.bugle(["run", try fixture.campaign(policy: .resend, window: 100), "--quiet"])
        #expect(run.status == 0, "\(run.stderr)")
        let runID = try await fixture.latestRunID()
        let database = try #require(fixture.configuration.database)
        try await Database.withClient(fixture.configuration, logger: TestDatabase.logger) { client in
            try await client.query(
                "ALTER DATABASE \(unescaped: "\"" + database + "\"") SET default_transaction_read_only = on", logger: TestDatabase.logger)
        }
        let csv = try TestScratch.directory(prefix: "bugle-replica") + "/report.csv"
        let report = try await fixture.bugle(["report", "\(runID)", "--csv", csv])
        #expect(report.status == 0, "\(report.stderr)")
        #expect(report.stdout.contains("read-only database: the summary is the one stored when run \(runID) last wrote it"), "\(report.stdout)")
        let rows = ((try? String(contentsOfFile: csv, encoding: .utf8)) ?? "").split(whereSeparator: \.isNewline).count
        #expect(rows == 201, "\(rows) lines: a header and 200 recipients")
        #expect(report.stdout.contains("report: \(csv) (200 row(s))") && report.stdout.contains("sent                95 (delivered)"), "\(report.stdout)")
        let prune = try await fixture.bugle(["devices", "prune", "--not-seen-for", "90d"])
        #expect(prune.status == 2 && prune.stderr.contains("read_only_server"), "\(prune.stderr)")
    }
}
