import Foundation
import Logging
import PostgresNIO

/// Applies Bugle's versioned schema migrations into schema `bugle`.
///
/// Each migration runs in its own transaction together with its row in `bugle.schema_migrations`, after taking
/// `pg_advisory_xact_lock`, so several processes migrating the same database at once apply each version exactly
/// once. Running ``migrate()`` again is a no-op.
///
/// After the versioned migrations, ``migrate()`` also tries to set up the NOLOGIN role `bugle_segment_reader`
/// (member of `pg_read_all_data`, granted to the current user) that the segment reader assumes with
/// `SET LOCAL ROLE`. That needs PostgreSQL 14 or later and a superuser or CREATEROLE login; when either is missing
/// it is skipped (logged at debug), ``segmentReaderRoleAvailable()`` reports `false`, and
/// ``segmentReaderRoleUnavailability()`` says why, for the warning of the commands that read a segment.
public struct Migrator: Sendable {
    /// The name of the role the segment reader switches to.
    public static let segmentReaderRole = "bugle_segment_reader"
    /// The advisory-lock key that serialises migrations (ASCII "bugle" + 1).
    static let lockKey: Int64 = 0x62_75_67_6c_65_01

    private let client: PostgresClient
    private let logger: Logger
    private let migrations: [Migration]

    /// Creates a migrator.
    /// - Parameters:
    ///   - client: A running client.
    ///   - logger: Receives one line per applied migration.
    ///   - migrations: The migrations to apply; ``Migration/all`` unless testing.
    public init(client: PostgresClient, logger: Logger, migrations: [Migration] = Migration.all) {
        self.client = client
        self.logger = logger
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Applies every pending migration, then (best effort) the segment-reader role.
    /// - Returns: The versions applied by this call, in order; empty when the schema was current.
    /// - Throws: ``StoreError`` with code `unknownMigration` when the database is newer than this build, or
    ///   `migrationFailed` when a migration fails (it is rolled back; earlier ones stay applied).
    @discardableResult
    public func migrate() async throws -> [Int] {
        if let reason = try await self.readOnlyReason() {
            throw StoreError(.readOnlyServer, reason + "; this command writes: point the database URL at the primary, or use a login that can write")
        }
        return try await self.applyPending()
    }

    /// ``migrate()`` once the server is known to take writes.
    private func applyPending() async throws -> [Int] {
        try await self.bootstrap()
        let applied = try await self.appliedVersions()
        let known = Set(self.migrations.map(\.version))
        if let unknown = applied.keys.filter({ !known.contains($0) }).max() {
            throw StoreError(
                .unknownMigration,
                "the database has schema version \(unknown), which this build of Bugle does not know "
                    + "(it knows up to \(known.max() ?? 0)); upgrade Bugle"
            )
        }
        var newlyApplied: [Int] = []
        for migration in self.migrations where applied[migration.version] == nil {
            if try await self.apply(migration) {
                newlyApplied.append(migration.version)
            }
        }
        await self.ensureSegmentReaderRole()
        return newlyApplied
    }

    /// Lists every known migration with its state, plus versions in the database that this build does not know.
    /// - Returns: Status lines in version order.
    /// - Throws: Query errors.
    public func status() async throws -> [MigrationStatus] {
        let applied = try await self.appliedVersions()
        var lines = self.migrations.map {
            MigrationStatus(version: $0.version, name: $0.name, appliedAt: applied[$0.version]?.appliedAt, isKnown: true)
        }
        let known = Set(self.migrations.map(\.version))
        for (version, row) in applied where !known.contains(version) {
            lines.append(MigrationStatus(version: version, name: row.name, appliedAt: row.appliedAt, isKnown: false))
        }
        return lines.sorted { $0.version < $1.version }
    }

    /// Whether the current user can `SET ROLE bugle_segment_reader`.
    /// - Returns: `true` when the role exists and the current user is a member of it (superusers always are).
    /// - Throws: Query errors.
    public func segmentReaderRoleAvailable() async throws -> Bool {
        let rows = try await self.client.answeredQuery(
            """
            SELECT COALESCE((SELECT pg_has_role(current_user, r.oid, 'MEMBER') \
            FROM pg_roles r WHERE r.rolname = \(Self.segmentReaderRole)), false)
            """,
            logger: self.logger
        )
        var available = false
        for try await value in rows.decode(Bool.self) {
            available = value
        }
        return available
    }

    /// Why segment SQL run through this login cannot take the role `bugle_segment_reader` (see ``SegmentAccess``), so
    /// that it runs with the login's own rights: nil when it can (the role exists and this login is a member of it).
    /// ``migrate()`` sets the role up when it can; this says why it could not, for a warning.
    /// - Returns: A clause naming the login and the cause: a server older than PostgreSQL 14, a login that is neither a
    ///   superuser nor has CREATEROLE, or a role that exists but is not granted to this login.
    /// - Throws: Query errors.
    public func segmentReaderRoleUnavailability() async throws -> String? {
        let rows = try await self.client.answeredQuery(
            """
            SELECT session_user::text, current_setting('server_version_num')::int >= 140000, \
            COALESCE((SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user), false), \
            EXISTS (SELECT 1 FROM pg_roles WHERE rolname = \(Self.segmentReaderRole)), \
            COALESCE((SELECT pg_has_role(current_user, r.oid, 'MEMBER') FROM pg_roles r WHERE r.rolname = \(Self.segmentReaderRole)), false)
            """,
            logger: self.logger
        )
        for try await (login, supported, privileged, exists, member) in rows.decode((String, Bool, Bool, Bool, Bool).self) {
            if member { return nil }
            if !supported { return "the server is older than PostgreSQL 14, whose pg_read_all_data the role needs" }
            if !exists {
                return privileged
                    ? "the role could not be created" : "the role does not exist, and this login (\(login)) may not create it (no CREATEROLE)"
            }
            return "the role is not granted to this login (\(login))" + (privileged ? "" : ", which may not grant it (no CREATEROLE)")
        }
        return nil
    }

    /// Lets `bugle_segment_reader` log in (a superuser's best effort, for a cluster whose access control is the
    /// machine's, like the embedded one): segments read through that login cannot take another role. No password is
    /// set, so a server that asks for one still refuses the login.
    /// - Returns: Whether the role exists and can log in.
    public func allowSegmentReaderLogin() async throws -> Bool {
        _ = try await self.client.answeredQuery(
            """
            DO $$
            BEGIN
              IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bugle_segment_reader' AND NOT rolcanlogin)
                 AND (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                BEGIN
                  ALTER ROLE bugle_segment_reader LOGIN;
                EXCEPTION WHEN internal_error THEN
                  -- "tuple concurrently updated": another session (another database of the cluster) granted the
                  -- login at the same moment. Roles are cluster-wide; that is only an error if the login is not there.
                  IF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'bugle_segment_reader') THEN RAISE; END IF;
                END;
              END IF;
            END $$
            """,
            logger: self.logger
        ).collect()
        return try await segmentReaderCanLogIn()
    }

    /// Whether the current login is a superuser (a segment read through `SET LOCAL ROLE` can take its role back).
    public func loginIsSuperuser() async throws -> Bool {
        let rows = try await self.client.answeredQuery(
            "SELECT COALESCE((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false)", logger: self.logger)
        var superuser = false
        for try await value in rows.decode(Bool.self) { superuser = value }
        return superuser
    }

    /// Whether `bugle_segment_reader` exists and can log in (nothing is changed).
    public func segmentReaderCanLogIn() async throws -> Bool {
        let rows = try await self.client.answeredQuery(
            "SELECT COALESCE((SELECT rolcanlogin FROM pg_roles WHERE rolname = \(Self.segmentReaderRole)), false)",
            logger: self.logger
        )
        var canLogIn = false
        for try await value in rows.decode(Bool.self) { canLogIn = value }
        return canLogIn
    }

    // MARK: - Steps

    /// For commands that only read (`bugle runs`, `bugle report`): migrates a server this login can write when Bugle
    /// owns it (its embedded cluster); on one it cannot write (a read replica), or one named by URL, checks that every
    /// migration is already applied instead, so analysts can read runs on a replica and a listing never changes the
    /// schema of a server someone else runs. Commands that write call ``migrate()``, which refuses a read-only server at
    /// once (a standby in recovery: Bugle reached a replica, or a failover left the URL on the old primary; or sessions
    /// made read-only), rather than after the ledger's retries.
    /// - Returns: Whether this login can write.
    /// - Throws: ``StoreError/Code-swift.struct/readOnlyServer`` when the server is read-only and migrations are
    ///   pending; ``StoreError/Code-swift.struct/unsupportedConfiguration`` when `changingSchema` is false and the
    ///   database has no Bugle schema or lacks migrations; or as ``migrate()``.
    /// - Parameter changingSchema: Whether a database with no Bugle schema gets one, and one that lacks migrations gets
    ///   them (Bugle's own embedded cluster). Otherwise both are refused: a listing pointed at the wrong database used
    ///   to create the schema there, and one run by a newer Bugle against a production server migrated it.
    @discardableResult
    public func migrateOrCheck(changingSchema: Bool = true) async throws -> Bool {
        if !changingSchema, try await !self.schemaExists() {
            throw StoreError(
                .unsupportedConfiguration,
                "this database has no Bugle schema (no bugle.schema_migrations): it is not the one Bugle writes to, or "
                    + "`bugle db migrate` has not run on it; `bugle runs` and `bugle report` only read, and created nothing")
        }
        let reason = try await self.readOnlyReason()
        if reason == nil, changingSchema {
            _ = try await self.applyPending()
            return true
        }
        let applied = try await self.appliedVersions()
        let pending = self.migrations.map(\.version).filter { applied[$0] == nil }
        if let first = pending.first {
            guard let reason else {
                throw StoreError(
                    .unsupportedConfiguration,
                    "the Bugle schema of this database lacks \(pending.count) migration(s) from version \(first), which this "
                        + "version of Bugle needs; `bugle db migrate` (or a `bugle run`) applies them; `bugle runs` and "
                        + "`bugle report` only read, and changed nothing")
            }
            throw StoreError(
                .readOnlyServer,
                reason + "; and the schema lacks \(pending.count) migration(s) from version \(first), which only a login that "
                    + "can write applies")
        }
        return reason == nil
    }

    /// Whether the database holds Bugle's migration table.
    private func schemaExists() async throws -> Bool {
        let rows = try await self.client.answeredQuery("SELECT to_regclass('bugle.schema_migrations') IS NOT NULL", logger: self.logger)
        for try await (exists,) in rows.decode((Bool,).self) { return exists }
        return false
    }

    /// Why this login cannot write, or nil when it can.
    private func readOnlyReason() async throws -> String? {
        try await ServerWritability.read(self.client.answeredQuery(ServerWritability.query, logger: self.logger)).reason
    }

    private func bootstrap() async throws {
        do {
            try await self.client.withOpenTransaction(logger: self.logger) { connection in
                try await connection.answeredQuery("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: self.logger)
                let rows = try await connection.answeredQuery(
                    "SELECT to_regnamespace('bugle') IS NOT NULL, to_regclass('bugle.schema_migrations') IS NOT NULL",
                    logger: self.logger
                )
                var schemaExists = false
                var tableExists = false
                for try await (schema, table) in rows.decode((Bool, Bool).self) {
                    schemaExists = schema
                    tableExists = table
                }
                if !schemaExists {
                    try await connection.answeredQuery("CREATE SCHEMA IF NOT EXISTS bugle", logger: self.logger)
                }
                if !tableExists {
                    try await connection.answeredQuery(
                        """
                        CREATE TABLE IF NOT EXISTS bugle.schema_migrations (
                          version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                        """,
                        logger: self.logger
                    )
                }
            }
        } catch {
            throw StoreError(.migrationFailed, "cannot create schema bugle and its migration table", underlying: error)
        }
    }

    private func appliedVersions() async throws -> [Int: (name: String, appliedAt: Date)] {
        let exists = try await self.client.answeredQuery(
            "SELECT to_regclass('bugle.schema_migrations') IS NOT NULL",
            logger: self.logger
        )
        var tableExists = false
        for try await value in exists.decode(Bool.self) {
            tableExists = value
        }
        guard tableExists else { return [:] }
        let rows = try await self.client.answeredQuery(
            "SELECT version, name, applied_at FROM bugle.schema_migrations",
            logger: self.logger
        )
        var result: [Int: (name: String, appliedAt: Date)] = [:]
        for try await (version, name, appliedAt) in rows.decode((Int, String, Date).self) {
            result[version] = (name, appliedAt)
        }
        return result
    }

    /// Applies one migration under the lock; returns `false` when another process applied it meanwhile.
    private func apply(_ migration: Migration) async throws -> Bool {
        do {
            let applied = try await self.client.withOpenTransaction(logger: self.logger) { connection -> Bool in
                try await connection.answeredQuery("SELECT pg_advisory_xact_lock(\(Self.lockKey))", logger: self.logger)
                let rows = try await connection.answeredQuery(
                    "SELECT count(*) FROM bugle.schema_migrations WHERE version = \(migration.version)",
                    logger: self.logger
                )
                var count: Int64 = 0
                for try await value in rows.decode(Int64.self) {
                    count = value
                }
                guard count == 0 else { return false }
                for statement in migration.statements {
                    try await connection.answeredQuery(statement, logger: self.logger)
                }
                try await connection.answeredQuery(
                    "INSERT INTO bugle.schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                    logger: self.logger
                )
                return true
            }
            if applied {
                self.logger.info(
                    "applied migration",
                    metadata: ["version": "\(migration.version)", "name": "\(migration.name)"]
                )
            }
            return applied
        } catch {
            throw StoreError(
                .migrationFailed,
                "migration \(migration.version) (\(migration.name)) failed and was rolled back",
                underlying: error
            )
        }
    }

    /// Best effort: creates `bugle_segment_reader` when the server and our privileges allow it.
    private func ensureSegmentReaderRole() async {
        do {
            let rows = try await self.client.answeredQuery(
                """
                SELECT current_setting('server_version_num')::int >= 140000, \
                COALESCE((SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user), false)
                """,
                logger: self.logger
            )
            var supported = false
            var privileged = false
            for try await (version, mayCreate) in rows.decode((Bool, Bool).self) {
                supported = version
                privileged = mayCreate
            }
            guard supported, privileged else {
                self.logger.debug("segment reader role skipped", metadata: ["supported": "\(supported)"])
                return
            }
            // Races with other databases of the same cluster migrating at once are absorbed by the handlers.
            try await self.client.answeredQuery(
                """
                DO $bugle$
                BEGIN
                  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bugle_segment_reader') THEN
                    BEGIN
                      CREATE ROLE bugle_segment_reader NOLOGIN;
                    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
                    END;
                  END IF;
                  IF NOT EXISTS (SELECT 1 FROM pg_auth_members m
                                 JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
                                 WHERE g.rolname = 'pg_read_all_data' AND u.rolname = 'bugle_segment_reader') THEN
                    BEGIN
                      GRANT pg_read_all_data TO bugle_segment_reader;
                    EXCEPTION WHEN unique_violation THEN NULL;
                    END;
                  END IF;
                  IF NOT EXISTS (SELECT 1 FROM pg_auth_members m
                                 JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
                                 WHERE g.rolname = 'bugle_segment_reader' AND u.rolname = current_user) THEN
                    BEGIN
                      EXECUTE format('GRANT bugle_segment_reader TO %I', current_user);
                    EXCEPTION WHEN unique_violation THEN NULL;
                    END;
                  END IF;
                END
                $bugle$
                """,
                logger: self.logger
            )
        } catch {
            if StoreError.sqlState(of: error) == "42501" {
                self.logger.debug("segment reader role skipped: insufficient privilege")
            } else {
                self.logger.warning(
                    "could not set up the segment reader role",
                    metadata: ["error": "\(StoreError.safeDescription(of: error))"]
                )
            }
        }
    }
}
