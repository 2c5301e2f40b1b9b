import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Database")
struct DatabaseTests {
    private let logger = TestDatabase.logger

    @Test func unreachableServerFailsWithARedactedError() async throws {
        let configuration = try DatabaseConfiguration(
            url: "postgres://u:CANARY-PW@/db?host=/nonexistent-bugle-dir&connect_timeout=1"
        )
        do {
            _ = try await Database.withClient(configuration, logger: self.logger) { _ in 1 }
            Issue.record("expected a connection failure")
        } catch let error as StoreError {
            #expect(error.code == .connectionFailed)
            #expect(!error.description.contains("CANARY"))
            #expect(!String(reflecting: error).contains("CANARY"))
        }
    }

    /// A worker frozen inside a transaction must not hold its locks for ever: every Bugle session asks the server to
    /// end itself after 15 s idle in a transaction, and the server applies it. Sessions also run without JIT (the
    /// server default is on), which cost a claim 40 ms of compiling at 10,000,000 recipients.
    @Test func sessionsEndIdleTransactionsAfterFifteenSeconds() async throws {
        let configuration = try await TestDatabase.fresh()
        let (timeout, application, jit) = try await Database.withClient(configuration, logger: self.logger) { client in
            let rows = try await client.query(
                "SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('application_name'), current_setting('jit')",
                logger: self.logger
            )
            var values: (String, String, String) = ("", "", "")
            for try await row in rows.decode((String, String, String).self) { values = row }
            return values
        }
        #expect(timeout == "15s")
        #expect(!application.isEmpty)
        #expect(jit == "off")
    }

    /// RELIABILITY test #39: with `sslmode=require`, a server without TLS is refused, never used in plaintext.
    @Test func requireRefusesAServerWithoutTLS() async throws {
        let directory = NSTemporaryDirectory() + "bugle-tcp-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        let port = try freeLoopbackPort()
        let cluster = EmbeddedCluster(
            directory: directory,
            port: port,
            durability: .throwaway,
            serverSettings: ["listen_addresses": "127.0.0.1", "ssl": "off"]
        )
        defer {
            cluster.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: directory)
        }
        try await cluster.start(logger: self.logger)

        let base = "postgres://bugle:CANARY-PW@127.0.0.1:\(port)/bugle?connect_timeout=30&sslmode="
        for mode in ["disable", "prefer"] {
            let configuration = try DatabaseConfiguration(url: base + mode)
            let ssl = try await Database.withClient(configuration, logger: self.logger) { client in
                var value = ""
                for try await on in try await client.query("SHOW ssl").decode(String.self) { value = on }
                return value
            }
            #expect(ssl == "off")
        }
        for mode in ["require", "verify-ca", "verify-full"] {
            let configuration = try DatabaseConfiguration(url: base + mode)
            do {
                _ = try await Database.withClient(configuration, logger: self.logger) { _ in 1 }
                Issue.record("sslmode=\(mode) connected without TLS")
            } catch let error as StoreError {
                #expect(error.code == .connectionFailed)
                #expect(!error.description.contains("CANARY"))
            }
        }
    }

    /// Managed PostgreSQL services require TLS: a server with `ssl = on` and a certificate from a private CA, reached
    /// with each `sslmode`. verify-full connects only with the CA in `sslrootcert` and the host in the certificate;
    /// another CA is refused; verify-ca skips the host; require encrypts without checking (libpq's semantics).
    @Test("TLS to a real server: verify-full connects with the CA in sslrootcert (the session encrypted), and refuses another CA and a certificate for another host; verify-ca and require do not check the host")
    func tlsToAServerWithAPrivateCA() async throws {
        let directory = NSTemporaryDirectory() + "bugle-tls-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let material = try SimulatorCertificates.generate(in: directory + "/ca", port: 0)
        let other = try SimulatorCertificates.generate(in: directory + "/other-ca", port: 0)
        let elsewhere = try SimulatorCertificates.issue(
            in: material.directory, commonName: "db.elsewhere.example", purpose: .server(dnsNames: ["db.elsewhere.example"], ipv4Addresses: []))
        // PostgreSQL reads its key only when the account it runs as owns it, mode 0600.
        func serverFile(_ name: String, _ text: String) throws -> String {
            let path = directory + "/" + name
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            if let account = EmbeddedCluster.defaultSystemUser, let entry = getpwnam(account) {
                #expect(chown(path, entry.pointee.pw_uid, entry.pointee.pw_gid) == 0)
            }
            return path
        }
        let certificate = try serverFile("server.pem", material.serverCertificatePEM)
        let key = try serverFile("server.key", material.serverKeyPEM)
        let elsewhereCertificate = try serverFile("elsewhere.pem", elsewhere.certificatePEM)
        let elsewhereKey = try serverFile("elsewhere.key", elsewhere.keyPEM)
        /// A throwaway cluster serving `certificate`, its base URL, and the cluster (stopped by the caller).
        func start(_ name: String, certificate: String, key: String) async throws -> (EmbeddedCluster, String) {
            let port = try freeLoopbackPort()
            let cluster = EmbeddedCluster(
                directory: directory + "/" + name, port: port, durability: .throwaway,
                serverSettings: ["listen_addresses": "127.0.0.1", "ssl": "on", "ssl_cert_file": certificate, "ssl_key_file": key])
            try await cluster.start(logger: self.logger)
            return (cluster, "postgres://bugle:CANARY-PW@127.0.0.1:\(port)/bugle?connect_timeout=30")
        }
        func encrypted(_ url: String) async throws -> (ssl: Bool, version: String) {
            try await Database.withClient(try DatabaseConfiguration(url: url), logger: self.logger) { client in
                var row = (false, "")
                for try await (ssl, version) in try await client.query(
                    "SELECT ssl, coalesce(version, '') FROM pg_stat_ssl WHERE pid = pg_backend_pid()").decode((Bool, String).self) {
                    row = (ssl, version)
                }
                return row
            }
        }
        func refused(_ url: String) async throws {
            do {
                _ = try await encrypted(url)
                Issue.record("\(url) connected")
            } catch let error as StoreError {
                #expect(error.code == .connectionFailed, "\(url): \(error)")
                #expect(!error.description.contains("CANARY"))
            }
        }

        let (cluster, base) = try await start("cluster", certificate: certificate, key: key)
        defer { cluster.stopBlocking(mode: .immediate) }
        let verified = try await encrypted(base + "&sslmode=verify-full&sslrootcert=\(material.caFile)")
        #expect(verified.ssl && verified.version.hasPrefix("TLSv1."), "\(verified)")
        #expect(try await encrypted(base + "&sslmode=require").ssl)
        try await refused(base + "&sslmode=verify-full&sslrootcert=\(other.caFile)")
        try await refused(base + "&sslmode=verify-ca&sslrootcert=\(other.caFile)")

        // A server whose certificate, from the same CA, names another host.
        let (misnamed, misnamedBase) = try await start("misnamed", certificate: elsewhereCertificate, key: elsewhereKey)
        defer { misnamed.stopBlocking(mode: .immediate) }
        try await refused(misnamedBase + "&sslmode=verify-full&sslrootcert=\(material.caFile)")
        #expect(try await encrypted(misnamedBase + "&sslmode=verify-ca&sslrootcert=\(material.caFile)").ssl)
    }
}
