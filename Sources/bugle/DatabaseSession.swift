import BugleCore
import BugleStore
import Foundation
import Logging
import PostgresNIO

/// Wiring: picks the database (URL or embedded cluster), connects, and applies migrations when asked.
enum DatabaseSession {
    /// Ends this process's `application_name` (`pid:random`): a worker that takes over this process's expired lease
    /// finds its sessions by it.
    static let sessionTag = "\(getpid()):\(UInt32.random(in: 0...UInt32.max))"

    /// The configuration from `--database-url`, `BUGLE_DATABASE_URL`, or the embedded cluster (started if needed),
    /// with this process's ``sessionTag``.
    static func configuration(_ options: GlobalOptions, logger: Logger) async throws -> DatabaseConfiguration {
        let environment = ProcessInfo.processInfo.environment
        if let url = options.databaseURL ?? environment["BUGLE_DATABASE_URL"], !url.isEmpty {
            return try await login(url, environment: environment, logger: logger)
        }
        if let variable = Self.libpqServerVariables.first(where: { environment[$0]?.isEmpty == false }) {
            logger.warning(
                "\(variable) is set, but Bugle reads libpq's variables only for a server a URL names: using the embedded cluster (BUGLE_DATABASE_URL=postgres:// takes the whole server from the environment)"
            )
        }
        let cluster = EmbeddedCluster.defaultCluster(environment: environment)
        _ = try await cluster.start(logger: logger)
        return cluster.databaseConfiguration().taggingSessions(sessionTag)
    }

    /// Whether a database URL names the server (`--database-url`, `BUGLE_DATABASE_URL`), rather than Bugle's own
    /// embedded cluster.
    static func namesServer(_ options: GlobalOptions) -> Bool {
        let url = options.databaseURL ?? ProcessInfo.processInfo.environment["BUGLE_DATABASE_URL"]
        return url.map { !$0.isEmpty } ?? false
    }

    /// libpq's variables that choose a server: set without a database URL, they are worth a warning.
    static let libpqServerVariables = ["PGHOST", "PGSERVICE", "PGDATABASE", "PGPORT"]

    /// The configuration a database URL names (what it leaves out taken from libpq's service file and environment; of a
    /// host list, the first server that will do: ``DatabaseHostSelection``), with its password found as libpq finds it (the URL, `PGPASSWORD`, the
    /// password file) and this process's ``sessionTag``. A password file Bugle cannot use is logged as a warning.
    static func login(_ url: String, environment: [String: String], logger: Logger) async throws -> DatabaseConfiguration {
        let configuration = try await DatabaseHostSelection.choose(
            DatabaseConfiguration(url: url, environment: environment), environment: environment, logger: logger)
        if case .unusableFile(let message) = configuration.passwordSource {
            logger.warning("\(message)")
        }
        if !configuration.ignoredSettings.isEmpty {
            logger.notice("libpq settings Bugle does not use (they only tune the connection): \(configuration.ignoredSettings.joined(separator: ", "))")
        }
        return configuration.taggingSessions(sessionTag)
    }

    /// Logged on every command that reads a segment through `SET LOCAL ROLE` on a superuser login.
    static let superuserLoginWarning =
        "segments are read as bugle_segment_reader through SET LOCAL ROLE on a superuser login, which segment SQL can undo "
        + "(set_config('role', …)); set BUGLE_SEGMENT_DATABASE_URL to a read-only login, or connect Bugle as a non-superuser"

    /// Logged on every command that reads a segment through a non-superuser login that cannot take
    /// `bugle_segment_reader` (no CREATEROLE to create or grant it): segment SQL then runs with that login's own rights.
    /// - Parameters:
    ///   - login: The login's name, for the statements to run.
    ///   - why: ``Migrator/segmentReaderRoleUnavailability()``.
    static func ownRightsWarning(login: String, why: String) -> String {
        let role = Migrator.segmentReaderRole
        return "segments run with the rights of Bugle's own login (\(login)): whatever it may read or call, schema bugle's "
            + "tables included, not only what the reader role \(role) may read: \(why). Fix it once: `ALTER ROLE \(login) CREATEROLE` (as a superuser) and "
            + "`bugle db migrate`; or, as a superuser, `CREATE ROLE \(role) NOLOGIN; GRANT pg_read_all_data TO \(role); "
            + "GRANT \(role) TO \(login)`; or set BUGLE_SEGMENT_DATABASE_URL to a read-only login"
    }

    /// The session's login name.
    private static func sessionUser(_ client: PostgresClient, logger: Logger) async throws -> String {
        let rows = try await client.answeredQuery("SELECT session_user::text", logger: logger)
        for try await (name,) in rows.decode((String,).self) { return name }
        return "this login"
    }

    /// How segments are read: through `BUGLE_SEGMENT_DATABASE_URL` when set (a login of `bugle_segment_reader`, set up
    /// by the database's owner), or, on the embedded cluster, through its socket as `bugle_segment_reader` (given LOGIN
    /// here, unless `prepare` is false: commands that write nothing use the login only when it already exists); else
    /// as the reader role through `SET LOCAL ROLE` on `client` (see ``SegmentAccess``).
    static func segmentAccess(
        _ options: GlobalOptions, client: PostgresClient, prepare: Bool = true, logger: Logger
    ) async throws -> SegmentAccess {
        let environment = ProcessInfo.processInfo.environment
        if let url = environment["BUGLE_SEGMENT_DATABASE_URL"], !url.isEmpty {
            return SegmentAccess(client: client, readerLogin: try await login(url, environment: environment, logger: logger))
        }
        let migrator = Migrator(client: client, logger: logger)
        if let url = options.databaseURL ?? environment["BUGLE_DATABASE_URL"], !url.isEmpty {
            if try await migrator.loginIsSuperuser() {
                logger.warning("\(Self.superuserLoginWarning)")
            } else if let why = try await migrator.segmentReaderRoleUnavailability() {
                let login = try await Self.sessionUser(client, logger: logger)
                logger.warning("\(Self.ownRightsWarning(login: login, why: why))")
            }
            // The URL was read once already (this session's login); only its `options` are wanted here.
            let sessionOptions = try DatabaseConfiguration(url: url, environment: environment).segmentOptions
            return SegmentAccess(client: client, readerLogin: nil, options: sessionOptions)
        }
        guard try await prepare ? migrator.allowSegmentReaderLogin() : migrator.segmentReaderCanLogIn() else {
            return SegmentAccess(client: client, readerLogin: nil)
        }
        var login = EmbeddedCluster.defaultCluster(environment: environment).databaseConfiguration().taggingSessions(sessionTag)
        login.username = Migrator.segmentReaderRole
        return SegmentAccess(client: client, readerLogin: login)
    }

    /// Connects, optionally migrates, and runs `body` with a client. With `readOnly`, a server this login cannot write
    /// (a read replica) is accepted when its schema is current; otherwise such a server is refused before `body` runs.
    /// - Parameter chosen: The server's configuration when the caller has it already (``configuration(_:logger:)``
    ///   chooses among a host list and logs the servers it passed over: once per command, not once per call).
    static func with<R: Sendable>(
        _ options: GlobalOptions,
        migrate: Bool = true,
        readOnly: Bool = false,
        chosen: DatabaseConfiguration? = nil,
        logger: Logger,
        _ body: (PostgresClient) async throws -> R
    ) async throws -> R {
        try await withServer(options, migrate: migrate, readOnly: readOnly, chosen: chosen, logger: logger) { client, _ in try await body(client) }
    }

    /// ``with(_:migrate:readOnly:chosen:logger:_:)``, also telling `body` the server's configuration.
    static func withServer<R: Sendable>(
        _ options: GlobalOptions,
        migrate: Bool = true,
        readOnly: Bool = false,
        chosen: DatabaseConfiguration? = nil,
        logger: Logger,
        _ body: (PostgresClient, DatabaseConfiguration) async throws -> R
    ) async throws -> R {
        let configuration: DatabaseConfiguration
        if let chosen {
            configuration = chosen
        } else {
            configuration = try await Self.configuration(options, logger: logger)
        }
        return try await Database.withClient(configuration, logger: logger) { client in
            let migrator = Migrator(client: client, logger: logger)
            if migrate, readOnly {
                try await migrator.migrateOrCheck(changingSchema: !namesServer(options))
            } else if migrate {
                try await migrator.migrate()
            }
            return try await body(client, configuration)
        }
    }
}
