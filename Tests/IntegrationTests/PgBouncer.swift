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

    /// What clients must bring: TLS (PgBouncer's certificate and key, PEM), and either a password it checks with
    /// SCRAM-SHA-256 or, given `clientCAPEM`, a client certificate from that CA whose common name is the user name
    /// (`auth_type = cert`).
    struct ClientSecurity {
        var certificatePEM: String
        var keyPEM: String
        var password: String = ""
        var clientCAPEM: String? = nil
    }

    /// Starts PgBouncer in front of `server` (any database on it) with `poolMode`, runs `body`, and stops it however
    /// `body` ends. With `security`, clients must use TLS (`client_tls_sslmode = require`) and SCRAM-SHA-256.
    static func with<T>(
        server: DatabaseConfiguration, poolMode: String = "transaction", security: ClientSecurity? = nil, _ body: (PgBouncer) async throws -> T
    ) async throws -> T {
        try await ExternalServer.using(try await start(server: server, poolMode: poolMode, security: security), stop: { $0.server.stop() }, body)
    }

    private static func start(server: DatabaseConfiguration, poolMode: String, security: ClientSecurity?) async throws -> PgBouncer {
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
        var clientSettings = "auth_type = trust"
        if let security {
            // Run as root, PgBouncer runs as `postgres`: its key must be that account's.
            try security.certificatePEM.write(toFile: directory + "/server.pem", atomically: true, encoding: .utf8)
            try security.keyPEM.write(toFile: directory + "/server.key", atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory + "/server.key")
            if geteuid() == 0, let entry = getpwnam("postgres") {
                for file in ["server.pem", "server.key"] { _ = chown(directory + "/" + file, entry.pointee.pw_uid, entry.pointee.pw_gid) }
            }
            clientSettings = """
                client_tls_cert_file = \(directory)/server.pem
                client_tls_key_file = \(directory)/server.key
                """
            if let clientCAPEM = security.clientCAPEM {
                try clientCAPEM.write(toFile: directory + "/client-ca.pem", atomically: true, encoding: .utf8)
                clientSettings += "\nauth_type = cert\nclient_tls_sslmode = verify-full\nclient_tls_ca_file = \(directory)/client-ca.pem"
            } else {
                clientSettings += "\nauth_type = scram-sha-256\nclient_tls_sslmode = require"
            }
        }
        let settings = """
            [databases]
            * = \(target) user=\(server.username)\(password)

            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            \(clientSettings)
            auth_file = \(directory)/users.txt
            pool_mode = \(poolMode)
            max_client_conn = 500
            default_pool_size = 20
            \(geteuid() == 0 ? "user = postgres" : "")
            """
        try settings.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        try "\"\(server.username)\" \"\(security?.password ?? "")\"\n".write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        let bouncer = try await ExternalServer.start(
            executable, [directory + "/pgbouncer.ini"], port: port, directory: directory, log: "pgbouncer.log", what: "pgbouncer")
        return PgBouncer(port: port, server: bouncer)
    }
}
