import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("EmbeddedCluster")
struct EmbeddedClusterTests {
    private let logger = TestDatabase.logger

    @Test func startStatusReuseStop() async throws {
        let directory = NSTemporaryDirectory() + "bugle-cluster-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        let cluster = EmbeddedCluster(directory: directory, port: 5433, durability: .throwaway)
        defer {
            cluster.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: directory)
        }

        let before = try await cluster.status()
        #expect(!before.isInitialized && !before.isRunning)
        #expect(before.dataDirectory == directory + "/data")

        let started = try await cluster.start(logger: self.logger)
        #expect(started.isInitialized && started.isRunning)
        #expect(started.pid != nil)
        #expect(FileManager.default.fileExists(atPath: cluster.socketDirectory + "/.s.PGSQL.5433"))

        let status = try await cluster.status()
        #expect(status == started)

        // Starting again reuses the running server.
        let reused = try await cluster.start(logger: self.logger)
        #expect(reused.pid == started.pid)

        try await Database.withClient(cluster.databaseConfiguration(), logger: self.logger) { client in
            let rows = try await client.query(
                "SELECT current_database(), current_user, current_setting('listen_addresses')"
            )
            for try await (database, user, listen) in rows.decode((String, String, String).self) {
                #expect(database == "bugle")
                #expect(user == "bugle")
                #expect(listen == "")
            }
        }

        try await cluster.stop()
        let stopped = try await cluster.status()
        #expect(stopped.isInitialized && !stopped.isRunning && stopped.pid == nil)
        try await cluster.stop()  // stopping a stopped cluster is fine

        // A restart keeps the data and the database.
        let restarted = try await cluster.start(logger: self.logger)
        #expect(restarted.isRunning && restarted.pid != started.pid)
        try await cluster.stop()
    }

    @Test func defaultClusterLocation() {
        let cluster = EmbeddedCluster.defaultCluster(environment: ["BUGLE_HOME": "/home/someone/.bugle", "HOME": "/ignored"])
        if geteuid() == 0 {
            #expect(cluster.directory.hasPrefix("/var/lib/bugle/"))
            #expect(cluster.directory.count == "/var/lib/bugle/".count + 16)
            #expect(cluster.systemUser == "postgres")
            let other = EmbeddedCluster.defaultCluster(environment: ["BUGLE_HOME": "/elsewhere"])
            #expect(other.directory != cluster.directory)
        } else {
            #expect(cluster.directory == "/home/someone/.bugle/postgres")
            #expect(cluster.systemUser == nil)
        }
        #expect(cluster.dataDirectory == cluster.directory + "/data")
        #expect(EmbeddedCluster.bugleHome(environment: ["HOME": "/home/x"]) == "/home/x/.bugle")
        let configuration = cluster.databaseConfiguration()
        #expect(configuration.username == "bugle" && configuration.database == "bugle")
        #expect(configuration.sslMode == .disable)
    }

    @Test func longDirectoriesGetAShortSocketPath() {
        let deep = "/tmp/" + String(repeating: "d", count: 120)
        let cluster = EmbeddedCluster(directory: deep)
        #expect(cluster.socketDirectory.hasPrefix("/tmp/bugle-"))
        #expect((cluster.databaseConfiguration().unixSocketPath ?? "").utf8.count < 100)
    }

    /// A fresh cluster directory under the test's scratch space; the cluster is stopped and removed by the caller.
    private func freshDirectory(_ name: String) throws -> String {
        let directory = NSTemporaryDirectory() + "bugle-\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        return directory
    }

    @Test("three first starts of one new cluster at once all succeed (two failed on CREATE DATABASE, SQLSTATE 23505)")
    func concurrentFirstStarts() async throws {
        let directory = try freshDirectory("race")
        let port = 5434
        defer {
            EmbeddedCluster(directory: directory, port: port, durability: .throwaway).stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: directory)
        }
        let logger = self.logger
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 {
                group.addTask { try await EmbeddedCluster(directory: directory, port: port, durability: .throwaway).start(logger: logger).isRunning }
            }
            for try await running in group { #expect(running) }
        }
    }

    @Test("an initdb that never finished is removed and done again; a cluster without its postgres database is named incomplete")
    func interruptedCreation() async throws {
        let directory = try freshDirectory("partial")
        let cluster = EmbeddedCluster(directory: directory, port: 5435, durability: .throwaway)
        defer {
            cluster.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: directory)
        }
        // What a killed initdb leaves: a partial directory with PG_VERSION (initdb writes it first).
        let partial = directory + "/data.initdb-partial"
        try FileManager.default.createDirectory(atPath: partial + "/base", withIntermediateDirectories: true)
        try "15\n".write(toFile: partial + "/PG_VERSION", atomically: true, encoding: .utf8)
        let started = try await cluster.start(logger: self.logger)
        #expect(started.isRunning)
        #expect(!FileManager.default.fileExists(atPath: partial))
        // A cluster an older Bugle left half-made in place: no `postgres` database.
        try await Database.withClient(cluster.databaseConfiguration(), logger: self.logger) { client in
            try await client.query("DROP DATABASE postgres", logger: self.logger)
        }
        let error = await #expect(throws: StoreError.self) { try await cluster.start(logger: self.logger) }
        #expect(error?.description.contains("is incomplete (it has no `postgres` database") == true, "\(String(describing: error))")
    }

    @Test("an existing socket directory in /tmp that others can write, or another account owns, is refused before anything starts")
    func sharedSocketDirectoryRefused() async throws {
        let directory = try freshDirectory("sock") + "/" + String(repeating: "d", count: 100)
        let cluster = EmbeddedCluster(directory: directory, port: 5436, durability: .throwaway)
        #expect(cluster.socketDirectory.hasPrefix("/tmp/bugle-"))
        defer {
            cluster.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: cluster.socketDirectory)
            try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent)
        }
        // Made first by someone else, writable by all.
        try FileManager.default.createDirectory(atPath: cluster.socketDirectory, withIntermediateDirectories: true)
        chmod(cluster.socketDirectory, 0o777)
        let error = await #expect(throws: StoreError.self) { try await cluster.start(logger: self.logger) }
        #expect(error?.description.contains("another account could answer for the database there") == true, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: cluster.dataDirectory + "/PG_VERSION"), "the cluster was created anyway")
    }
}
