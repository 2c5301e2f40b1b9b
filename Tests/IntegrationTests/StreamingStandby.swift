@testable import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A primary and its streaming standby: two clusters of the test's own, the standby made by `pg_basebackup -R` from
/// the primary (after `prepare` ran on it) and replicating synchronously, so that a promoted standby holds every commit
/// the primary acknowledged. The primary is durable: a throwaway cluster's `synchronous_commit=off` would not wait
/// for the standby.
struct StreamingStandby: Sendable {
    let primary: EmbeddedCluster
    let standby: EmbeddedCluster

    /// Sets both up, runs `body`, and stops both (also when `body` throws).
    static func with<R: Sendable>(
        name: String, prepare: (PostgresClient) async throws -> Void, _ body: (StreamingStandby) async throws -> R
    ) async throws -> R {
        let directory = NSTemporaryDirectory() + "bugle-\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let primary = EmbeddedCluster(directory: directory + "/primary", port: 5432, durability: .durable)
        let standby = EmbeddedCluster(directory: directory + "/standby", port: 5433, durability: .throwaway)
        defer {
            standby.stopBlocking(mode: .immediate)
            primary.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: directory)
        }
        _ = try await primary.start(logger: TestDatabase.logger)
        try await Database.withClient(primary.databaseConfiguration(), logger: TestDatabase.logger, prepare)
        let pair = StreamingStandby(primary: primary, standby: standby)
        try await pair.copyPrimary(into: directory + "/standby")
        _ = try await standby.start(logger: TestDatabase.logger)
        try await pair.replicateSynchronously()
        return try await body(pair)
    }

    /// `pg_basebackup -R` of the primary into the standby's data directory (owned by the account PostgreSQL runs as).
    private func copyPrimary(into standbyDirectory: String) async throws {
        try FileManager.default.createDirectory(atPath: standbyDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if let user = primary.systemUser, let account = getpwnam(user) {
            #expect(chown(standbyDirectory, account.pointee.pw_uid, account.pointee.pw_gid) == 0)
        }
        guard case .unixSocket(let socket, let port) = primary.databaseConfiguration().endpoint else {
            throw StoreError(.invalidInput, "the embedded cluster listens on a Unix socket")
        }
        let binaries = try PostgresBinaries.locate(environment: ProcessInfo.processInfo.environment)
        // Beside the real initdb (PATH may hold only links to it, as /usr/local/bin does on the CI machines).
        let directory = (URL(fileURLWithPath: binaries.initdb).resolvingSymlinksInPath().path as NSString).deletingLastPathComponent
        let copied = try await ProcessRunner.run(
            directory + "/pg_basebackup",
            ["-h", socket, "-p", "\(port)", "-U", EmbeddedCluster.username, "-D", standby.dataDirectory, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"],
            as: primary.systemUser)
        guard copied.status == 0 else { throw StoreError(.clusterCommandFailed, "pg_basebackup failed: \(copied.outputTail())") }
    }

    /// Waits for the standby to stream, then makes the primary's commits wait for it.
    private func replicateSynchronously() async throws {
        try await Database.withClient(primary.databaseConfiguration().with(database: "postgres"), logger: TestDatabase.logger) { client in
            let deadline = ContinuousClock.now + .seconds(60)
            while try await LedgerTestSupport.scalar(
                client, "SELECT count(*)::bigint FROM pg_stat_replication WHERE state = 'streaming'", as: Int64.self) != 1 {
                guard ContinuousClock.now < deadline else { throw StoreError(.connectionFailed, "the standby never streamed") }
                try await Task.sleep(for: .milliseconds(50))
            }
            _ = try await client.query("ALTER SYSTEM SET synchronous_standby_names = '*'", logger: TestDatabase.logger).collect()
            _ = try await client.query("SELECT pg_reload_conf()", logger: TestDatabase.logger).collect()
        }
    }

    /// Stops the primary without a checkpoint (as a crashed server), then promotes the standby and waits for it to
    /// take writes.
    func failOver() async throws {
        try await primary.stop(mode: .immediate)
        let binaries = try PostgresBinaries.locate(environment: ProcessInfo.processInfo.environment)
        let promoted = try await ProcessRunner.run(binaries.pgCtl, ["promote", "-w", "-t", "60", "-D", standby.dataDirectory], as: standby.systemUser)
        guard promoted.status == 0 else { throw StoreError(.clusterCommandFailed, "pg_ctl promote failed: \(promoted.outputTail())") }
    }

    /// A URL of `clusters` in order (their socket directories), with `target_session_attrs` when given.
    static func url(_ clusters: [EmbeddedCluster], attributes: String? = nil) throws -> String {
        var hosts: [String] = []
        var ports: [String] = []
        for cluster in clusters {
            guard case .unixSocket(let directory, let port) = cluster.databaseConfiguration().endpoint else {
                throw StoreError(.invalidInput, "the embedded clusters listen on Unix sockets")
            }
            hosts.append(directory)
            ports.append("\(port)")
        }
        return "postgres://\(EmbeddedCluster.username)@/\(EmbeddedCluster.databaseName)?host=\(hosts.joined(separator: ","))"
            + "&port=\(ports.joined(separator: ","))" + (attributes.map { "&target_session_attrs=\($0)" } ?? "")
    }

    /// `postgres://…?host=<socket directory>&port=…` of one cluster.
    static func location(_ cluster: EmbeddedCluster) throws -> String {
        guard case .unixSocket(let directory, let port) = cluster.databaseConfiguration().endpoint else {
            throw StoreError(.invalidInput, "the embedded clusters listen on Unix sockets")
        }
        return "\(directory)/.s.PGSQL.\(port)"
    }
}
