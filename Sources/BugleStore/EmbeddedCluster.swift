import Dispatch
import Foundation
import Logging
import PostgresNIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Bugle's zero-setup database: a private PostgreSQL cluster started with the machine's `initdb`/`pg_ctl`.
///
/// Layout of ``directory``: `data/` (the cluster), `socket/` (the Unix socket, mode 0700), `postgres.log`, and a
/// lock file that serialises concurrent `start()` calls. The server listens on the Unix socket only
/// (`listen_addresses=''`, no TCP) and trusts local connections, so the socket directory's permissions are the
/// access control: only the owning account (and root) can connect. The superuser is `bugle`, and the database
/// `bugle` is created on first start.
///
/// **Running as root.** PostgreSQL refuses to run as root. When `geteuid() == 0`, `initdb` and `pg_ctl` run as the
/// `postgres` system account through `runuser -u postgres --` (the account exists once the Debian package
/// `postgresql` is installed), and the cluster directory is chowned to it. Because `/root` is not traversable by
/// that account, ``defaultCluster(environment:)`` then places the cluster in `/var/lib/bugle/<hash of BUGLE_HOME>`
/// instead of `$BUGLE_HOME/postgres`; ``status()`` always reports the real data directory.
public struct EmbeddedCluster: Sendable, Hashable {
    /// How much the cluster cares about surviving a machine crash.
    public enum Durability: Sendable, Hashable {
        /// Normal PostgreSQL durability (fsync on). For the user's cluster.
        case durable
        /// `initdb --no-sync` and `fsync=off`, `synchronous_commit=off`, `full_page_writes=off`. For tests only.
        case throwaway
    }

    /// How `pg_ctl stop` shuts the server down.
    public enum StopMode: String, Sendable, Hashable {
        /// Wait for clients to disconnect.
        case smart
        /// Disconnect clients and shut down cleanly (the default).
        case fast
        /// Abort without a clean shutdown; crash recovery runs on the next start.
        case immediate
    }

    /// The role name of the cluster's superuser.
    public static let username = "bugle"
    /// The database created on first start.
    public static let databaseName = "bugle"

    /// The directory that holds the cluster's files.
    public let directory: String
    /// The port that names the socket file `.s.PGSQL.<port>` (no TCP port is opened).
    public let port: Int
    /// The durability settings.
    public let durability: Durability
    /// Extra server settings passed as `-c name=value` (names and values come from code, never from users).
    public let serverSettings: [String: String]
    /// The account `initdb`/`pg_ctl` run as through `runuser`, or `nil` to run them as the current user.
    public let systemUser: String?

    /// Describes a cluster in `directory`; nothing is touched until ``start(logger:)``.
    /// - Parameters:
    ///   - directory: The cluster's directory; created on start. Dedicate it to the cluster.
    ///   - port: The port number that names the socket file.
    ///   - durability: ``Durability/durable`` for real use, ``Durability/throwaway`` for tests.
    ///   - serverSettings: Extra `-c name=value` settings, from code constants only.
    ///   - systemUser: The account to run PostgreSQL as; defaults to `postgres` when the process is root, else `nil`.
    public init(
        directory: String,
        port: Int = 5432,
        durability: Durability = .durable,
        serverSettings: [String: String] = [:],
        systemUser: String? = EmbeddedCluster.defaultSystemUser
    ) {
        let standardized = (directory as NSString).standardizingPath
        self.directory = standardized.isEmpty ? directory : standardized
        self.port = port
        self.durability = durability
        self.serverSettings = serverSettings
        self.systemUser = systemUser
    }

    /// `"postgres"` when this process runs as root (PostgreSQL refuses to), otherwise `nil`.
    public static var defaultSystemUser: String? {
        geteuid() == 0 ? "postgres" : nil
    }

    /// The user's cluster: `$BUGLE_HOME/postgres` (with `BUGLE_HOME` defaulting to `~/.bugle`), or, when running
    /// as root, `/var/lib/bugle/<16-hex-digit hash of BUGLE_HOME>` so the `postgres` account can reach it.
    /// - Parameter environment: The process environment (`BUGLE_HOME`, `HOME`).
    /// - Returns: A durable cluster description.
    public static func defaultCluster(environment: [String: String]) -> EmbeddedCluster {
        let home = Self.bugleHome(environment: environment)
        if geteuid() == 0 {
            return EmbeddedCluster(directory: "/var/lib/bugle/" + Self.shortHash(home))
        }
        return EmbeddedCluster(directory: home + "/postgres")
    }

    /// `BUGLE_HOME`, or `$HOME/.bugle`.
    /// - Parameter environment: The process environment.
    /// - Returns: An absolute path.
    public static func bugleHome(environment: [String: String]) -> String {
        if let home = environment["BUGLE_HOME"], !home.isEmpty {
            return (home as NSString).standardizingPath
        }
        let userHome = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return (userHome as NSString).appendingPathComponent(".bugle")
    }

    /// The data directory (`<directory>/data`).
    public var dataDirectory: String { self.directory + "/data" }
    /// The server log (`<directory>/postgres.log`).
    public var logFile: String { self.directory + "/postgres.log" }
    /// The socket directory: `<directory>/socket`, or `/tmp/bugle-<uid>-<hash>` when that path would exceed the
    /// operating system's 107-byte limit for socket paths.
    public var socketDirectory: String {
        let preferred = self.directory + "/socket"
        if preferred.utf8.count + ".s.PGSQL.\(self.port)".utf8.count + 1 <= 100 {
            return preferred
        }
        return "/tmp/bugle-\(geteuid())-\(Self.shortHash(self.directory))"
    }
    private var lockFile: String { self.directory + "/cluster.lock" }

    /// How to connect to this cluster: its Unix socket, user `bugle`, database `bugle`, no TLS.
    /// - Returns: A configuration for ``Database/withClient(_:logger:_:)``.
    public func databaseConfiguration() -> DatabaseConfiguration {
        DatabaseConfiguration.unixSocket(
            directory: self.socketDirectory,
            port: self.port,
            username: Self.username,
            database: Self.databaseName
        )
    }

    // MARK: - Lifecycle

    /// Creates the cluster if needed, starts it unless it already runs, and makes sure database `bugle` exists.
    /// Safe to call from several processes at once: a file lock serialises them.
    /// - Parameter logger: Receives progress messages.
    /// - Returns: The cluster's status after starting.
    /// - Throws: ``StoreError`` (`postgresNotInstalled`, `clusterDirectory`, `clusterCommandFailed`,
    ///   `connectionFailed`).
    @discardableResult
    public func start(logger: Logger) async throws -> EmbeddedClusterStatus {
        let binaries = try PostgresBinaries.locate(environment: ProcessInfo.processInfo.environment)
        let owner = try self.systemAccount()
        try self.checkQuotable()
        try self.prepareDirectories(owner: owner)
        try await self.withLock {
            if !self.isInitialized {
                try await self.initialize(binaries: binaries, logger: logger)
            }
            if try await self.isRunning(binaries: binaries) {
                logger.debug("embedded PostgreSQL already running", metadata: ["data": "\(self.dataDirectory)"])
            } else {
                try await self.launch(binaries: binaries, logger: logger)
            }
            // Under the lock: two first starts at once both found no database and one CREATE DATABASE failed (23505).
            try await self.ensureDatabase(logger: logger)
        }
        return try await self.status()
    }

    /// Stops the server if it runs.
    /// - Parameter mode: How to shut down; `.fast` by default.
    /// - Throws: ``StoreError`` when `pg_ctl stop` fails while the server keeps running.
    public func stop(mode: StopMode = .fast) async throws {
        guard self.isInitialized else { return }
        let binaries = try PostgresBinaries.locate(environment: ProcessInfo.processInfo.environment)
        let result = try await ProcessRunner.run(
            binaries.pgCtl,
            ["stop", "-w", "-t", "60", "-D", self.dataDirectory, "-m", mode.rawValue],
            as: self.systemUser
        )
        if result.status != 0, try await self.isRunning(binaries: binaries) {
            throw StoreError(.clusterCommandFailed, "pg_ctl stop failed: \(result.outputTail())")
        }
    }

    /// Stops the server, blocking the calling thread; errors are ignored. Meant for `atexit` handlers.
    /// - Parameter mode: How to shut down; `.immediate` by default.
    public func stopBlocking(mode: StopMode = .immediate) {
        guard self.isInitialized,
            let binaries = try? PostgresBinaries.locate(environment: ProcessInfo.processInfo.environment)
        else { return }
        _ = try? ProcessRunner.runBlocking(
            binaries.pgCtl,
            ["stop", "-w", "-D", self.dataDirectory, "-m", mode.rawValue],
            as: self.systemUser
        )
    }

    /// Reports whether the cluster exists and runs, with its real paths.
    /// - Returns: The status.
    /// - Throws: ``StoreError`` when PostgreSQL is not installed but a cluster exists.
    public func status() async throws -> EmbeddedClusterStatus {
        let initialized = self.isInitialized
        var running = false
        if initialized {
            let binaries = try PostgresBinaries.locate(environment: ProcessInfo.processInfo.environment)
            running = try await self.isRunning(binaries: binaries)
        }
        let version = (try? String(contentsOfFile: self.dataDirectory + "/PG_VERSION", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        var pid: Int?
        if running, let pidFile = try? String(contentsOfFile: self.dataDirectory + "/postmaster.pid", encoding: .utf8) {
            pid = pidFile.split(separator: "\n").first.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
        return EmbeddedClusterStatus(
            dataDirectory: self.dataDirectory,
            socketDirectory: self.socketDirectory,
            logFile: self.logFile,
            port: self.port,
            isInitialized: initialized,
            isRunning: running,
            pid: pid,
            majorVersion: version,
            systemUser: self.systemUser
        )
    }

    // MARK: - Steps

    private var isInitialized: Bool {
        FileManager.default.fileExists(atPath: self.dataDirectory + "/PG_VERSION")
    }

    private func isRunning(binaries: PostgresBinaries) async throws -> Bool {
        let result = try await ProcessRunner.run(
            binaries.pgCtl,
            ["status", "-D", self.dataDirectory],
            as: self.systemUser
        )
        // 0: running; 3: not running; 4: no accessible data directory.
        switch result.status {
        case 0: return true
        case 3: return false
        default:
            throw StoreError(.clusterCommandFailed, "pg_ctl status failed: \(result.outputTail())")
        }
    }

    /// Where initdb writes the cluster before it is moved to ``dataDirectory`` complete: a process killed during initdb
    /// (kill -9, the OOM killer, a power cut) left a data directory with PG_VERSION but no `postgres` database, which
    /// every later command took for a cluster and failed on.
    private var partialDataDirectory: String { self.directory + "/data.initdb-partial" }

    private func initialize(binaries: PostgresBinaries, logger: Logger) async throws {
        let fileManager = FileManager.default
        // Left by an initdb that never finished; nobody else initialises while this process holds the lock.
        if fileManager.fileExists(atPath: self.partialDataDirectory) {
            logger.info("removing an embedded cluster whose creation was interrupted", metadata: ["data": "\(self.partialDataDirectory)"])
            try? fileManager.removeItem(atPath: self.partialDataDirectory)
        }
        if let contents = try? fileManager.contentsOfDirectory(atPath: self.dataDirectory), !contents.isEmpty {
            throw StoreError(
                .clusterDirectory,
                "\(self.dataDirectory) is not empty but holds no PostgreSQL cluster (no PG_VERSION); "
                    + "move it away or choose another directory"
            )
        }
        logger.info("creating embedded PostgreSQL cluster", metadata: ["data": "\(self.dataDirectory)"])
        var arguments = [
            "-D", self.partialDataDirectory, "-U", Self.username, "--auth=trust", "-E", "UTF8", "--locale=C",
        ]
        if self.durability == .throwaway {
            arguments.append("--no-sync")
        }
        let result = try await ProcessRunner.run(
            binaries.initdb,
            arguments,
            as: self.systemUser
        )
        guard result.status == 0 else {
            try? fileManager.removeItem(atPath: self.partialDataDirectory)
            throw StoreError(.clusterCommandFailed, "initdb failed: \(result.outputTail())\(self.rootHint(result.outputTail()))")
        }
        do {
            if fileManager.fileExists(atPath: self.dataDirectory) { try fileManager.removeItem(atPath: self.dataDirectory) }
            try fileManager.moveItem(atPath: self.partialDataDirectory, toPath: self.dataDirectory)
        } catch {
            throw StoreError(.clusterDirectory, "cannot move the new cluster into \(self.dataDirectory)", underlying: error)
        }
    }

    private func launch(binaries: PostgresBinaries, logger: Logger) async throws {
        var options = "-k '\(self.socketDirectory)' -p \(self.port) -c listen_addresses='' "
            + "-c unix_socket_permissions=0700"
        var settings = self.serverSettings
        if self.durability == .throwaway {
            settings["fsync"] = settings["fsync"] ?? "off"
            settings["synchronous_commit"] = settings["synchronous_commit"] ?? "off"
            settings["full_page_writes"] = settings["full_page_writes"] ?? "off"
        }
        for (name, value) in settings.sorted(by: { $0.key < $1.key }) {
            options += " -c '\(name)=\(value)'"
        }
        logger.info("starting embedded PostgreSQL", metadata: ["data": "\(self.dataDirectory)"])
        let result = try await ProcessRunner.run(
            binaries.pgCtl,
            ["start", "-w", "-t", "60", "-D", self.dataDirectory, "-l", self.logFile, "-o", options],
            as: self.systemUser
        )
        guard result.status == 0 else {
            // Another process may have won a race that the lock could not see (e.g. a manual pg_ctl start).
            if (try? await self.isRunning(binaries: binaries)) == true {
                return
            }
            throw StoreError(
                .clusterCommandFailed,
                "pg_ctl start failed: \(result.outputTail()); server log: \(self.logTail())\(self.rootHint(result.outputTail() + self.logTail()))"
            )
        }
    }

    private func ensureDatabase(logger: Logger) async throws {
        let admin = self.databaseConfiguration().with(database: "postgres")
        do {
            try await self.createDatabase(admin, logger: logger)
        } catch where StoreError.sqlState(of: error) == "3D000" {
            // No `postgres` database: initdb never finished (killed by an older Bugle, which initialised in place).
            throw StoreError(
                .clusterDirectory,
                "the embedded cluster in \(self.dataDirectory) is incomplete (it has no `postgres` database: its creation was "
                    + "interrupted); stop it with `bugle db stop` and move \(self.directory) away to have it created afresh")
        }
    }

    private func createDatabase(_ admin: DatabaseConfiguration, logger: Logger) async throws {
        try await Database.withClient(admin, logger: logger) { client in
            let rows = try await client.answeredQuery(
                "SELECT count(*) FROM pg_database WHERE datname = \(Self.databaseName)",
                logger: logger
            )
            var exists = false
            for try await count in rows.decode(Int64.self) {
                exists = count > 0
            }
            guard !exists else { return }
            do {
                try await client.answeredQuery("CREATE DATABASE bugle", logger: logger)
                logger.info("created database bugle in the embedded cluster")
            } catch {
                // 42P04 duplicate_database, or 23505 on pg_database's name index: another process created it first
                // (one that started the cluster without taking the lock, such as an older Bugle).
                guard ["42P04", "23505"].contains(StoreError.sqlState(of: error)) else { throw error }
            }
        }
    }

    // MARK: - Files, accounts, locks

    private typealias Account = (uid: uid_t, gid: gid_t)

    private func systemAccount() throws -> Account? {
        guard let user = self.systemUser else { return nil }
        guard let entry = getpwnam(user) else {
            throw StoreError(
                .postgresNotInstalled,
                "PostgreSQL refuses to run as root, so Bugle runs it as the '\(user)' system account, which does not "
                    + "exist. Install the Debian package `postgresql` (for example `apt-get install -y postgresql`), "
                    + "which creates it, or run Bugle as a normal user, or set BUGLE_DATABASE_URL."
            )
        }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    private func prepareDirectories(owner: Account?) throws {
        let fileManager = FileManager.default
        do {
            let parent = (self.directory as NSString).deletingLastPathComponent
            try fileManager.createDirectory(
                atPath: parent,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o755]
            )
            try self.checkSharedSocketDirectory(owner: owner)
            for path in [self.directory, self.socketDirectory] {
                if !fileManager.fileExists(atPath: path) {
                    try fileManager.createDirectory(
                        atPath: path,
                        withIntermediateDirectories: true,
                        attributes: [.posixPermissions: 0o700]
                    )
                }
                if let owner, chown(path, owner.uid, owner.gid) != 0 {
                    throw StoreError(
                        .clusterDirectory,
                        "cannot hand \(path) to the '\(self.systemUser ?? "")' account (errno \(errno))"
                    )
                }
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.clusterDirectory, "cannot create the cluster directory \(self.directory)", underlying: error)
        }
    }

    /// The socket directory in /tmp (a cluster path too long for a socket) is the access control of a cluster that
    /// trusts every local connection: one that already exists must be a directory (not a link) of the account the
    /// server runs as, writable by nobody else. Another account could otherwise create it first and put its own
    /// socket there, and Bugle would talk to whatever answered.
    private func checkSharedSocketDirectory(owner: Account?) throws {
        guard !self.socketDirectory.hasPrefix(self.directory + "/") else { return }
        var info = stat()
        guard lstat(self.socketDirectory, &info) == 0 else { return }  // absent: created below, 0700
        let expected = owner?.uid ?? geteuid()
        let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
        guard isDirectory, info.st_uid == expected, info.st_mode & 0o077 == 0 else {
            throw StoreError(
                .clusterDirectory,
                "the socket directory \(self.socketDirectory) already exists and is "
                    + (isDirectory ? "owned by uid \(info.st_uid) with mode \(String(info.st_mode & 0o777, radix: 8))" : "not a directory")
                    + ": another account could answer for the database there; remove it (it must be a 0700 directory of uid "
                    + "\(expected)), or choose a shorter BUGLE_HOME so the socket stays inside it")
        }
    }

    /// pg_ctl passes `-D`, `-l` and `-o` through `/bin/sh`; refuse paths it would mangle instead of quoting badly.
    private func checkQuotable() throws {
        let forbidden: Set<Character> = ["'", "\"", "\\", "$", "`", "\n", "\r"]
        for path in [self.directory, self.socketDirectory] where path.contains(where: forbidden.contains) {
            throw StoreError(
                .clusterDirectory,
                "the cluster path \(path) contains a quote, backslash, '$', '`' or newline, which pg_ctl cannot pass "
                    + "safely; choose another BUGLE_HOME"
            )
        }
    }

    private func withLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let descriptor = open(self.lockFile, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreError(.clusterDirectory, "cannot open the lock file \(self.lockFile) (errno \(errno))")
        }
        defer { close(descriptor) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                _ = flock(descriptor, LOCK_EX)
                continuation.resume()
            }
        }
        defer { _ = flock(descriptor, LOCK_UN) }
        return try await body()
    }

    private func logTail() -> String {
        guard let data = FileManager.default.contents(atPath: self.logFile) else { return "(no log)" }
        let text = String(decoding: data.suffix(1_500), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "(empty)" : text
    }

    /// Why a command run as the system account may have failed, when `output` says permission was denied (it was
    /// added to every failure, a stale lock file's or an interrupted initdb's too).
    private func rootHint(_ output: String) -> String {
        guard let user = self.systemUser, output.localizedCaseInsensitiveContains("permission denied") else { return "" }
        return " (running as root: PostgreSQL runs as '\(user)', which must be able to traverse every parent of "
            + "\(self.directory))"
    }

    /// FNV-1a 64-bit, as 16 hex digits: stable across runs and platforms (unlike `Hasher`).
    static func shortHash(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
