import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the built `bugle` executable as a user would and checks exit codes, output and side effects.
@Suite("bugle CLI (built executable, real PostgreSQL)")
struct CLITests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `bugle` executable built beside this test bundle (debug, or the optimized build of the timing phase).
    static let executable: URL = {
        if let bundle = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let beside = URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("bugle")
            if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        }
        return packageRoot.appendingPathComponent(".build/debug/bugle")
    }()

    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs the built executable to completion. The blocking wait happens on a dispatch thread, never on one
    /// of the few threads of Swift's cooperative pool that the other tests' tasks need.
    /// Runs the built `bugle` with `arguments` in `directory` (default: the package root).
    /// Runs the built `bugle` with `arguments`; `launcher` (a command and its arguments, such as `setpriv` dropping to
    /// another user) runs it instead when given.
    static func bugle(_ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:], launcher: [String] = []) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try runBlocking(arguments, in: directory ?? packageRoot, environment: environment, launcher: launcher) })
            }
        }
    }

    private static func runBlocking(_ arguments: [String], in directory: URL, environment: [String: String], launcher: [String]) throws -> Output {
        let process = Process()
        if let command = launcher.first {
            process.executableURL = URL(fileURLWithPath: command)
            process.arguments = launcher.dropFirst() + [executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.currentDirectoryURL = directory
        process.environment = childEnvironment(environment)
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Drain stderr on its own thread so a chatty child cannot fill one pipe while we read the other.
        let stderrBox = NIOLockedValueBox(Data())
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            let data = err.fileHandleForReading.readDataToEndOfFile()
            stderrBox.withLockedValue { $0 = data }
            group.leave()
        }
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        let stderr = stderrBox.withLockedValue { $0 }
        process.waitUntilExit()
        return Output(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// This process's environment for a child `bugle`, with `extra` added. A developer's own database settings
    /// (Bugle's URLs, libpq's `PG…` variables) must not reach the child: the tests name what they use.
    static func childEnvironment(_ extra: [String: String]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for variable in ["BUGLE_DATABASE_URL", "BUGLE_SEGMENT_DATABASE_URL"] { environment[variable] = nil }
        for variable in environment.keys where variable.hasPrefix("PG") { environment[variable] = nil }
        return environment.merging(extra) { $1 }
    }

    static func url(_ configuration: DatabaseConfiguration) throws -> String {
        switch configuration.endpoint {
        case .unixSocket(let directory, let port):
            return "postgres://\(configuration.username)@/\(configuration.database ?? "bugle")?host=\(directory)&port=\(port)"
        case .tcp(let host, let port):
            return "postgres://\(configuration.username)@\(host):\(port)/\(configuration.database ?? "bugle")?sslmode=disable"
        }
    }

    /// A new login (not a superuser, no CREATEROLE) owning a new database, migrated by `bugle db migrate` through that
    /// login: Bugle given a login of its own, as an operator sets it up without a superuser.
    /// - Returns: The login's configuration on its database.
    static func ownedDatabase() async throws -> DatabaseConfiguration {
        let server = try await TestDatabase.server()
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let (role, name) = ("bugle_owner_\(suffix)", "bugle_owned_\(suffix)")
        try await Database.withClient(server, logger: TestDatabase.logger) { client in
            try await client.query("CREATE ROLE \(unescaped: role) LOGIN NOSUPERUSER NOCREATEROLE", logger: TestDatabase.logger)
            try await client.query("CREATE DATABASE \(unescaped: name) OWNER \(unescaped: role)", logger: TestDatabase.logger)
        }
        var owner = server.with(database: name)
        owner.username = role
        let migrated = try await bugle(["db", "migrate"], environment: ["BUGLE_DATABASE_URL": try url(owner)])
        try #require(migrated.status == 0, "\(migrated.stderr)")
        return owner
    }

    /// A second login (no privilege on anything of Bugle's) on `owner`'s server, logging in to `owner`'s database.
    static func unprivilegedLogin(on owner: DatabaseConfiguration) async throws -> DatabaseConfiguration {
        let server = try await TestDatabase.server()
        let role = "bugle_other_\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        try await Database.withClient(server, logger: TestDatabase.logger) { client in
            try await client.query("CREATE ROLE \(unescaped: role) LOGIN NOSUPERUSER NOCREATEROLE", logger: TestDatabase.logger)
        }
        var other = owner
        other.username = role
        return other
    }

    static func temporaryFile(_ name: String, _ contents: String) throws -> String {
        let path = try TestScratch.directory(prefix: "bugle-cli") + "/" + name
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("--help explains the exit codes; every subcommand has help")
    func help() async throws {
        let root = try await Self.bugle(["--help"])
        #expect(root.status == 0)
        #expect(root.stdout.contains("Exit codes: 0 completed; 1 usage or validation error"))
        for command in ["run", "validate", "report", "runs", "db", "devices", "demo", "resume", "worker", "tick"] {
            let output = try await Self.bugle([command, "--help"])
            #expect(output.status == 0, "\(command) --help")
            #expect(output.stdout.contains("USAGE"), "\(command) --help")
            // ArgumentParser prints an option's default itself; help text that says it too shows it twice.
            let text = output.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            if let repeated = text.firstMatch(of: /\(default: ([^)]*)\) \(default: \1\)/) {
                Issue.record("\(command) --help shows a default twice: \(repeated.output.0)")
            }
        }
        let worker = try await Self.bugle(["worker", "--help"])
        let workerText = worker.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(workerText.contains("--lease-ttl <lease-ttl>"), "\(worker.stdout)")
        #expect(workerText.contains("(default: 30)") && workerText.contains("(default: 600)") && workerText.contains("(default: 300)"), "\(worker.stdout)")
    }

    /// `bugle runs` and `bugle report` migrated a writable database they were pointed at: a listing aimed at the wrong
    /// database created Bugle's schema there.
    /// A login without privileges on Bugle's schema (another role than the one that ran `bugle db migrate`): the
    /// server's `permission denied for table schema_migrations` (SQLSTATE 42501) was all `db migrate`, `run` and `pause`
    /// said; they now say which login to use.
    @Test("a login without privileges on the bugle schema: db migrate, run and pause say to use the login that owns it")
    func loginWithoutPrivileges() async throws {
        let owner = try await Self.ownedDatabase()
        let other = try await Self.unprivilegedLogin(on: owner)
        // The fixture is for its providers file (simulators): `run` loads the providers before it migrates.
        try await CrashFixture.with(devices: 40) { fixture in
            let campaign = try Self.temporaryFile(
                "privileges.yaml",
                """
                name: privileges
                notification_type: privileges
                dedupe: none
                providers: \(fixture.environment.material.providersFile)
                segment:
                  sql: SELECT id AS device_id, user_id, token, platform FROM bugle.devices
                message:
                  default_locale: en
                  locales: { en: { title: Hello, body: Privileges } }
                """
            )
            for arguments in [["db", "migrate"], ["run", campaign, "--quiet"], ["pause", "1"]] {
                let output = try await Self.bugle(arguments, environment: ["BUGLE_DATABASE_URL": try Self.url(other)])
                #expect(output.status == 2, "\(arguments): \(output.stderr)")
                #expect(output.stderr.contains("permission denied for "), "\(arguments): \(output.stderr)")
                #expect(output.stderr.contains("connect as the login that owns schema bugle"), "\(arguments): \(output.stderr)")
            }
        }
    }

    @Test("runs and report pointed at a database with no Bugle schema say so and create nothing")
    func readCommandsCreateNoSchema() async throws {
        let server = try await TestDatabase.server()
        let name = "bugle_empty_\(UInt32.random(in: 0...UInt32.max))"
        try await Database.createDatabase(named: name, using: server, logger: TestDatabase.logger)
        let configuration = server.with(database: name)
        let environment = ["BUGLE_DATABASE_URL": try Self.url(configuration)]
        for arguments in [["runs"], ["report", "1", "--csv", "-"]] {
            let output = try await Self.bugle(arguments, environment: environment)
            #expect(output.status != 0, "\(arguments) \(output.stdout)")
            #expect(output.stderr.contains("this database has no Bugle schema"), "\(arguments) \(output.stderr)")
        }
        let created = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            let rows = try await client.query("SELECT to_regnamespace('bugle') IS NOT NULL", logger: TestDatabase.logger)
            for try await (exists,) in rows.decode((Bool,).self) { return exists }
            return true
        }
        #expect(!created, "the schema was created by a read command")
    }

    @Test("runs and report pointed by URL at a database whose Bugle schema lacks a migration say so and apply nothing")
    func readCommandsMigrateNothing() async throws {
        let configuration = try await TestDatabase.fresh()
        let environment = ["BUGLE_DATABASE_URL": try Self.url(configuration)]
        let count: PostgresQuery = "SELECT count(*)::bigint FROM bugle.schema_migrations"
        let (latest, before) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client -> (Int64, Int64?) in
            let latest = try await LedgerTestSupport.scalar(client, "SELECT max(version)::bigint FROM bugle.schema_migrations", as: Int64.self) ?? 0
            try await client.query("DELETE FROM bugle.schema_migrations WHERE version = \(unescaped: String(latest))", logger: TestDatabase.logger)
            return (latest, try await LedgerTestSupport.scalar(client, count, as: Int64.self))
        }
        for arguments in [["runs"], ["report", "1", "--csv", "-"]] {
            let output = try await Self.bugle(arguments, environment: environment)
            #expect(output.status != 0, "\(arguments) \(output.stdout)")
            #expect(output.stderr.contains("lacks 1 migration(s) from version \(latest)"), "\(arguments) \(output.stderr)")
            #expect(output.stderr.contains("`bugle db migrate`"), "\(arguments) \(output.stderr)")
        }
        let after = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, count, as: Int64.self)
        }
        #expect(after == before, "a read command applied a migration")
    }

    @Test("validate: a good campaign exits 0; a bad one exits 1 naming file:line:column and the key")
    func validate() async throws {
        let good = try await Self.bugle(["validate", "campaigns/spring-sale.yaml"])
        #expect(good.status == 0)
        let bad = try Self.temporaryFile(
            "bad.yaml",
            """
            name: x
            notification_type: promo
            segment:
              sql: SELECT 1
              page_sise: 10
            message:
              default_locale: en
              locales: { en: { title: a, body: b } }
            """
        )
        let output = try await Self.bugle(["validate", bad])
        #expect(output.status == 1)
        #expect(output.stderr.contains("\(bad):5:3: segment.page_sise"))
        // No providers file named anywhere: ok, with a note that nothing was checked of the lanes (it said nothing).
        let unnamed = try Self.temporaryFile(
            "no-providers.yaml",
            """
            name: x
            notification_type: promo
            segment:
              sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d
            message:
              default_locale: en
              locales: { en: { title: a, body: b } }
            """
        )
        let noted = try await Self.bugle(["validate", unnamed, "--offline"])
        #expect(noted.status == 0, "\(noted.stderr)")
        #expect(noted.stderr.contains("note: \(unnamed): no providers file (`providers:` in the campaign or --providers)"), "\(noted.stderr)")
    }

    @Test("validate prints how each lane (legacy APNs too) reaches its endpoint: through https_proxy (credentials hidden), directly for no_proxy hosts; an unset proxy_credentials_env exits 1")
    func validateRoutes() async throws {
        let keys = try LegacyTestEnvironment()
        defer { keys.remove() }
        let providers = try Self.temporaryFile(
            "providers.yaml",
            """
            apns:
              endpoint: production
              topic: com.example.app
              auth: { token: { team_id: ABCDE12345, key_id: KEY1234567, key_file: \(keys.material.keyFile) } }
            fcm:
              service_account_file: \(keys.material.fcmServiceAccountFile)
            legacy_apns:
              host: gateway.push.apple.com
              cert_file: \(keys.client.certificateFile)
              key_file: \(keys.client.keyFile)

            """
        )
        let environment = ["https_proxy": "http://alice:pr0xy-s3cret@proxy.example:3128", "no_proxy": ".googleapis.com"]
        let output = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", providers], environment: environment)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains("\(providers): apns: https://api.push.apple.com:443 through the proxy http://proxy.example:3128 (with credentials)"), "\(output.stdout)")
        #expect(output.stdout.contains("\(providers): fcm: https://fcm.googleapis.com:443 directly"), "\(output.stdout)")
        #expect(
            output.stdout.contains(
                "\(providers): legacy_apns: gateway.push.apple.com:2195 (feedback :2196) through the proxy http://proxy.example:3128 (with credentials)"),
            "\(output.stdout)")
        #expect(!(output.stdout + output.stderr).contains("pr0xy-s3cret"))
        #expect(output.stdout.contains("\(providers): credentials load (apns, fcm, legacy_apns)"), "\(output.stdout)")

        let named = try Self.temporaryFile(
            "providers.yaml",
            try String(contentsOfFile: providers, encoding: .utf8)
                .replacingOccurrences(of: "apns:\n", with: "apns:\n  proxy: http://10.0.0.5:3128\n  proxy_credentials_env: BUGLE_TEST_UNSET_PROXY\n"))
        let unset = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", named])
        #expect(unset.status == 1)
        // At the variable's line, column and key (it named only the file and the section).
        #expect(
            unset.stderr.contains("\(named):3:26: apns.proxy_credentials_env: proxy_credentials_env names BUGLE_TEST_UNSET_PROXY, which is not set"),
            "\(unset.stderr)")

        // An https:// proxy and the CA its certificate is checked against; a proxy_ca_file that is not there exits 1.
        let caFile = keys.material.caFile
        let secure = try Self.temporaryFile(
            "providers.yaml",
            try String(contentsOfFile: providers, encoding: .utf8)
                .replacingOccurrences(of: "fcm:\n", with: "fcm:\n  proxy: https://tls-proxy.example\n  proxy_ca_file: \(caFile)\n"))
        let routed = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", secure])
        #expect(routed.status == 0, "\(routed.stderr)")
        #expect(
            routed.stdout.contains("fcm: https://fcm.googleapis.com:443 through the proxy https://tls-proxy.example:443 (its certificate checked against proxy_ca_file \(caFile) too)"),
            "\(routed.stdout)")
        let missing = try Self.temporaryFile(
            "providers.yaml", try String(contentsOfFile: secure, encoding: .utf8).replacingOccurrences(of: caFile, with: caFile + ".missing"))
        let unreadable = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", missing])
        #expect(unreadable.status == 1)
        #expect(unreadable.stderr.contains("\(missing):7:18: fcm.proxy_ca_file: proxy_ca_file \(caFile).missing cannot be read"), "\(unreadable.stderr)")
    }

    /// RELIABILITY.md's bad-input catalogue: a credential that `bugle run` would refuse is refused by `bugle validate`
    /// already, naming the file and section; an `ios_transport` whose section the providers file lacks too.
    @Test("validate loads the credentials as run does: a missing, wrong or readable key file and a transport without its section exit 1")
    func validateCredentials() async throws {
        let keys = try LegacyTestEnvironment()
        defer { keys.remove() }
        func providers(keyFile: String, account: String? = nil) throws -> String {
            try Self.temporaryFile(
                "providers.yaml",
                """
                apns:
                  endpoint: production
                  topic: com.example.app
                  auth: { token: { team_id: ABCDE12345, key_id: KEY1234567, key_file: \(keyFile) } }
                fcm:
                  service_account_file: \(account ?? keys.material.fcmServiceAccountFile)

                """)
        }
        let good = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", try providers(keyFile: keys.material.keyFile)])
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("credentials load (apns, fcm)"), "\(good.stdout)")

        let missingPath = keys.directory + "/nokey.p8"
        let missing = try providers(keyFile: missingPath)
        let refused = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", missing])
        #expect(refused.status == 1)
        // The line and key of the path the error is about (it named the file and the section only).
        #expect(refused.stderr.contains("\(missing):4:") && refused.stderr.contains(": apns.auth.token.key_file: "), "\(refused.stderr)")
        #expect(refused.stderr.contains("nokey.p8"), "\(refused.stderr)")

        let wrongType = try providers(keyFile: keys.material.fcmServiceAccountFile)
        let wrong = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", wrongType])
        #expect(wrong.status == 1, "\(wrong.stdout)")
        #expect(wrong.stderr.contains("\(wrongType):4:") && wrong.stderr.contains(": apns.auth.token.key_file: "), "\(wrong.stderr)")
        #expect(!wrong.stderr.contains("PRIVATE KEY"), "key material in \(wrong.stderr)")

        let readable = keys.directory + "/readable.p8"
        try FileManager.default.copyItem(atPath: keys.material.keyFile, toPath: readable)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: readable)
        let readableProviders = try providers(keyFile: readable)
        let open = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", readableProviders])
        #expect(open.status == 1)
        #expect(open.stderr.contains("readable by other users"), "\(open.stderr)")
        let allowed = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", readableProviders, "--allow-readable-keys"])
        #expect(allowed.status == 0, "\(allowed.stderr)")

        let noAccount = try await Self.bugle(
            ["validate", "campaigns/spring-sale.yaml", "--providers", try providers(keyFile: keys.material.keyFile, account: keys.directory + "/none.json")])
        #expect(noAccount.status == 1)
        #expect(noAccount.stderr.contains(":6:") && noAccount.stderr.contains(": fcm.service_account_file: "), "\(noAccount.stderr)")
        #expect(noAccount.stderr.contains("none.json"), "\(noAccount.stderr)")

        // ios_transport: legacy with no legacy_apns: section — refused by validate, and by run before anything is written.
        let legacy = try Self.temporaryFile(
            "legacy.yaml",
            try String(contentsOfFile: "campaigns/spring-sale.yaml", encoding: .utf8).replacingOccurrences(of: "\nmessage:", with: "\nios_transport: legacy\nmessage:"))
        let transport = try await Self.bugle(["validate", legacy, "--providers", try providers(keyFile: keys.material.keyFile)])
        #expect(transport.status == 1)
        #expect(transport.stderr.contains("ios_transport: legacy sends iOS devices through its legacy_apns lane") && transport.stderr.contains("no `legacy_apns:` section"), "\(transport.stderr)")
        let run = try await Self.bugle(
            ["run", legacy, "--providers", try providers(keyFile: keys.material.keyFile), "--database-url", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"])
        #expect(run.status == 1, "the check comes before the database: \(run.stderr)")
        #expect(run.stderr.contains("no `legacy_apns:` section"), "\(run.stderr)")
    }

    @Test("a PKCS#12 bundle without its certificate or its key is exit 1 naming p12_file, not a crash (swift-nio-ssl traps on it)")
    func incompletePKCS12() async throws {
        let keys = try LegacyTestEnvironment()
        defer { keys.remove() }
        let client = try SimulatorCertificates.generateLegacyClient(in: keys.directory)
        let passphrase = "bundle passphrase"
        let made = [
            ("certonly", ["-nokeys", "-in", client.certificateFile]),
            ("keyonly", ["-nocerts", "-inkey", client.keyFile]),
            ("both", ["-in", client.certificateFile, "-inkey", client.keyFile]),
        ]
        for (name, arguments) in made {
            let bundle = keys.directory + "/\(name).p12"
            #expect(try OpenSSLTool.run(["pkcs12", "-export"] + arguments + ["-out", bundle, "-passout", "env:PASS"], passphrase: passphrase) == 0)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: bundle)
            let providers = try Self.temporaryFile(
                "providers.yaml",
                """
                apns:
                  endpoint: production
                  topic: com.example.app
                  auth: { certificate: { p12_file: \(bundle), passphrase_env: BUGLE_TEST_P12 } }

                """)
            let output = try await Self.bugle(
                ["validate", "campaigns/ios-launch.yaml", "--providers", providers, "--offline"], environment: ["BUGLE_TEST_P12": passphrase])
            if name == "both" {
                #expect(output.status == 0, "\(output.stderr)")
                #expect(output.stdout.contains("credentials load (apns)"), "\(output.stdout)")
            } else {
                #expect(output.status == 1, "\(name): \(output.status) \(output.stderr)")
                #expect(output.stderr.contains("\(providers):4:") && output.stderr.contains("apns.auth.certificate.p12_file: "), "\(output.stderr)")
                #expect(output.stderr.contains("holds no certificate or no private key"), "\(output.stderr)")
                #expect(!output.stderr.contains("Fatal error") && !output.stderr.contains(passphrase), "\(output.stderr)")
            }
        }
    }

    /// A FIFO named as `p12_file` held the PKCS#12 probe, and Bugle, for ever (the probe opened it before any check);
    /// a DER certificate or key was "cannot read PATH" with no reason although the file reads; an unset passphrase
    /// variable named its key twice; a dry run took a `--providers` file that does not exist without a word.
    @Test("certificate files that are not what they should be: a FIFO bundle is refused at once, DER is named as DER, a dry run's --providers must exist")
    func certificateFilesOfTheWrongKind() async throws {
        let keys = try LegacyTestEnvironment()
        defer { keys.remove() }
        let client = try SimulatorCertificates.generateLegacyClient(in: keys.directory)
        func providers(_ auth: String) throws -> String {
            try Self.temporaryFile("providers.yaml", "apns:\n  endpoint: production\n  topic: com.example.app\n  auth: { certificate: \(auth) }\n")
        }
        let fifo = keys.directory + "/bundle.p12"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Should the probe open it after all, a writer ends the wait so the suite goes on (and the checks below fail).
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 60)
            let descriptor = open(fifo, O_WRONLY | O_NONBLOCK)
            if descriptor >= 0 { close(descriptor) }
        }
        let fifoRun = try await Self.bugle(
            ["validate", "campaigns/ios-launch.yaml", "--providers", try providers("{ p12_file: \(fifo), passphrase_env: BUGLE_TEST_P12 }"), "--offline"],
            environment: ["BUGLE_TEST_P12": "x"])
        #expect(fifoRun.status == 1 && fifoRun.stderr.contains("not a regular file"), "\(fifoRun.status) \(fifoRun.stderr)")

        let derCertificate = keys.directory + "/client.der"
        let derKey = keys.directory + "/client-key.der"
        #expect(try OpenSSLTool.run(["x509", "-in", client.certificateFile, "-outform", "der", "-out", derCertificate], passphrase: "") == 0)
        #expect(try OpenSSLTool.run(["pkey", "-in", client.keyFile, "-outform", "der", "-out", derKey], passphrase: "") == 0)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: derKey)
        for (certificate, key, named) in [(derCertificate, client.keyFile, derCertificate), (client.certificateFile, derKey, derKey)] {
            let output = try await Self.bugle(
                ["validate", "campaigns/ios-launch.yaml", "--providers", try providers("{ cert_file: \(certificate), key_file: \(key) }"), "--offline"])
            #expect(output.status == 1, "\(output.stderr)")
            #expect(output.stderr.contains("\(named) is not PEM text: it holds binary DER") && output.stderr.contains("-inform der"), "\(output.stderr)")
        }

        let unset = try await Self.bugle(
            ["validate", "campaigns/ios-launch.yaml", "--offline",
             "--providers", try providers("{ cert_file: \(client.certificateFile), key_file: \(client.keyFile), passphrase_env: BUGLE_TEST_UNSET_PASS }")])
        #expect(unset.status == 1, "\(unset.stderr)")
        #expect(unset.stderr.components(separatedBy: "apns.auth.certificate.passphrase_env").count == 2, "named once: \(unset.stderr)")

        // An unreachable database: the providers file is refused before it is touched.
        let dry = try await Self.bugle(
            ["run", "campaigns/ios-launch.yaml", "--dry-run", "--providers", keys.directory + "/missing.yaml",
             "--database-url", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"])
        #expect(dry.status == 1 && dry.stderr.contains("missing.yaml"), "\(dry.status) \(dry.stderr)")
    }

    /// Without `--csv` the report goes to `./bugle-run-N.csv`, and a current directory that cannot be written was found
    /// only once the whole campaign was sent (exit 2, the run delivered and its report missing). Run as `nobody` in a
    /// directory root owns (root may write anywhere), against a database that does not answer: refused first, exit 1.
    @Test("the default report's directory is checked before anything is sent: run, resume and send-test refuse an unwritable one")
    func defaultReportDirectoryChecked() async throws {
        let directory = try TestScratch.directory(prefix: "unwritable-cwd")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory)
        let nobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        let campaign = Self.packageRoot.appendingPathComponent("campaigns/ios-launch.yaml").path
        let unreachable = ["--database-url", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"]
        for arguments in [["run", campaign], ["resume", "1"], ["send-test", campaign, "--user", "u1"]] {
            let output = try await Self.bugle(arguments + unreachable, in: URL(fileURLWithPath: directory), launcher: nobody)
            #expect(output.status == 1, "\(arguments[0]): \(output.status) \(output.stderr)")
            #expect(output.stderr.contains("goes into the current directory \(directory), which cannot be written") && output.stderr.contains("--csv"),
                "\(arguments[0]): \(output.stderr)")
        }
        // With --csv somewhere writable the same command goes on to its next check (the campaign's providers file,
        // which the repository does not ship).
        let elsewhere = try await Self.bugle(
            ["run", campaign, "--csv", "/tmp/bugle-unwritable-cwd-\(getpid()).csv"] + unreachable, in: URL(fileURLWithPath: directory), launcher: nobody)
        #expect(!elsewhere.stderr.contains("cannot be written") && elsewhere.stderr.contains("providers.yaml"), "\(elsewhere.status) \(elsewhere.stderr)")
    }

    @Test("a bad campaign exits 1 before touching the database")
    func badCampaignTouchesNothing() async throws {
        let bad = try Self.temporaryFile("bad.yaml", "name: [unclosed\n")
        // An unreachable database: touching it would fail with exit 2, not 1.
        let output = try await Self.bugle(["run", bad, "--database-url", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"])
        #expect(output.status == 1)
        #expect(output.stderr.contains(bad + ":"))
    }

    @Test("options out of range and a database URL that cannot be parsed exit 1 before the database is touched; an unreachable server stays exit 2")
    func usageErrorsExitOne() async throws {
        // An unreachable server: a command that got as far as connecting would exit 2.
        let unreachable = ["BUGLE_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable"]
        let refused: [([String], String)] = [
            (["runs", "--limit=-1"], "--limit must be at least 1"),
            (["runs", "--limit", "0"], "--limit must be at least 1"),
            (["devices", "prune", "--not-seen-for", "0d"], "--not-seen-for must be from 1s to 36500d (100 years), not 0d"),
            (["devices", "prune", "--not-seen-for", "99999999999d"], "not 99999999999d"),
            (["devices", "prune", "--not-seen-for", "999999999999999999w"], "not 999999999999999999w"),
            (["devices", "prune", "--not-seen-for", "36501d"], "not 36501d"),
            (["run", "campaigns/spring-sale.yaml", "--dry-run", "--samples=-1"], "--samples must be 0 (none) or more"),
            // A negative number after the option is its value (out of range), not a missing value and an option "-1".
            (["runs", "--limit", "-1"], "--limit must be at least 1"),
            (["run", "campaigns/spring-sale.yaml", "--dry-run", "--samples", "-1"], "--samples must be 0 (none) or more"),
            (["run", "campaigns/spring-sale.yaml", "--provider-outage-limit", "-1"], "--provider-outage-limit must be within 1...604800 seconds"),
            (["run", "campaigns/spring-sale.yaml", "--lease-ttl", "-30"], "--lease-ttl must be within 3...3600 seconds"),
            (["worker", "--database-outage-limit", "-5"], "--database-outage-limit must be within 0...86400 seconds"),
            (["run", "campaigns/spring-sale.yaml", "--progress-interval", "-0.5"], "--progress-interval must be within 0.05...3600 seconds"),
            (["devices", "prune", "--not-seen-for", "-3d"], "--not-seen-for: expected a duration"),
        ]
        for (arguments, message) in refused {
            let output = try await Self.bugle(arguments, environment: unreachable)
            #expect(output.status == 1, "\(arguments): \(output.stderr)")
            #expect(output.stderr.contains(message), "\(arguments): \(output.stderr)")
        }

        let templated = try Self.temporaryFile(
            "templated.yaml",
            """
            name: templated
            notification_type: t
            segment:
              sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale, d.user_id AS first_name FROM bugle.devices d
            message:
              default_locale: en
              locales: { en: { title: "Hi {{first_name}}", body: b } }
            """
        )
        let malformed: [([String], [String: String], String)] = [
            (["validate", templated, "--database-url", "postgres://a@db.example:99999999/x"], [:], "invalid database URL: port"),
            (["runs", "--database-url", "mysql://db.example/x"], [:], "invalid database URL: scheme"),
            (["runs"], ["BUGLE_DATABASE_URL": "postgres://a@db.example/x?nonsense=1"], "invalid database URL: query parameter 'nonsense'"),
            (["db", "status", "--database-url", "postgres://a@[db.example/x"], [:], "invalid database URL: host"),
        ]
        for (arguments, environment, message) in malformed {
            let output = try await Self.bugle(arguments, environment: environment)
            #expect(output.status == 1, "\(arguments): \(output.stderr)")
            #expect(output.stderr.contains(message), "\(arguments): \(output.stderr)")
        }
        let down = try await Self.bugle(["runs"], environment: unreachable)
        #expect(down.status == 2, "\(down.stderr)")
        #expect(down.stderr.contains("cannot connect"), "\(down.stderr)")
    }

    @Test("db start/stop act on the embedded cluster only: --database-url exits 1, BUGLE_DATABASE_URL gets a note on stderr")
    func dbStartStopEmbeddedOnly() async throws {
        // A BUGLE_HOME with no cluster: `db stop` reports it not initialized and creates nothing.
        let home = try TestScratch.directory(prefix: "bugle-home")
        for verb in ["start", "stop"] {
            let refused = try await Self.bugle(["db", verb, "--database-url", "postgres://x@db.example/y"], environment: ["BUGLE_HOME": home])
            #expect(refused.status == 1, "\(verb): \(refused.stderr)")
            #expect(refused.stdout.isEmpty, "\(verb): \(refused.stdout)")
            #expect(refused.stderr.contains("bugle db \(verb) manages the embedded cluster only"), "\(verb): \(refused.stderr)")
        }
        let noted = try await Self.bugle(["db", "stop"], environment: ["BUGLE_HOME": home, "BUGLE_DATABASE_URL": "postgres://x@db.example/y"])
        #expect(noted.status == 0, "\(noted.stderr)")
        #expect(noted.stdout.contains("embedded PostgreSQL"), "\(noted.stdout)")
        #expect(noted.stderr.contains("note: BUGLE_DATABASE_URL is set, so other bugle commands use the server it names, not this embedded cluster"), "\(noted.stderr)")
        let quiet = try await Self.bugle(["db", "stop"], environment: ["BUGLE_HOME": home])
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(!quiet.stderr.contains("BUGLE_DATABASE_URL"), "\(quiet.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: home).isEmpty)
    }

    @Test("dry run: counts, samples and a preview CSV, as text or --json, and nothing written to the database")
    func dryRun() async throws {
        let (configuration, url) = try await Self.demoDatabase(devices: 300)
        let before = try await Database.withClient(configuration, logger: TestDatabase.logger) { try await LedgerTestSupport.checksum($0) }
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-preview-\(UUID().uuidString).csv").path
        let output = try await Self.bugle(["run", "campaigns/spring-sale.yaml", "--dry-run", "--csv", csv], environment: ["BUGLE_DATABASE_URL": url])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains("300 row(s) read, 300 would be sent"))
        // spring-sale has `dedupe: daily`, judged at claim time: the counts say they do not apply it.
        #expect(output.stdout.contains("note: dedupe (daily) is applied as the run claims each recipient"), "\(output.stdout)")
        #expect(output.stdout.contains("claimed now, 0 by dedupe (users already notified in period d:"), "\(output.stdout)")
        #expect(output.stdout.contains("sample ios"))
        #expect(output.stdout.contains("\"aps\""))
        let after = try await Database.withClient(configuration, logger: TestDatabase.logger) { try await LedgerTestSupport.checksum($0) }
        #expect(before == after)
        let lines = try String(contentsOfFile: csv, encoding: .utf8).split(separator: "\r\n")
        #expect(lines.count == 301)
        #expect(lines.dropFirst().allSatisfy { $0.contains(",would_send,") })

        // --json: the same counts as one JSON object, alone on stdout; samples with their tokens replaced.
        let json = try await Self.bugle(["run", "campaigns/spring-sale.yaml", "--dry-run", "--json"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        #expect(object["campaign"] as? String == "spring-sale-2026")
        #expect(object["rows_read"] as? Int == 300)
        #expect(object["would_send"] as? Int == 300)
        #expect((object["not_counted"] as? String)?.hasPrefix("dedupe (daily)") == true, "\(object)")
        // Nobody was notified yet: dedupe would skip none now; the campaign has no cap.
        let claimedNow = object["skipped_if_claimed_now"] as? [String: Any]
        #expect(claimedNow?["dedupe"] as? Int == 0 && claimedNow?["frequency_cap"] is NSNull, "\(object)")
        let platforms = try #require(object["per_platform"] as? [String: [String: Int]])
        #expect(platforms.values.map { $0["would_send"] ?? 0 }.reduce(0, +) == 300)
        #expect(platforms["ios"]?["would_send"] == 150)
        #expect((object["per_locale"] as? [String: Int])?.values.reduce(0, +) == 300)
        #expect((object["skipped"] as? [String: Int])?.isEmpty == true)
        let samples = try #require(object["samples"] as? [[String: Any]])
        #expect(Set(samples.compactMap { $0["platform"] as? String }) == Set(platforms.keys))
        let ios = try #require(samples.first { $0["platform"] as? String == "ios" })
        #expect((ios["headers"] as? [String: String])?["apns-push-type"] == "alert")
        #expect((ios["body"] as? [String: Any])?["aps"] != nil)
        let tokens = try await Database.withClient(configuration, logger: TestDatabase.logger) { try await CLIFeatureTests.tokens($0, platform: "android") }
        #expect(!tokens.isEmpty && tokens.allSatisfy { !json.stdout.contains($0) })
        #expect(object["preview"] is NSNull)
        #expect(object["validation"] is NSNull)
        let after2 = try await Database.withClient(configuration, logger: TestDatabase.logger) { try await LedgerTestSupport.checksum($0) }
        #expect(before == after2)
    }

    @Test("dry run: what dedupe and the frequency cap would skip if everyone were claimed now, counted per device, nothing reserved")
    func dryRunClaimRules() async throws {
        let configuration = try await TestDatabase.fresh()
        let url = try Self.url(configuration)
        let fake: [ProviderKind: any PushProvider] = [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)]
        let select = "SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d"
        let reserved = try await Database.withClient(configuration, logger: TestDatabase.logger) { client -> Int64? in
            // Users u1 ... u40, one device each; u1 ... u10 have a second device.
            try await LedgerTestSupport.seed(client, count: 40)
            try await client.query(
                """
                INSERT INTO bugle.devices (id, user_id, token, platform, locale)
                SELECT 100 + i, 'u' || i, 'fcm-second-' || md5(i::text), 'android', 'en' FROM generate_series(1, 10) i
                """, logger: TestDatabase.logger)
            // Today's "promo" already reached u1 ... u10 (dedupe daily) ...
            let today = PeriodKey.key(for: .daily, at: Date())
            let (_, first) = try await LedgerTestSupport.runCampaign(
                client, LedgerTestSupport.campaign(name: "earlier", sql: select + " WHERE d.id <= 10", dedupe: .daily), providers: fake, periodKey: today)
            #expect(first.ending == .completed)
            // ... and another campaign, without dedupe, u11 ... u20: the cap of one a day holds them.
            let (_, second) = try await LedgerTestSupport.runCampaign(
                client, LedgerTestSupport.campaign(name: "other", sql: select + " WHERE d.id BETWEEN 11 AND 20"), providers: fake)
            #expect(second.ending == .completed)
            return try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.notification_log", as: Int64.self)
        }
        let campaign = try Self.temporaryFile(
            "claim-rules.yaml",
            """
            name: claim-rules
            notification_type: promo
            dedupe: daily
            segment:
              sql: \(select) WHERE d.is_active
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Again } }
            delivery:
              max_per_user: { count: 1, per: 1d }
            """
        )
        let period = PeriodKey.key(for: .daily, at: Date()) ?? ""
        let text = try await Self.bugle(["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("50 row(s) read, 50 would be sent"), "\(text.stdout)")
        // u1 ... u10's twenty devices by dedupe, u11 ... u20's ten by the cap.
        #expect(
            text.stdout.contains(
                "claimed now, 20 by dedupe (users already notified in period \(period)) and 10 by the frequency cap (users at 1 per 1d) would be skipped"),
            "\(text.stdout)")
        let json = try await Self.bugle(["run", campaign, "--dry-run", "--json"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        let now = try #require(object["skipped_if_claimed_now"] as? [String: Any], "\(object)")
        #expect(now["dedupe"] as? Int == 20 && now["frequency_cap"] as? Int == 10 && now["period_key"] as? String == period, "\(now)")
        #expect(now["period_keys"] as? [String] == [period], "\(now)")
        // Judged, not reserved: the notification log is as the two runs left it.
        let after = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.notification_log", as: Int64.self)
        }
        #expect(after == reserved)
    }

    /// A fresh database with `devices` demo devices, and its URL.
    static func demoDatabase(devices: Int) async throws -> (DatabaseConfiguration, url: String) {
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await DemoSeeder(client: client, logger: TestDatabase.logger).seed(count: devices)
        }
        return (configuration, try Self.url(configuration))
    }

    /// A database with one completed run of `devices` recipients, and its URL.
    static func completedRun(devices: Int, name: String = "done") async throws -> (DatabaseConfiguration, url: String, runID: Int64) {
        let configuration = try await TestDatabase.fresh()
        let runID = try await Database.withClient(configuration, logger: TestDatabase.logger) { client -> Int64 in
            try await LedgerTestSupport.seed(client, count: devices)
            let fake: [ProviderKind: any PushProvider] = [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)]
            let (run, result) = try await LedgerTestSupport.runCampaign(client, LedgerTestSupport.campaign(name: name), providers: fake)
            #expect(result.ending == .completed)
            return run
        }
        return (configuration, try Self.url(configuration), runID)
    }

    @Test("--csv: a symlink's target is written (the link kept), an existing file keeps its mode, - and /dev/stdout give pure CSV on stdout and the summary on stderr; '' and - with --json exit 1, as does a path that cannot be created (before anything is sent)")
    func csvDestinations() async throws {
        let (_, url, runID) = try await Self.completedRun(devices: 12, name: "csv")
        let env = ["BUGLE_DATABASE_URL": url]
        let run = String(runID)
        let header = CSVFormat.record(ReportExporter.header).trimmingCharacters(in: .newlines)
        let directory = try TestScratch.directory(prefix: "bugle-csv")

        try Data("old".utf8).write(to: URL(fileURLWithPath: directory + "/target.csv"))
        try FileManager.default.createSymbolicLink(atPath: directory + "/link.csv", withDestinationPath: "target.csv")
        let linked = try await Self.bugle(["report", run, "--csv", directory + "/link.csv"], environment: env)
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/link.csv") == "target.csv")
        let written = try String(contentsOfFile: directory + "/target.csv", encoding: .utf8).split(separator: "\r\n")
        #expect(written.count == 13 && written.first.map(String.init) == header, "\(written)")

        let secret = directory + "/private.csv"
        #expect(FileManager.default.createFile(atPath: secret, contents: Data("old".utf8), attributes: [.posixPermissions: 0o600]))
        let kept = try await Self.bugle(["report", run, "--csv", secret], environment: env)
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(try FileManager.default.attributesOfItem(atPath: secret)[.posixPermissions] as? Int == 0o600)
        #expect(try String(contentsOfFile: secret, encoding: .utf8).hasPrefix(header))

        for argument in ["-", "/dev/stdout"] {
            let piped = try await Self.bugle(["report", run, "--csv", argument], environment: env)
            #expect(piped.status == 0, "\(argument): \(piped.stderr)")
            let records = piped.stdout.split(separator: "\r\n", omittingEmptySubsequences: false)
            #expect(records.first.map(String.init) == header, "\(argument): \(piped.stdout)")
            #expect(records.count == 14 && records.last == "", "\(argument): 12 rows after the header, nothing else: \(piped.stdout)")
            #expect(piped.stderr.contains("run \(runID) · csv · completed"), "\(argument): \(piped.stderr)")
            #expect(piped.stderr.contains("report: standard output (12 row(s))"), "\(argument): \(piped.stderr)")
        }

        let before = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        let empty = try await Self.bugle(["report", run, "--csv", ""], in: URL(fileURLWithPath: directory), environment: env)
        #expect(empty.status == 1, "\(empty.stderr)")
        #expect(empty.stderr.contains("--csv needs a path"), "\(empty.stderr)")
        let both = try await Self.bugle(["report", run, "--csv", "-", "--json"], in: URL(fileURLWithPath: directory), environment: env)
        #expect(both.status == 1, "\(both.stderr)")
        #expect(both.stdout.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == before)
        // A path that cannot be created is refused before anything is sent (it was found after the whole campaign).
        let runsBefore = try await Self.bugle(["runs", "--json"], environment: env).stdout
        for (path, reason) in [(directory + "/missing/x.csv", "the directory \(directory)/missing does not exist"), (directory, "it is a directory")] {
            let refused = try await Self.bugle(["run", "campaigns/spring-sale.yaml", "--csv", path], environment: env)
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("--csv \(path): \(reason)"), "\(refused.stderr)")
        }
        #expect(try await Self.bugle(["runs", "--json"], environment: env).stdout == runsBefore, "a refused run left a run behind")
    }

    @Test("a campaign that is a directory, missing or not UTF-8 is refused by run with the reason and position, as validate does (run said only 'cannot read the campaign file')")
    func unreadableCampaign() async throws {
        let directory = try TestScratch.directory(prefix: "bugle-unreadable")
        let latin1 = directory + "/latin1.yaml"
        try Data([0x6E, 0x61, 0x6D, 0x65, 0x3A, 0x20, 0xE9, 0x0A]).write(to: URL(fileURLWithPath: latin1))
        for (path, expected) in [
            (directory, "\(directory):1:1: is a directory, expected a YAML file"),
            (directory + "/missing.yaml", "\(directory)/missing.yaml:1:1: file not found"),
            (latin1, "\(latin1):1:7: the file is not valid UTF-8 text"),
        ] {
            for command in ["run", "send-test"] {
                let refused = try await Self.bugle([command, path] + (command == "send-test" ? ["--token", "abc"] : []))
                #expect(refused.status == 1, "\(command) \(path): \(refused.stderr)")
                #expect(refused.stderr.contains(expected), "\(command) \(path): \(refused.stderr)")
            }
        }
    }

    @Test("validate refuses copy too large for every payload of a platform (exit 1, naming the copy and the platforms); it said ok, and the run completed with those recipients failed")
    func oversizedCopyRefused() async throws {
        let title = String(repeating: "a", count: 5000)
        let file = try Self.temporaryFile(
            "huge.yaml",
            "name: huge\nnotification_type: promo\nsegment: { sql: \"SELECT 1\" }\nmessage:\n  default_locale: en\n"
                + "  locales:\n    en: { title: \"\(title)\", body: b }\n    de: { title: kurz, body: b }\n")
        let refused = try await Self.bugle(["validate", "--offline", file])
        #expect(refused.status == 1, "\(refused.stderr)")
        for platform in ["ios", "android", "web"] {
            #expect(refused.stderr.contains("\(file): message.locales.en: at least "), "\(refused.stderr)")
            #expect(refused.stderr.contains("every \(platform) recipient given this copy would fail payload_too_large"), "\(refused.stderr)")
        }
        #expect(!refused.stderr.contains("message.locales.de"), "\(refused.stderr)")
    }

    @Test("dry run --csv -: the preview alone on stdout, the counts on stderr; --csv FIFO: a reading thread gets the preview, the FIFO stays a FIFO")
    func dryRunCSVToStreams() async throws {
        let (_, url) = try await Self.demoDatabase(devices: 40)
        let env = ["BUGLE_DATABASE_URL": url]
        let preview = try await Self.bugle(["run", "campaigns/spring-sale.yaml", "--dry-run", "--csv", "-"], environment: env)
        #expect(preview.status == 0, "\(preview.stderr)")
        let records = preview.stdout.split(separator: "\r\n", omittingEmptySubsequences: false)
        #expect(records.first.map(String.init) == DryRunReport.previewHeader.joined(separator: ","), "\(preview.stdout)")
        #expect(records.count == 42 && records.last == "", "\(preview.stdout)")
        #expect(preview.stderr.contains("40 row(s) read, 40 would be sent"), "\(preview.stderr)")
        #expect(preview.stderr.contains("preview: standard output"), "\(preview.stderr)")

        let fifo = try TestScratch.directory(prefix: "bugle-fifo") + "/preview.csv"
        #expect(mkfifo(fifo, 0o600) == 0)
        // The test holds a write end of its own (close-on-exec, so that no child another test starts holds it too), so
        // the reading thread sees the end of the data only once both it and bugle have closed theirs, whatever bugle
        // does.
        let reader = try FIFOReader(path: fifo)
        let holder = open(fifo, O_WRONLY | O_CLOEXEC)
        try #require(holder >= 0)
        reader.start()
        let streamed = try await Self.bugle(["run", "campaigns/spring-sale.yaml", "--dry-run", "--csv", fifo, "--samples", "0"], environment: env)
        close(holder)
        let received = await reader.bytes()
        #expect(streamed.status == 0, "\(streamed.stderr)")
        #expect(String(decoding: received, as: UTF8.self) == preview.stdout)
        #expect(ReportFileWriterTests.isFIFO(fifo))
    }

    @Test("pause keeps a halted run's reason (exit 0, saying why it is paused); takes a scheduled run from tick; a missing or finished run exits 1 on stderr")
    func pauseKeepsReasons() async throws {
        let (configuration, url, completedRun) = try await Self.completedRun(devices: 6)
        let env = ["BUGLE_DATABASE_URL": url]
        let halt = "halted: provider_not_configured: 3 recipient(s) need fcm"
        let (halted, scheduled, running) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client -> (Int64, Int64, Int64) in
            let repository = RunRepository(client: client, logger: TestDatabase.logger)
            var runs: [Int64] = []
            for (name, reason) in [("halted", halt), ("scheduled", "scheduled: next recipients due in 900 s"), ("running", nil)] {
                let campaign = LedgerTestSupport.campaign(name: name)
                let run = try await repository.createRun(campaign: campaign, yaml: "name: \(name)", periodKey: nil)
                let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: TestDatabase.logger)
                _ = try await Materializer(client: client, logger: TestDatabase.logger).materialize(runID: run, campaign: campaign, reader: reader)
                if let reason { #expect(try await repository.setStatus(runID: run, to: .paused, reason: reason)) }
                runs.append(run)
            }
            return (runs[0], runs[1], runs[2])
        }
        func reason(_ run: Int64) async throws -> String? {
            try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
                try await RunRepository(client: client, logger: TestDatabase.logger).run(id: run)?.pauseReason
            }
        }

        let kept = try await Self.bugle(["pause", String(halted)], environment: env)
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(kept.stdout.contains("run \(halted) is already paused (\(halt)); `bugle resume \(halted)` goes on"), "\(kept.stdout)")
        #expect(try await reason(halted) == halt)

        let taken = try await Self.bugle(["pause", String(scheduled)], environment: env)
        #expect(taken.status == 0, "\(taken.stderr)")
        #expect(taken.stdout.contains("run \(scheduled): paused"), "\(taken.stdout)")
        #expect(try await reason(scheduled) == "paused by operator")

        let paused = try await Self.bugle(["pause", String(running)], environment: env)
        #expect(paused.status == 0, "\(paused.stderr)")
        #expect(try await reason(running) == "paused by operator")

        for (run, message) in [(completedRun, "run \(completedRun) is completed; there is nothing to pause"), (999, "run 999 does not exist")] {
            let refused = try await Self.bugle(["pause", String(run)], environment: env)
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stdout.isEmpty, "\(refused.stdout)")
            #expect(refused.stderr.contains(message), "\(refused.stderr)")
        }
    }

    @Test("demo --seed-only says how many devices it added and how many bugle.devices holds")
    func demoSeedOnlyCounts() async throws {
        let configuration = try await TestDatabase.fresh()
        let env = ["BUGLE_DATABASE_URL": try Self.url(configuration)]
        let first = try await Self.bugle(["demo", "--seed-only", "--devices", "30"], environment: env)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "demo: 30 demo device(s) added; bugle.devices holds 30\n", "\(first.stdout)")
        let fewer = try await Self.bugle(["demo", "--seed-only", "--devices", "10"], environment: env)
        #expect(fewer.status == 0, "\(fewer.stderr)")
        #expect(fewer.stdout == "demo: 0 demo device(s) added; bugle.devices holds 30\n", "\(fewer.stdout)")
        let more = try await Self.bugle(["demo", "--seed-only", "--devices", "45"], environment: env)
        #expect(more.stdout == "demo: 15 demo device(s) added; bugle.devices holds 45\n", "\(more.stdout)")
    }

    @Test("demo: a server named by URL is refused with nothing written; on the embedded cluster a --metrics-port in use is refused before any run, --json leaves one JSON object on stdout, and a second demo waits for the first; db stop notes a run being sent")
    func demoOnTheEmbeddedClusterOnly() async throws {
        let configuration = try await TestDatabase.fresh()
        let refused = try await Self.bugle(["demo", "--devices", "20"], environment: ["BUGLE_DATABASE_URL": try Self.url(configuration)])
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("it runs on Bugle's embedded cluster only; BUGLE_DATABASE_URL is set"), "\(refused.stderr)")
        let seeded = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices", as: Int64.self)
        }
        #expect(seeded == 0, "the demo seeded a server named by URL")

        let home = try TestScratch.directory(prefix: "bugle-demo-home")
        let cluster = EmbeddedCluster.defaultCluster(environment: ["BUGLE_HOME": home])
        defer {
            cluster.stopBlocking(mode: .immediate)
            try? FileManager.default.removeItem(atPath: cluster.directory)
        }
        let environment = ["BUGLE_HOME": home]
        let held = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(held.localAddress?.port)
        let busy = try await Self.bugle(["demo", "--devices", "40", "--metrics-port", String(port), "--quiet"], environment: environment)
        try await held.close()
        #expect(busy.status == 1, "\(busy.stderr)")
        #expect(busy.stderr.contains("already in use"), "\(busy.stderr)")
        let runs = try await Self.bugle(["runs", "--json"], environment: environment)
        #expect(runs.status == 0 && runs.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "a run was written: \(runs.stdout) \(runs.stderr)")

        let json = try await Self.bugle(["demo", "--devices", "40", "--json", "--quiet"], environment: environment)
        #expect(json.status == 0, "\(json.stderr)")
        let summary = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(summary?["status"] as? String == "completed", "stdout is not one JSON summary: \(json.stdout)")
        #expect(json.stderr.contains("demo: the simulators accepted") && json.stderr.contains("dry run of"), "\(json.stderr)")
        // The dry-run campaign's dedupe is `once`: its estimate names no period.
        #expect(json.stderr.contains("by dedupe (users this notification type already reached)"), "\(json.stderr)")

        // Two demos at once on one BUGLE_HOME: the second waits for the first (they rewrote each other's providers file).
        let demos = try (0..<2).map { _ in
            try CLIRunTests.RunningBugle(executable: CLIRunTests.binary, arguments: ["demo", "--devices", "40", "--quiet"], environment: environment)
        }
        var outputs: [Output] = []
        for demo in demos { outputs.append(await demo.finish()) }
        #expect(outputs.allSatisfy { $0.status == 0 }, "\(outputs.map(\.stderr))")
        #expect(outputs.contains { $0.stdout.contains("demo: another `bugle demo` runs on \(home); waiting for it to finish") }, "\(outputs.map(\.stdout))")

        // `db stop` with a run being sent says its worker will start the cluster again.
        let runID = try await Database.withClient(cluster.databaseConfiguration(), logger: TestDatabase.logger) { client -> Int64 in
            let run = try await RunRepository(client: client, logger: TestDatabase.logger).createRun(
                campaign: LedgerTestSupport.campaign(name: "live"), yaml: "name: live", periodKey: nil)
            try await client.query(
                "INSERT INTO bugle.run_workers (run_id, epoch, owner, expires_at) VALUES (\(run), 1, 'elsewhere:1:1', now() + interval '1 hour')",
                logger: TestDatabase.logger)
            return run
        }
        let stopped = try await Self.bugle(["db", "stop"], environment: environment)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(stopped.stderr.contains("note: run \(runID) is being sent: its worker will start the cluster again"), "\(stopped.stderr)")
    }

    @Test("devices register / unregister through the CLI")
    func devices() async throws {
        let configuration = try await TestDatabase.fresh()
        let url = try Self.url(configuration)
        let token = String(repeating: "ab", count: 32)
        let registered = try await Self.bugle(["devices", "register", "--user", "42", "--token", token, "--platform", "ios"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(registered.status == 0, "\(registered.stderr)")
        #expect(registered.stdout.firstMatch(of: /^registered device \d+ for user 42\n$/) != nil, "\(registered.stdout)")
        let again = try await Self.bugle(["devices", "register", "--user", "43", "--token", token, "--platform", "ios"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.firstMatch(of: /^registered device \d+ again for user 43: active, last seen now\n$/) != nil, "\(again.stdout)")
        #expect(!(registered.stdout + again.stdout).contains(token))
        let unregistered = try await Self.bugle(["devices", "unregister", "--token", token, "--platform", "ios"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(unregistered.status == 0)
        #expect(unregistered.stdout.contains("unregistered 1 device(s)"))
        let badPlatform = try await Self.bugle(["devices", "register", "--user", "1", "--token", "x", "--platform", "nokia"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(badPlatform.status != 0)
        // Every bad value is a usage error (exit 1) found before the database is reached, naming the option.
        let offline = ["BUGLE_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable"]
        for (arguments, expected) in [
            (["--user", "1", "--token", "bad token", "--platform", "ios"], "--token: "),
            (["--user", " ", "--token", token, "--platform", "ios"], "--user: missing"),
            (["--user", "1", "--token", "abcd0011", "--platform", "ios"], "--token: an APNs device token is an even number of hex digits"),
            (["--user", "1", "--token", token, "--platform", "ios", "--timezone", "Mars/Base"], "--timezone: unknown time zone 'Mars/Base'"),
        ] {
            let refused = try await Self.bugle(["devices", "register"] + arguments, environment: offline)
            #expect(refused.status == 1 && refused.stderr.contains(expected), "\(arguments): \(refused.status) \(refused.stderr)")
        }
    }

    @Test("devices import: rows partly bad exit 0 with a report; nothing importable, a bad header or a directory exit 1 naming the file")
    func devicesImportExitCodes() async throws {
        let configuration = try await TestDatabase.fresh()
        let environment = ["BUGLE_DATABASE_URL": try Self.url(configuration)]
        let token = String(repeating: "cd", count: 32)
        let partly = try Self.temporaryFile("partly.csv", "user_id,token,platform\nu1,\(token),ios\nu2,XYZ,ios\n")
        let imported = try await Self.bugle(["devices", "import", partly], environment: environment)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("line 3"), "\(imported.stdout)")
        let allBad = try Self.temporaryFile("bad.csv", "user_id,token,platform\nu2,XYZ,ios\n,tok,web\n")
        let none = try await Self.bugle(["devices", "import", allBad], environment: environment)
        #expect(none.status == 1 && none.stderr.contains("\(allBad): none of its 2 row(s) could be imported"), "\(none.stderr)")
        let header = try Self.temporaryFile("header.csv", "user_id,colour,platform\nu1,x,ios\n")
        let badHeader = try await Self.bugle(["devices", "import", header], environment: environment)
        #expect(badHeader.status == 1 && badHeader.stderr.contains("\(header): line 1:"), "\(badHeader.stderr)")
        let directory = NSTemporaryDirectory()
        let folder = try await Self.bugle(["devices", "import", directory], environment: environment)
        #expect(folder.status == 1 && folder.stderr.contains("is a directory"), "\(folder.stderr)")
        #expect(!folder.stderr.contains("NSCocoaErrorDomain"))
    }

    @Test("resume of a completed run sends nothing (exit 0; a cancelled one exit 2), worker says there is nothing to join (exit 0); cancel of a ready run cancels its recipients; of a finished or missing one exits 1")
    func resumeAndCancel() async throws {
        let configuration = try await TestDatabase.fresh()
        let url = try Self.url(configuration)
        let (completedRun, readyRun) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client -> (Int64, Int64) in
            try await LedgerTestSupport.seed(client, count: 40)
            let fake: [ProviderKind: any PushProvider] = [.apns: FakeProvider(kind: .apns), .fcm: FakeProvider(kind: .fcm)]
            let (completed, result) = try await LedgerTestSupport.runCampaign(client, LedgerTestSupport.campaign(name: "done"), providers: fake)
            #expect(result.ending == .completed)
            let campaign = LedgerTestSupport.campaign(name: "ready")
            let ready = try await RunRepository(client: client, logger: TestDatabase.logger).createRun(campaign: campaign, yaml: "name: ready", periodKey: nil)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: TestDatabase.logger)
            _ = try await Materializer(client: client, logger: TestDatabase.logger).materialize(runID: ready, campaign: campaign, reader: reader)
            return (completed, ready)
        }
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-resume-\(UUID().uuidString).csv").path
        let resumed = try await Self.bugle(["resume", String(completedRun), "--csv", csv], environment: ["BUGLE_DATABASE_URL": url])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("is completed; nothing to send"))
        let joined = try await Self.bugle(["worker", String(completedRun)], environment: ["BUGLE_DATABASE_URL": url])
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(joined.stdout.contains("run \(completedRun) is completed: every recipient has its outcome, so there is nothing to join"), "\(joined.stdout)")
        #expect(!joined.stderr.contains("continues a paused run"), "\(joined.stderr)")
        // With --json: the run's summary as one JSON object (no report written: `report` is null), the sentence on stderr.
        let joinedJSON = try await Self.bugle(["worker", String(completedRun), "--json"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(joinedJSON.status == 0, "\(joinedJSON.stderr)")
        let summary = try JSONSerialization.jsonObject(with: Data(joinedJSON.stdout.utf8)) as? [String: Any]
        #expect(summary?["status"] as? String == "completed" && summary?["report"] is NSNull, "\(joinedJSON.stdout)")
        #expect(joinedJSON.stderr.contains("nothing to join"), "\(joinedJSON.stderr)")
        let cancelled = try await Self.bugle(["cancel", String(readyRun)], environment: ["BUGLE_DATABASE_URL": url])
        #expect(cancelled.status == 0)
        // Resuming a cancelled run sends nothing and exits with its outcome (2), its report written again.
        let resumedCancelled = try await Self.bugle(["resume", String(readyRun), "--csv", csv], environment: ["BUGLE_DATABASE_URL": url])
        #expect(resumedCancelled.status == 2, "\(resumedCancelled.stderr)")
        #expect(resumedCancelled.stdout.contains("run \(readyRun) is cancelled; nothing to send"), "\(resumedCancelled.stdout)")
        let again = try await Self.bugle(["cancel", String(completedRun)], environment: ["BUGLE_DATABASE_URL": url])
        #expect(again.status == 1)
        #expect(again.stdout.isEmpty, "\(again.stdout)")
        #expect(again.stderr.contains("run \(completedRun) is completed; there is nothing to cancel"), "\(again.stderr)")
        let missing = try await Self.bugle(["cancel", "999"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(missing.status == 1)
        #expect(missing.stdout.isEmpty, "\(missing.stdout)")
        #expect(missing.stderr.contains("run 999 does not exist"), "\(missing.stderr)")
        let states = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(readyRun) AND state <> 'cancelled'", as: Int64.self
            )
        }
        #expect(states == 0)
    }
}
