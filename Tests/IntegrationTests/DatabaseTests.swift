import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

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
}
