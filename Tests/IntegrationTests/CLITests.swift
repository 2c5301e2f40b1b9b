import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

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
    static func bugle(_ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:]) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try runBlocking(arguments, in: directory ?? packageRoot, environment: environment) })
            }
        }
    }

    private static func runBlocking(_ arguments: [String], in directory: URL, environment: [String: String]) throws -> Output {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
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
        for command in ["run", "validate", "report", "runs", "db", "devices", "demo"] {
            let output = try await Self.bugle([command, "--help"])
            #expect(output.status == 0, "\(command) --help")
            #expect(output.stdout.contains("USAGE"), "\(command) --help")
        }
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
        #expect(unset.stderr.contains("apns: proxy_credentials_env names BUGLE_TEST_UNSET_PROXY, which is not set"), "\(unset.stderr)")

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
        #expect(unreadable.stderr.contains("fcm: proxy_ca_file \(caFile).missing cannot be read"), "\(unreadable.stderr)")
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
        #expect(refused.stderr.contains("\(missing): apns:") && refused.stderr.contains("nokey.p8"), "\(refused.stderr)")

        let wrongType = try providers(keyFile: keys.material.fcmServiceAccountFile)
        let wrong = try await Self.bugle(["validate", "campaigns/spring-sale.yaml", "--providers", wrongType])
        #expect(wrong.status == 1, "\(wrong.stdout)")
        #expect(wrong.stderr.contains("\(wrongType): apns:"), "\(wrong.stderr)")
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
        #expect(noAccount.stderr.contains("fcm:") && noAccount.stderr.contains("none.json"), "\(noAccount.stderr)")

        // ios_transport: legacy with no legacy_apns: section — refused by validate, and by run before anything is written.
        let legacy = try Self.temporaryFile(
            "legacy.yaml",
            try String(contentsOfFile: "campaigns/spring-sale.yaml", encoding: .utf8).replacingOccurrences(of: "\nmessage:", with: "\nios_transport: legacy\nmessage:"))
        let transport = try await Self.bugle(["validate", legacy, "--providers", try providers(keyFile: keys.material.keyFile)])
        #expect(transport.status == 1)
        #expect(transport.stderr.contains("ios_transport: legacy sends iOS devices through apns_legacy") && transport.stderr.contains("no `legacy_apns:` section"), "\(transport.stderr)")
        let run = try await Self.bugle(
            ["run", legacy, "--providers", try providers(keyFile: keys.material.keyFile), "--database-url", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"])
        #expect(run.status == 1, "the check comes before the database: \(run.stderr)")
        #expect(run.stderr.contains("no `legacy_apns:` section"), "\(run.stderr)")
    }

    @Test("a bad campaign exits 1 before touching the database")
    func badCampaignTouchesNothing() async throws {
        let bad = try Self.temporaryFile("bad.yaml", "name: [unclosed\n")
        // An unreachable database: touching it would fail with exit 2, not 1.
        let output = try await Self.bugle(["run", bad, "--database-url", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"])
        #expect(output.status == 1)
        #expect(output.stderr.contains(bad + ":"))
    }

    @Test("dry run: counts, samples and a preview CSV, and nothing written to the database")
    func dryRun() async throws {
        let configuration = try await TestDatabase.fresh()
        let url = try Self.url(configuration)
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await DemoSeeder(client: client, logger: TestDatabase.logger).seed(count: 300)
        }
        let before = try await Database.withClient(configuration, logger: TestDatabase.logger) { try await LedgerTestSupport.checksum($0) }
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-preview-\(UUID().uuidString).csv").path
        let output = try await Self.bugle(["run", "campaigns/spring-sale.yaml", "--dry-run", "--csv", csv], environment: ["BUGLE_DATABASE_URL": url])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains("300 row(s) read, 300 would be sent"))
        #expect(output.stdout.contains("sample ios"))
        #expect(output.stdout.contains("\"aps\""))
        let after = try await Database.withClient(configuration, logger: TestDatabase.logger) { try await LedgerTestSupport.checksum($0) }
        #expect(before == after)
        let lines = try String(contentsOfFile: csv, encoding: .utf8).split(separator: "\r\n")
        #expect(lines.count == 301)
        #expect(lines.dropFirst().allSatisfy { $0.contains(",would_send,") })
    }

    @Test("devices register / unregister through the CLI")
    func devices() async throws {
        let configuration = try await TestDatabase.fresh()
        let url = try Self.url(configuration)
        let token = String(repeating: "ab", count: 32)
        let registered = try await Self.bugle(["devices", "register", "--user", "42", "--token", token, "--platform", "ios"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(registered.status == 0, "\(registered.stderr)")
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

    @Test("resume of a completed run sends nothing; cancel of a ready run cancels its recipients; of a finished one exits 1")
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
        let cancelled = try await Self.bugle(["cancel", String(readyRun)], environment: ["BUGLE_DATABASE_URL": url])
        #expect(cancelled.status == 0)
        let again = try await Self.bugle(["cancel", String(completedRun)], environment: ["BUGLE_DATABASE_URL": url])
        #expect(again.status == 1)
        let states = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(readyRun) AND state <> 'cancelled'", as: Int64.self
            )
        }
        #expect(states == 0)
    }
}
