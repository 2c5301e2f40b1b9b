import Foundation
import PostgresNIO
import Testing

@testable import BugleStore

@Suite("DatabaseConfiguration")
struct DatabaseConfigurationTests {
    @Test("a process tag ends application_name, which stays printable ASCII within the server's 63 bytes")
    func taggingSessions() throws {
        let plain = try DatabaseConfiguration(url: "postgres://u@localhost/db").taggingSessions("12:34")
        #expect(plain.applicationName == "bugle 12:34")
        let named = try DatabaseConfiguration(url: "postgres://u@localhost/db?application_name=reports-\u{e9}t\u{e9}")
            .taggingSessions("12:34")
        #expect(named.applicationName == "reports-t 12:34")
        let long = try DatabaseConfiguration(url: "postgres://u@localhost/db?application_name=" + String(repeating: "x", count: 80))
            .taggingSessions("123456:4294967295")
        #expect(long.applicationName.utf8.count == 63)
        #expect(long.applicationName.hasSuffix(" 123456:4294967295"))
    }

    @Test func parsesAFullURL() throws {
        let configuration = try DatabaseConfiguration(
            url: "postgresql://alice:s3cr%40t%2Fpw@db.example.com:6543/app?sslmode=verify-full&sslrootcert=/etc/ca.pem"
        )
        #expect(configuration.endpoint == .tcp(host: "db.example.com", port: 6543))
        #expect(configuration.username == "alice")
        #expect(configuration.password == "s3cr@t/pw")
        #expect(configuration.database == "app")
        #expect(configuration.sslMode == .verifyFull)
        #expect(configuration.sslRootCertificatePath == "/etc/ca.pem")
    }

    @Test func appliesDefaults() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://bob@localhost")
        #expect(configuration.endpoint == .tcp(host: "localhost", port: 5432))
        #expect(configuration.password == nil)
        #expect(configuration.database == nil)
        #expect(configuration.sslMode == .prefer)
    }

    @Test func parsesIPv6AndPasswordWithColon() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://u:a:b@[::1]:5433/db")
        #expect(configuration.endpoint == .tcp(host: "::1", port: 5433))
        #expect(configuration.password == "a:b")
    }

    @Test func parsesUnixSocketForms() throws {
        let query = try DatabaseConfiguration(url: "postgres://bugle@/bugle?host=/tmp/pg%20sock&port=5433")
        #expect(query.endpoint == .unixSocket(directory: "/tmp/pg sock", port: 5433))
        #expect(query.sslMode == .disable)
        #expect(query.unixSocketPath == "/tmp/pg sock/.s.PGSQL.5433")

        let encoded = try DatabaseConfiguration(url: "postgres://bugle@%2Fvar%2Frun%2Fpostgresql/bugle?sslmode=prefer")
        #expect(encoded.endpoint == .unixSocket(directory: "/var/run/postgresql", port: 5432))
        #expect(encoded.sslMode == .disable)

        let embedded = DatabaseConfiguration.unixSocket(directory: "/x/socket", port: 5432, username: "bugle", database: "bugle")
        #expect(embedded.unixSocketPath == "/x/socket/.s.PGSQL.5432")
        #expect(embedded.sslMode == .disable)
    }

    @Test(arguments: ["require", "verify-ca", "verify-full"])
    func refusesTLSOverUnixSocket(mode: String) {
        #expect(throws: StoreError.self) {
            try DatabaseConfiguration(url: "postgres://bugle@/bugle?host=/tmp&sslmode=\(mode)")
        }
    }

    @Test func redactsThePassword() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://alice:CANARY-PASSWORD@db:5432/app?sslmode=require")
        #expect(!configuration.description.contains("CANARY"))
        #expect(!String(reflecting: configuration).contains("CANARY"))
        #expect(!"\(configuration)".contains("CANARY"))
        #expect(configuration.description == "postgres://alice:***@db:5432/app?sslmode=require")
    }

    @Test(arguments: [
        ("mysql://u:CANARYpw@h/db", "scheme"),
        ("postgres://u:CANARY/pw@h/db", "port"),
        ("postgres://u:CANARYpw@h:99999/db", "port"),
        ("postgres://u:CANARYpw@h/db?sslmode=sometimes", "sslmode"),
        ("postgres://u:CANARYpw@h/db?colour=blue", "query parameter 'colour'"),
        ("postgres://u:CANARY#pw@h/db", "fragment"),
        ("postgres://u:CANARY%zzpw@h/db", "password"),
        ("postgres://u:CANARYpw@h/db?connect_timeout=soon", "connect_timeout"),
    ])
    func errorsNameThePartButNeverThePassword(url: String, part: String) {
        do {
            _ = try DatabaseConfiguration(url: url)
            Issue.record("expected \(part) error")
        } catch let error as StoreError {
            #expect(error.code == .invalidDatabaseURL)
            #expect(error.description.contains(part), "\(error)")
            #expect(!error.description.contains("CANARY"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func mapsSSLModes() throws {
        func plan(_ query: String) throws -> TLSPlan {
            try DatabaseConfiguration(url: "postgres://u@db.example.com/app\(query)").tlsPlan
        }
        #expect(try plan("?sslmode=disable") == TLSPlan(negotiation: .disable, verification: .none))
        #expect(try plan("") == TLSPlan(negotiation: .prefer, verification: .none))
        #expect(try plan("?sslmode=allow") == TLSPlan(negotiation: .prefer, verification: .none))
        #expect(try plan("?sslmode=prefer") == TLSPlan(negotiation: .prefer, verification: .none))
        #expect(try plan("?sslmode=require") == TLSPlan(negotiation: .require, verification: .none))
        #expect(
            try plan("?sslmode=require&sslrootcert=/ca.pem")
                == TLSPlan(negotiation: .require, verification: .chainOnly, trustRootsFile: "/ca.pem")
        )
        #expect(try plan("?sslmode=verify-ca") == TLSPlan(negotiation: .require, verification: .chainOnly))
        #expect(
            try plan("?sslmode=verify-full&sslrootcert=/ca.pem")
                == TLSPlan(negotiation: .require, verification: .full, trustRootsFile: "/ca.pem")
        )
        #expect(try plan("?sslmode=verify-full&sslrootcert=system") == TLSPlan(negotiation: .require, verification: .full))
        // Building the postgres-nio configuration succeeds for every TCP mode.
        for mode in DatabaseConfiguration.SSLMode.allCases {
            let configuration = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=\(mode.rawValue)")
            _ = try configuration.postgresClientConfiguration()
        }
    }

    @Test func keepsApplicationNameAndTimeout() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://u@h/app?application_name=pushrunner&connect_timeout=3")
        #expect(configuration.applicationName == "pushrunner")
        #expect(configuration.connectTimeout == .seconds(3))
        let client = try configuration.postgresClientConfiguration()
        #expect(client.options.connectTimeout == .seconds(3))
        #expect(client.host == "h")
    }

    @Test("sslcert and sslkey: read from the URL as a pair, shown in the description; one alone is an error; a key others can read is refused by name, as libpq does")
    func clientCertificate() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=verify-full&sslcert=/c/client.pem&sslkey=/c/client.key")
        #expect(configuration.sslCertificatePath == "/c/client.pem" && configuration.sslKeyPath == "/c/client.key")
        #expect(configuration.description.contains("sslcert=/c/client.pem&sslkey=/c/client.key"), "\(configuration)")
        for lonely in ["sslcert=/c/client.pem", "sslkey=/c/client.key"] {
            #expect(throws: StoreError.self) { try DatabaseConfiguration(url: "postgres://u@h/app?\(lonely)") }
        }
        let directory = NSTemporaryDirectory() + "bugle-sslkey-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = directory + "/client.key"
        try "-----BEGIN PRIVATE KEY-----\nnot-a-key\n-----END PRIVATE KEY-----\n".write(toFile: key, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        let open = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=require&sslcert=\(directory)/client.pem&sslkey=\(key)")
        do {
            _ = try open.postgresClientConfiguration()
            Issue.record("a key readable by others was accepted")
        } catch let error as StoreError {
            #expect(error.description.contains("sslkey \(key) is readable by others (mode 644): chmod 600 it"), "\(error)")
            #expect(!error.description.contains("not-a-key"))
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        // Now the certificate file (missing) is the problem, named; then the key's contents, never quoted.
        do {
            _ = try open.postgresClientConfiguration()
            Issue.record("a missing certificate was accepted")
        } catch let error as StoreError {
            #expect(error.description.contains("cannot read sslcert \(directory)/client.pem"), "\(error)")
        }
        // With sslmode=disable neither file is read.
        _ = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=disable&sslcert=/nowhere.pem&sslkey=/nowhere.key").postgresClientConfiguration()
    }
}
