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
}
