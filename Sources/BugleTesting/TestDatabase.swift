import BugleStore
import Foundation
import Logging

/// Fresh, migrated PostgreSQL databases for integration tests.
///
/// When `BUGLE_TEST_DATABASE_URL` is set, databases are created on that server (its user needs `CREATEDB`; a URL
/// without a password takes it from `PGPASSWORD` or the password file, as `bugle` does).
/// Otherwise one throwaway ``EmbeddedCluster`` is started per test process, lazily, in a temporary directory
/// (`fsync=off`, Unix socket only); it is stopped with `pg_ctl stop -m immediate` and deleted when the process exits
/// (set `BUGLE_TEST_KEEP_CLUSTER=1` to keep it for debugging). Each call to ``fresh()`` creates its own database
/// `bugle_test_<random>` and runs Bugle's migrations in it, so tests can run in parallel without sharing rows.
/// Test databases are not dropped.
public enum TestDatabase {
    /// The logger used for test set-up (warnings and above).
    public static let logger: Logger = {
        var logger = Logger(label: "bugle.test-database")
        logger.logLevel = .warning
        return logger
    }()

    /// Creates and migrates a new, empty database.
    /// - Returns: How to connect to it.
    /// - Throws: ``StoreError`` when PostgreSQL is not installed, the cluster cannot start, or the server refuses.
    public static func fresh() async throws -> DatabaseConfiguration {
        let server = try await TestServer.shared.serverConfiguration()
        let name = "bugle_test_" + Self.randomSuffix()
        try await Database.createDatabase(named: name, using: server, logger: Self.logger)
        let configuration = server.with(database: name)
        try await Database.withClient(configuration, logger: Self.logger) { client in
            _ = try await Migrator(client: client, logger: Self.logger).migrate()
        }
        return configuration
    }

    /// The server's own configuration (`BUGLE_TEST_DATABASE_URL`, or the throwaway cluster's `postgres` database),
    /// for tests that need server-level access.
    /// - Returns: The configuration.
    /// - Throws: As ``fresh()``.
    public static func server() async throws -> DatabaseConfiguration {
        try await TestServer.shared.serverConfiguration()
    }

    private static func randomSuffix() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<12).map { _ in String(Int.random(in: 0..<16, using: &generator), radix: 16) }.joined()
    }
}

/// Starts the shared test server once per process.
private actor TestServer {
    static let shared = TestServer()

    private var starting: Task<DatabaseConfiguration, any Error>?

    func serverConfiguration() async throws -> DatabaseConfiguration {
        if let starting {
            return try await starting.value
        }
        let task = Task { try await Self.start() }
        self.starting = task
        return try await task.value
    }

    private static func start() async throws -> DatabaseConfiguration {
        let environment = ProcessInfo.processInfo.environment
        if let url = environment["BUGLE_TEST_DATABASE_URL"], !url.isEmpty {
            return try DatabaseConfiguration(url: url, environment: environment).resolvingPassword(environment: environment)
        }
        let directory = NSTemporaryDirectory().appending("bugle-test-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        let cluster = EmbeddedCluster(
            directory: directory,
            port: 5432,
            durability: .throwaway,
            serverSettings: ["max_connections": "300"]
        )
        ExitCleanup.shared.register(cluster, removeDirectory: environment["BUGLE_TEST_KEEP_CLUSTER"] == nil)
        try await cluster.start(logger: TestDatabase.logger)
        return cluster.databaseConfiguration().with(database: "postgres")
    }
}

/// Where a test process writes its throwaway files: one directory, removed when the process exits, so campaign files,
/// CSVs and simulator records do not pile up in the temporary directory when the tests run without `tools/test.sh`'s
/// own `TMPDIR`. (Throwaway clusters keep their short paths of their own: a Unix socket path has a length limit.)
public enum TestScratch {
    /// The process's scratch directory, with a trailing `/` (like `NSTemporaryDirectory()`).
    public static let root: String = {
        let path = NSTemporaryDirectory() + "bugle-tests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))/"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        ExitCleanup.shared.register(directory: path)
        return path
    }()

    /// A new directory `prefix-<uuid>` inside ``root``.
    public static func directory(prefix: String) throws -> String {
        let path = root + "\(prefix)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// Stops throwaway clusters, and removes scratch directories, when the test process exits.
///
/// `@unchecked Sendable`: the only mutable state is guarded by `lock`; an `atexit` handler cannot await an actor.
private final class ExitCleanup: @unchecked Sendable {
    static let shared = ExitCleanup()

    private let lock = NSLock()
    private var clusters: [(cluster: EmbeddedCluster, removeDirectory: Bool)] = []
    private var directories: [String] = []
    private var installed = false

    func register(_ cluster: EmbeddedCluster, removeDirectory: Bool) {
        register { $0.clusters.append((cluster, removeDirectory)) }
    }

    func register(directory: String) {
        register { $0.directories.append(directory) }
    }

    private func register(_ add: (ExitCleanup) -> Void) {
        self.lock.lock()
        defer { self.lock.unlock() }
        add(self)
        if !self.installed {
            self.installed = true
            atexit {
                ExitCleanup.shared.stopAll()
            }
        }
    }

    func stopAll() {
        self.lock.lock()
        let clusters = self.clusters
        let directories = self.directories
        self.clusters = []
        self.directories = []
        self.lock.unlock()
        for directory in directories { try? FileManager.default.removeItem(atPath: directory) }
        for entry in clusters {
            entry.cluster.stopBlocking(mode: .immediate)
            if entry.removeDirectory {
                try? FileManager.default.removeItem(atPath: entry.cluster.directory)
                try? FileManager.default.removeItem(atPath: entry.cluster.socketDirectory)
            }
        }
    }
}
