import BugleStore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// PgBouncer (Debian package `pgbouncer`) on 127.0.0.1 in front of a test server, in transaction pooling mode by
/// default: each transaction, and each statement outside one, may run on a different server session.
///
/// `.ci/run` installs it and sets `BUGLE_REQUIRE_PGBOUNCER=1`, which turns a missing pooler into a failure; elsewhere a
/// suite that needs it is skipped and says why. Run as root it drops to the `postgres` account (its `user` setting):
/// PgBouncer refuses to run as root, and the test clusters run as that account then.
struct PgBouncer {
    /// The pgbouncer binary: `PATH`, then the Debian location.
    static let executable = ExternalServer.locate("pgbouncer", also: ["/usr/sbin/pgbouncer", "/usr/local/bin/pgbouncer"])

    /// Whether a suite that needs PgBouncer runs: it is installed, or its absence must fail the run.
    static var enabled: Bool { ExternalServer.enabled(executable, requirement: "BUGLE_REQUIRE_PGBOUNCER") }
    static let reason: Comment = "pgbouncer is not installed (apt-get install -y pgbouncer); .ci/run installs it"

    /// The TCP port it listens on.
    let port: Int
    private let server: ExternalServer

    /// `server`'s database `database`, reached through the pooler (plain TCP on loopback).
    func configuration(database: String?, of server: DatabaseConfiguration) -> DatabaseConfiguration {
        DatabaseConfiguration(endpoint: .tcp(host: "127.0.0.1", port: port), username: server.username, database: database, sslMode: .disable)
    }

    /// What PgBouncer logged so far.
    func log() -> String { server.output() }

    /// Starts PgBouncer in front of `server` (any database on it) with `poolMode`, runs `body`, and stops it however
    /// `body` ends.
    static func with<T>(server: DatabaseConfiguration, poolMode: String = "transaction", _ body: (PgBouncer) async throws -> T) async throws -> T {
        try await ExternalServer.using(try await start(server: server, poolMode: poolMode), stop: { $0.server.stop() }, body)
    }

    private static func start(server: DatabaseConfiguration, poolMode: String) async throws -> PgBouncer {
        guard let executable else { throw ExternalServer.Failure(description: "pgbouncer is required (BUGLE_REQUIRE_PGBOUNCER=1) but not installed") }
        let directory = NSTemporaryDirectory() + "bugle-pgbouncer-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let target: String
        switch server.endpoint {
        case .unixSocket(let socketDirectory, let port): target = "host=\(socketDirectory) port=\(port)"
        case .tcp(let host, let port): target = "host=\(host) port=\(port)"
        }
        let password = server.password.map { " password=\($0)" } ?? ""
        let port = try freeLoopbackPort()
        let settings = """
            [databases]
            * = \(target) user=\(server.username)\(password)

            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(directory)/users.txt
            pool_mode = \(poolMode)
            max_client_conn = 500
            default_pool_size = 20
            \(geteuid() == 0 ? "user = postgres" : "")
            """
        try settings.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        try "\"\(server.username)\" \"\"\n".write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        let bouncer = try await ExternalServer.start(
            executable, [directory + "/pgbouncer.ini"], port: port, directory: directory, log: "pgbouncer.log", what: "pgbouncer")
        return PgBouncer(port: port, server: bouncer)
    }
}
