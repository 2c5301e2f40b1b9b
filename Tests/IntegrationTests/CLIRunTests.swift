import BugleCore
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
import Testing
import Crypto
import _CryptoExtras

#if canImport(Glibc)
import Glibc
#endif


/// Real sends through the built `bugle` executable against the in-process APNs simulator: progress output
/// (terminal and log lines), `--json`, and `/metrics` scraped while the run is going.
@Suite("bugle run output (built executable, simulator, real PostgreSQL)")
struct CLIRunTests {
    /// A running `bugle` process whose stdout and stderr are collected in the background.
    final class RunningBugle: Sendable {
        let process: Process
        private let arguments: [String]
        private let stdoutTask: Task<Data, Never>
        private let stderrTask: Task<Data, Never>
        /// Finishes when the process has exited.
        private let exited: AsyncStream<Void>

        init(executable: String, arguments: [String], environment: [String: String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.currentDirectoryURL = CLITests.packageRoot
            process.environment = CLITests.childEnvironment(environment)
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            let (exited, exit) = AsyncStream<Void>.makeStream()
            process.terminationHandler = { _ in exit.finish() }
            try process.run()
            self.process = process
            self.arguments = arguments
            self.exited = exited
            stdoutTask = Self.drain(out)
            stderrTask = Self.drain(err)
        }

        /// Reads a pipe to its end on a dispatch thread: a blocking read must not occupy one of the few
        /// threads of Swift's cooperative pool.
        private static func drain(_ pipe: Pipe) -> Task<Data, Never> {
            Task {
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async {
                        continuation.resume(returning: pipe.fileHandleForReading.readDataToEndOfFile())
                    }
                }
            }
        }

        /// Waits for the process to exit and returns what it printed. A process still running after `limit` is a hung
        /// one: it is killed and recorded as an issue with its output so far, instead of holding the suite until its
        /// time limit (or CI's) with nothing to show.
        func finish(within limit: Duration = .seconds(240)) async -> CLITests.Output {
            let hung = process.isRunning ? await !exits(within: limit) : false
            if hung { kill(process.processIdentifier, SIGKILL) }
            let stdout = await stdoutTask.value
            let stderr = await stderrTask.value
            process.waitUntilExit()
            let output = CLITests.Output(
                status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
            if hung {
                Issue.record("bugle \(arguments.joined(separator: " ")) was still running after \(limit): killed\nstdout:\n\(output.stdout)\nstderr:\n\(output.stderr)")
            }
            return output
        }

        /// Whether the process exits within `limit`.
        private func exits(within limit: Duration) async -> Bool {
            await withTaskGroup(of: Bool.self) { group in
                group.addTask { [exited] in
                    for await _ in exited {}
                    return !Task.isCancelled
                }
                group.addTask {
                    try? await Task.sleep(for: limit)
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
        }
    }

    /// A simulator, a seeded database and an iOS campaign paced at `rate` per second.
    struct Fixture {
        let environment: APNsTestEnvironment
        let simulator: APNsSimulator
        let databaseURL: String
        let campaign: String
        let providers: String

        /// - Parameter unavailableRatio: Fraction of requests the simulator answers 503 (retried by Bugle).
        static func make(devices: Int, rate: Int, unavailableRatio: Double = 0) async throws -> Fixture {
            let configuration = try await TestDatabase.fresh()
            try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
                try await DemoSeeder(client: client, logger: TestDatabase.logger).seed(count: devices)
            }
            let environment = try APNsTestEnvironment()
            let simulator = APNsSimulator(configuration: environment.simulatorConfiguration { $0.faults.serviceUnavailableRatio = unavailableRatio })
            let port = try await simulator.start()
            try environment.material.writeProvidersFile(port: port)
            let campaign = try CLITests.temporaryFile(
                "paced.yaml",
                """
                name: paced-ios
                notification_type: cli-output
                dedupe: none
                segment:
                  sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices WHERE platform = 'ios'
                message:
                  default_locale: en
                  locales: { en: { title: Hello, body: From the CLI test } }
                delivery: { rate: { apns: \(rate) } }
                """
            )
            return Fixture(
                environment: environment, simulator: simulator, databaseURL: try CLITests.url(configuration),
                campaign: campaign, providers: environment.material.providersFile
            )
        }

        func stop() async throws {
            try await simulator.stop()
            environment.remove()
        }
    }

    static var binary: String { CLITests.executable.path }

    /// A script's background job inherits SIGINT ignored; `bugle run` waiting for `send_at` slept through it (only
    /// SIGTERM ended it). The wait now takes the signals as the rest of the run does: SIGINT ends it with exit 130,
    /// SIGTERM with 143, and nothing is written.
    @Test("SIGINT inherited as ignored, or SIGTERM, ends the wait for send_at at once: exit 130 or 143, no run written", arguments: [SIGINT, SIGTERM])
    func signalWhileWaitingForSendAt(_ signal: Int32) async throws {
        let fixture = try await Fixture.make(devices: 4, rate: 100)
        defer { Task { try? await fixture.stop() } }
        let later = try CLITests.temporaryFile(
            "later.yaml",
            try String(contentsOfFile: fixture.campaign, encoding: .utf8).replacingOccurrences(
                of: "delivery: {", with: "delivery: { send_at: \"2030-01-01T00:00:00Z\", "))
        let waiting = try SimulatorProcess(
            "/bin/sh", ["-c", "trap '' INT; exec \"$0\" \"$@\"", Self.binary, "run", later, "--providers", fixture.providers, "--database-url", fixture.databaseURL])
        _ = try await waiting.line(startingWith: "paced-ios: delivery.send_at is 2030-01-01")
        kill(waiting.process.processIdentifier, signal)
        let output = await waiting.finish()
        #expect(output.status == (signal == SIGINT ? 130 : 143), "\(output.status) \(output.stderr)")
        #expect(output.stderr.contains("stopped waiting for delivery.send_at; nothing was written"), "\(output.stderr)")
        let configuration = try DatabaseConfiguration(url: fixture.databaseURL)
        let runs = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.runs", as: Int64.self)
        }
        #expect(runs == 0)
    }

    /// How many devices of the database are deactivated.
    static func inactiveDevices(_ configuration: DatabaseConfiguration) async throws -> Int64? {
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self)
        }
    }

    /// Runs a one-platform campaign through the built executable with `providers` (a providers file's text) and
    /// `arguments` after the usual ones.
    static func runWithProviders(
        _ providers: String, name: String, platform: String, environment: MixedTestEnvironment, configuration: DatabaseConfiguration,
        arguments: [String] = []
    ) async throws -> CLITests.Output {
        let providersFile = environment.directory + "/\(name)-providers.yaml"
        try providers.write(toFile: providersFile, atomically: true, encoding: .utf8)
        let campaign = try CLITests.temporaryFile(
            "\(name).yaml",
            """
            name: \(name)
            notification_type: cli-\(name)
            dedupe: none
            segment:
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices WHERE platform = '\(platform)'
            message:
              default_locale: en
              locales: { en: { title: Hello, body: \(platform) } }
            """
        )
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-\(name)-\(UUID().uuidString).csv").path
        return try await CLITests.bugle(
            ["run", campaign, "--providers", providersFile, "--csv", csv, "--quiet"] + arguments,
            environment: ["BUGLE_DATABASE_URL": try CLITests.url(configuration)]
        )
    }

    @Test("a service account whose key the token endpoint refuses halts the run with exit 2 and deactivates nothing")
    func badServiceAccountKey() async throws {
        let environment = try await MixedTestEnvironment.start()
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 200)
        }
        // Same account, same key id, another RSA key: the assertion's signature does not verify.
        let original = try #require(FileManager.default.contents(atPath: environment.material.fcmServiceAccountFile))
        var account = try #require(try JSONSerialization.jsonObject(with: original) as? [String: Any])
        account["private_key"] = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        let forged = environment.directory + "/forged-service-account.json"
        _ = FileManager.default.createFile(atPath: forged, contents: try JSONSerialization.data(withJSONObject: account), attributes: [.posixPermissions: 0o600])
        let providers = try String(contentsOfFile: environment.material.providersFile, encoding: .utf8)
            .replacingOccurrences(of: environment.material.fcmServiceAccountFile, with: forged)
        let output = try await Self.runWithProviders(
            providers, name: "forged", platform: "android", environment: environment, configuration: configuration)
        let grants = environment.fcm.counters().tokenGrants
        let accepted = environment.fcm.accepted().count
        try await environment.stop()
        #expect(output.status == 2, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("OAUTH_REJECTED"))
        #expect(output.stderr.contains("invalid_grant"))
        #expect(!output.stderr.contains("BEGIN PRIVATE KEY"))
        #expect(grants == 0)
        #expect(accepted == 0)
        #expect(try await Self.inactiveDevices(configuration) == 0)
    }

    @Test("an APNs key the simulator does not know (same key id, other key) halts the run with exit 2 and deactivates nothing")
    func wrongAPNsKey() async throws {
        let environment = try await MixedTestEnvironment.start()
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 200)
        }
        let otherKey = environment.directory + "/AuthKey_other.p8"
        _ = FileManager.default.createFile(
            atPath: otherKey, contents: Data(P256.Signing.PrivateKey().pemRepresentation.utf8), attributes: [.posixPermissions: 0o600])
        let providers = try String(contentsOfFile: environment.material.providersFile, encoding: .utf8)
            .replacingOccurrences(of: environment.material.keyFile, with: otherKey)
        let output = try await Self.runWithProviders(
            providers, name: "wrong-key", platform: "ios", environment: environment, configuration: configuration)
        let accepted = environment.apns.accepted().count
        let refused = environment.apns.counters().rejectedByReason["InvalidProviderToken", default: 0]
        try await environment.stop()
        #expect(output.status == 2, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("InvalidProviderToken"), "\(output.stderr)")
        #expect(!output.stderr.contains("BEGIN PRIVATE KEY"))
        #expect(accepted == 0)
        #expect(refused >= 1)
        let (inactive, status) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            (
                try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self),
                try await LedgerTestSupport.scalar(client, "SELECT status FROM bugle.runs ORDER BY id DESC LIMIT 1", as: String.self)
            )
        }
        #expect(inactive == 0)
        #expect(status == "paused")
    }

    /// `--provider-outage-limit` reaches the runner: iOS devices the simulator answers 503 every time make a storm, the
    /// lane pauses and retries (a storm charges nobody), and after the limit (2 s here, 10 min by default) the run halts.
    /// A limit outside 1 s ... a week is refused before anything runs.
    @Test("--provider-outage-limit: a lane answered only 503 halts the run after that long (exit 2, ProviderUnavailable, paused), nobody sent or failed; 0 is refused")
    func providerOutageLimit() async throws {
        let environment = try await MixedTestEnvironment.start()
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            _ = try await client.query(
                "INSERT INTO bugle.devices (id, user_id, token, platform) SELECT i, 'u' || i, '5030' || lpad(to_hex(i), 60, '0'), 'ios' FROM generate_series(1, 200) i",
                logger: TestDatabase.logger
            ).collect()
        }
        let providers = try String(contentsOfFile: environment.material.providersFile, encoding: .utf8)
        let refusedLimit = try await Self.runWithProviders(
            providers, name: "outage-zero", platform: "ios", environment: environment, configuration: configuration,
            arguments: ["--provider-outage-limit", "0"])
        let output = try await Self.runWithProviders(
            providers, name: "outage", platform: "ios", environment: environment, configuration: configuration,
            arguments: ["--provider-outage-limit", "2"])
        let unavailable = environment.apns.counters().rejectedByReason["ServiceUnavailable", default: 0]
        let accepted = environment.apns.counters().accepted
        try await environment.stop()
        #expect(refusedLimit.status != 0 && refusedLimit.stderr.contains("--provider-outage-limit must be within 1...604800 seconds"), "\(refusedLimit.stderr)")
        #expect(output.status == 2, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("ProviderUnavailable") && output.stderr.contains("has processed no request for"), "\(output.stderr)")
        #expect(unavailable >= 1 && accepted == 0)
        let (states, status) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            (
                try await LedgerTestSupport.scalar(
                    client, "SELECT string_agg(DISTINCT state, ',') || ' ' || max(attempts) FROM bugle.run_recipients", as: String.self),
                try await LedgerTestSupport.scalar(client, "SELECT count(*)::text || ' ' || max(status) FROM bugle.runs", as: String.self)
            )
        }
        #expect(states?.hasPrefix("pending") == true || states?.hasPrefix("retry_wait") == true, "\(states ?? "nil")")
        #expect(states?.contains("sent") == false && states?.contains("failed") == false, "\(states ?? "nil")")
        #expect(status == "1 paused", "one run (the refused limit made none), paused: \(status ?? "nil")")
    }

    /// Both simulators, a fresh database of `devices` mixed devices (`MixedTestEnvironment.seed`), and a campaign file
    /// named `name` over all of them with `message` (YAML, the `message:` section's body).
    static func mixedCampaign(devices: Int, name: String, message: String) async throws -> (MixedTestEnvironment, DatabaseConfiguration, String) {
        let environment = try await MixedTestEnvironment.start()
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: devices)
        }
        let indented = message.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
        let campaign = try CLITests.temporaryFile(
            "\(name).yaml",
            """
            name: \(name)
            notification_type: cli-\(name)
            dedupe: none
            segment:
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices
            message:
            \(indented)
            """
        )
        return (environment, configuration, campaign)
    }

    /// The server certificates RELIABILITY.md §2.3 #29 names, each of which the client must refuse.
    enum ServerCertificateFault: String, CaseIterable, CustomTestStringConvertible {
        /// Signed by a CA the providers file's `ca_file` is not.
        case otherCA = "another CA"
        /// Signed by the trusted CA for another host name (the endpoint is 127.0.0.1).
        case otherHost = "another host"
        /// Signed by the trusted CA, expired yesterday.
        case expired = "expired"
        /// Signed by the trusted CA, valid from tomorrow.
        case notYetValid = "not yet valid"
        /// Signed by the trusted CA for another name and the very address the endpoint's name resolves to (the
        /// endpoint is `localhost`): swift-nio-ssl let the address stand for the name.
        case otherNameSameAddress = "another name, the same address"

        var testDescription: String { rawValue }

        /// What the run's error must say.
        var reason: String {
            [.otherHost, .otherNameSameAddress].contains(self)
                ? "the server's TLS certificate is not valid for this host name" : "the server's TLS certificate was refused"
        }

        /// The identity the simulators serve (nil: their own).
        func serverIdentity(directory: String) throws -> SimulatorCertificates.IssuedIdentity? {
            let day: TimeInterval = 86_400
            let now = Date()
            switch self {
            case .otherCA:
                return nil
            case .otherHost:
                return try SimulatorCertificates.issue(
                    in: directory, commonName: "push.example.net", purpose: .server(dnsNames: ["push.example.net"], ipv4Addresses: [[10, 9, 8, 7]]))
            case .otherNameSameAddress:
                return try SimulatorCertificates.issue(
                    in: directory, commonName: "push.example.net", purpose: .server(dnsNames: ["push.example.net"], ipv4Addresses: [[127, 0, 0, 1]]))
            case .expired:
                return try SimulatorCertificates.issue(
                    in: directory, commonName: "localhost", purpose: .loopbackServer, validity: now.addingTimeInterval(-30 * day)...now.addingTimeInterval(-day))
            case .notYetValid:
                return try SimulatorCertificates.issue(
                    in: directory, commonName: "localhost", purpose: .loopbackServer, validity: now.addingTimeInterval(day)...now.addingTimeInterval(30 * day))
            }
        }
    }

    /// RELIABILITY.md §2.3 #29: the simulators serve a certificate the client must refuse (another CA than the
    /// providers file trusts, another host, out of date). The handshake fails on the certificate, which no reconnect
    /// can fix: the run halts at once (exit 2, the reason named) instead of retrying for ever, and nothing is
    /// delivered or deactivated.
    @Test("a server certificate that must be refused (another CA, another host, expired, not yet valid) halts the run at once with exit 2, naming it; nothing delivered or deactivated",
        .timeLimit(.minutes(3)), arguments: ["ios", "android"], ServerCertificateFault.allCases)
    func refusedServerCertificate(platform: String, fault: ServerCertificateFault) async throws {
        let environment = try await MixedTestEnvironment.start(serverIdentity: fault.serverIdentity(directory:))
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 200)
        }
        var providers = try String(contentsOfFile: environment.material.providersFile, encoding: .utf8)
        if fault == .otherCA {
            let other = try SimulatorCertificates.generate(in: environment.directory + "/other-ca", port: 0)
            providers = providers.replacingOccurrences(of: environment.material.caFile, with: other.caFile)
        }
        if fault == .otherNameSameAddress {
            providers = providers.replacingOccurrences(of: "https://127.0.0.1:", with: "https://localhost:")
            #expect(providers.contains("https://localhost:"), "\(providers)")
        }
        let output = try await Self.runWithProviders(
            providers, name: "refused-\(platform)", platform: platform, environment: environment, configuration: configuration)
        let accepted = environment.apns.accepted().count + environment.fcm.accepted().count
        try await environment.stop()
        #expect(output.status == 2, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains(fault.reason), "\(output.stderr)")
        #expect(accepted == 0)
        #expect(try await Self.inactiveDevices(configuration) == 0)
    }

    /// The providers file with APNs certificate auth: a client certificate from the simulators' CA valid over
    /// `validity`.
    static func certificateProviders(_ environment: MixedTestEnvironment, validity: ClosedRange<Date>) throws -> (providers: String, certificateFile: String) {
        let client = try SimulatorCertificates.generateLegacyClient(in: environment.directory, validity: validity)
        let material = environment.material
        let providers = try String(contentsOfFile: material.providersFile, encoding: .utf8).replacingOccurrences(
            of: "token: { team_id: \(material.teamID), key_id: \(material.keyID), key_file: \(material.keyFile) }",
            with: "certificate: { cert_file: \(client.certificateFile), key_file: \(client.keyFile) }")
        return (providers, client.certificateFile)
    }

    /// RELIABILITY.md §2.3 #29, the client half: Apple refuses an out-of-date client certificate at the handshake, so
    /// Bugle refuses it at start-up, before the database is touched (exit 1, the file and the date named).
    @Test("an expired or not-yet-valid APNs client certificate stops `bugle run` before any claim: exit 1 naming the file and the date; no run, nothing sent",
        arguments: ["expired on", "is not valid before"])
    func outOfDateClientCertificate(reason: String) async throws {
        let environment = try await MixedTestEnvironment.start(clientCertificates: true)
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 20)
        }
        let now = Date()
        let validity = reason == "expired on" ? now.addingTimeInterval(-86_400 * 400)...now.addingTimeInterval(-86_400 * 35) : now.addingTimeInterval(86_400)...now.addingTimeInterval(86_400 * 400)
        let (providers, certificateFile) = try Self.certificateProviders(environment, validity: validity)
        let output = try await Self.runWithProviders(providers, name: "client-cert", platform: "ios", environment: environment, configuration: configuration)
        let accepted = environment.apns.accepted().count
        try await environment.stop()
                #expect(output.status == 1, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("the client certificate in \(certificateFile) \(reason) "), "\(output.stderr)")
        #expect(accepted == 0)
        let runs = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.runs", as: Int64.self)
        }
        #expect(runs == 0)
    }

    /// The server refuses Bugle's client certificate (revoked, or issued for another endpoint: here, by a CA it does
    /// not trust). Bugle cannot see that before connecting; the refusal comes within the TLS 1.2 handshake, so nothing
    /// was written: the run halts at once (exit 2, the server's alert named), nobody is `sent` or `unknown`.
    @Test("a client certificate the APNs server refuses halts the run at once with exit 2, naming the alert; nobody sent or unknown",
        .timeLimit(.minutes(3)))
    func refusedClientCertificate() async throws {
        let environment = try await MixedTestEnvironment.start(clientCertificates: true)
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 200)
        }
        let otherCA = environment.directory + "/other-ca"
        try SimulatorCertificates.generate(in: otherCA, port: 0)
        let foreign = try SimulatorCertificates.generateLegacyClient(in: otherCA)
        let (providers, certificateFile) = try Self.certificateProviders(environment, validity: SimulatorCertificates.defaultValidity())
        let output = try await Self.runWithProviders(
            providers.replacingOccurrences(of: certificateFile, with: foreign.certificateFile)
                .replacingOccurrences(of: environment.directory + "/legacy-client.key", with: foreign.keyFile),
            name: "refused-client", platform: "ios", environment: environment, configuration: configuration)
        let accepted = environment.apns.accepted().count
        try await environment.stop()
        #expect(output.status == 2, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("the server refused the TLS client certificate (TLSV1_ALERT_UNKNOWN_CA)"), "\(output.stderr)")
        #expect(accepted == 0)
        let decided = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE state IN ('sent', 'unknown')", as: Int64.self)
        }
        #expect(decided == 0)
        #expect(try await Self.inactiveDevices(configuration) == 0)
    }

    @Test("an APNs client certificate that expires within 30 days is used, with a warning naming the file and the date")
    func clientCertificateExpiringSoon() async throws {
        let environment = try await MixedTestEnvironment.start(clientCertificates: true)
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 20)
        }
        let now = Date()
        let (providers, certificateFile) = try Self.certificateProviders(
            environment, validity: now.addingTimeInterval(-86_400 * 300)...now.addingTimeInterval(86_400 * 10 + 3600))
        let output = try await Self.runWithProviders(providers, name: "client-cert-soon", platform: "ios", environment: environment, configuration: configuration)
        let accepted = environment.apns.accepted().count
        try await environment.stop()
        #expect(output.status == 0, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("the client certificate in \(certificateFile) expires on "), "\(output.stderr)")
        #expect(output.stderr.contains("(in 10 days)"), "\(output.stderr)")
        // MixedTestEnvironment.seed's 20 devices hold 10 live iOS tokens: each delivered over the certificate.
        #expect(accepted == 10)
    }

    /// `BUGLE_SEGMENT_DATABASE_URL` names the reader role's own login: a segment that takes the main login's role back
    /// is refused there, while without it (`SET LOCAL ROLE` on the main login) the same segment reads.
    @Test("BUGLE_SEGMENT_DATABASE_URL: segments read through the reader's own login, where set_config('role', …) is refused")
    func segmentLogin() async throws {
        let configuration = try await TestDatabase.fresh()
        let superuser = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 20)
            #expect(try await Migrator(client: client, logger: TestDatabase.logger).allowSegmentReaderLogin())
            return try await LedgerTestSupport.scalar(client, "SELECT rolname::text FROM pg_roles WHERE rolsuper ORDER BY oid LIMIT 1", as: String.self) ?? ""
        }
        var login = configuration
        login.username = Migrator.segmentReaderRole
        let campaign = try CLITests.temporaryFile(
            "segment-login.yaml",
            """
            name: segment-login
            notification_type: segment-login
            dedupe: none
            segment:
              sql: SELECT id AS device_id, user_id, token, platform, set_config('role', '\(superuser)', false) AS was FROM bugle.devices
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Login } }
            """
        )
        let url = try CLITests.url(configuration)
        let through = try await CLITests.bugle(
            ["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": url, "BUGLE_SEGMENT_DATABASE_URL": try CLITests.url(login)])
        #expect(through.status != 0)
        #expect(through.stderr.contains("permission denied to set role"), "\(through.stderr)")
        #expect(!through.stderr.contains("through SET LOCAL ROLE on a superuser login"), "\(through.stderr)")
        let fallback = try await CLITests.bugle(["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(fallback.status == 0, "\(fallback.stderr)")
        // The test server's login is a superuser: the fallback says what that means and what to do.
        #expect(fallback.stderr.contains("segments are read as bugle_segment_reader through SET LOCAL ROLE on a superuser login"), "\(fallback.stderr)")
        #expect(fallback.stdout.contains("20 row(s) read"), "\(fallback.stdout)")
    }

    /// Bugle's own login is no superuser and lacks CREATEROLE (it owns its database and ran `bugle db migrate`), and
    /// there is no BUGLE_SEGMENT_DATABASE_URL: `bugle_segment_reader` cannot be set up, so segment SQL runs with the
    /// login's own rights (the segment below keeps only rows where `current_user` is that login). That was logged at
    /// debug only; each command that reads a segment now warns once and says how to fix it.
    @Test("a non-superuser login without CREATEROLE: segments run with its own rights, and a command reading one warns once saying what to do; not with BUGLE_SEGMENT_DATABASE_URL")
    func segmentsWithoutTheReaderRole() async throws {
        let owner = try await CLITests.ownedDatabase()
        try await Database.withClient(owner, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.seed(client, count: 20)
        }
        let campaign = try CLITests.temporaryFile(
            "own-rights.yaml",
            """
            name: own-rights
            notification_type: own-rights
            dedupe: none
            segment:
              sql: SELECT id AS device_id, user_id, token, platform FROM bugle.devices WHERE current_user = '\(owner.username)'
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Rights } }
            """
        )
        let url = try CLITests.url(owner)
        let dryRun = try await CLITests.bugle(["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": url])
        #expect(dryRun.status == 0, "\(dryRun.stderr)")
        #expect(dryRun.stdout.contains("20 row(s) read"), "the segment ran as \(owner.username): \(dryRun.stdout)")
        let warning = "segments run with the rights of Bugle's own login (\(owner.username))"
        #expect(dryRun.stderr.components(separatedBy: warning).count == 2, "\(dryRun.stderr)")
        #expect(dryRun.stderr.contains("(no CREATEROLE)"), "\(dryRun.stderr)")
        #expect(dryRun.stderr.contains("ALTER ROLE \(owner.username) CREATEROLE") && dryRun.stderr.contains("BUGLE_SEGMENT_DATABASE_URL"), "\(dryRun.stderr)")
        #expect(!dryRun.stderr.contains("on a superuser login"), "\(dryRun.stderr)")
        // Through a login of its own for segments, there is nothing to warn about.
        let separate = try await CLITests.bugle(
            ["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": url, "BUGLE_SEGMENT_DATABASE_URL": url])
        #expect(separate.status == 0, "\(separate.stderr)")
        #expect(!separate.stderr.contains(warning), "\(separate.stderr)")
    }

    @Test("--dry-run --validate sends every FCM message with validate_only: refusals tallied, nothing delivered, nothing written")
    func dryRunValidate() async throws {
        // 100 iOS and 100 Android devices; 5 of the Android tokens have the simulator's `dead` prefix.
        let (environment, configuration, campaign) = try await Self.mixedCampaign(
            devices: 200, name: "validate-only",
            message: """
                default_locale: en
                locales: { en: { title: Hello, body: Validate me } }
                data: { deeplink: "app://sale" }
                """
        )
        let output = try await CLITests.bugle(
            ["run", campaign, "--dry-run", "--validate", "--providers", environment.material.providersFile, "--quiet"],
            environment: ["BUGLE_DATABASE_URL": try CLITests.url(configuration)]
        )
        let counters = environment.fcm.counters()
        let apnsAccepted = environment.apns.accepted().count
        try await environment.stop()
        #expect(output.status == 0, "\(output.stdout) \(output.stderr)")
        #expect(output.stdout.contains("FCM validate_only: 100 checked, 95 valid"), "\(output.stdout)")
        let unregistered = output.stdout.split(separator: "\n").first { $0.contains("UNREGISTERED") }
        #expect(unregistered.map { $0.split(separator: " ").last == "5" } == true, "\(output.stdout)")
        // FCM checked 100 messages and delivered none; APNs was never asked (iOS is not validated through FCM).
        #expect(counters.validateOnly == 95)
        #expect(counters.sendRequests == 100)
        #expect(counters.accepted == 0)
        #expect(apnsAccepted == 0)
        // A dry run writes nothing: no run, no deactivation.
        let (runs, inactive) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            (
                try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.runs", as: Int64.self),
                try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self)
            )
        }
        #expect(runs == 0)
        #expect(inactive == 0)
    }

    /// A message FCM gives no verdict on is not "checked": FCM's quota refusing all but the first message of a
    /// 10-minute window, with a Retry-After longer than a dry run waits, each refusal is reported as not checked (and
    /// not sent again before its Retry-After), and the dry run exits 2. It used to print `FCM validate_only: 20
    /// checked, 1 valid` with `QUOTA_EXCEEDED 19` among the refusals, and exit 0. (Retries within a Retry-After a dry run
    /// waits out are `DryRunValidationTests`'.)
    @Test("--dry-run --validate: messages FCM gave no verdict on (quota) are reported not checked, and the dry run exits 2")
    func dryRunValidateNotChecked() async throws {
        let environment = try await MixedTestEnvironment.start(fcm: { configuration in
            configuration.quotaPerMinute = 1
            configuration.quotaWindow = .seconds(600)
        })
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 40)
        }
        let campaign = try CLITests.temporaryFile(
            "not-checked.yaml",
            """
            name: not-checked
            notification_type: cli-not-checked
            dedupe: none
            segment:
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices WHERE token NOT LIKE 'dead%'
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Validate me } }
            """
        )
        let url = try CLITests.url(configuration)
        let output = try await CLITests.bugle(
            ["run", campaign, "--dry-run", "--validate", "--providers", environment.material.providersFile, "--quiet"], environment: ["BUGLE_DATABASE_URL": url])
        let json = try await CLITests.bugle(
            ["run", campaign, "--dry-run", "--validate", "--providers", environment.material.providersFile, "--json"], environment: ["BUGLE_DATABASE_URL": url])
        let counters = environment.fcm.counters()
        try await environment.stop()
        #expect(output.status == 2, "\(output.stdout) \(output.stderr)")
        let android = output.stdout.split(separator: "\n").first { $0.contains("FCM validate_only:") }.map(String.init) ?? ""
        #expect(android.hasPrefix("FCM validate_only: 1 checked, 1 valid"), "\(output.stdout)")
        #expect(output.stdout.contains("not checked: QUOTA_EXCEEDED "), "\(output.stdout)")
        #expect(output.stderr.contains("the validation is incomplete"), "\(output.stderr)")
        #expect(!output.stdout.contains("    QUOTA_EXCEEDED"), "a refusal tally of an answer that is no verdict: \(output.stdout)")
        let notChecked = output.stdout.split(separator: "\n").first { $0.contains("not checked: QUOTA_EXCEEDED ") }
            .flatMap { $0.split(separator: "QUOTA_EXCEEDED ").last?.split(separator: " ").first }.flatMap { Int($0) } ?? 0
        #expect(notChecked > 0, "\(output.stdout)")
        // Each message was sent once per dry run: a Retry-After of about 10 minutes is not waited out, nor ignored.
        #expect(counters.sendRequests == 2 * (1 + notChecked), "\(counters)")
        #expect(json.status == 2, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let validation = try #require(object["validation"] as? [String: Any])
        let notCheckedJSON = try #require(validation["not_checked"] as? [String: Any])
        #expect(notCheckedJSON["QUOTA_EXCEEDED"] as? Int == 1 + notChecked, "\(validation)")
        #expect(validation["checked"] as? Int == 0, "the quota window was spent by the first dry run: \(validation)")
    }

    /// The segment is prepared before a run is created: SQL the server refuses, a required column missing, or a
    /// `registered_at` that is not a timestamp, is a usage error (exit 1) naming the file and `segment.sql`, and leaves no run behind.
    @Test("bugle run refuses a segment it cannot use before writing anything (exit 1, file and segment.sql named, no run row)", arguments: [
        ("SELECT id AS device_id, user_id, token, platform, 'soon'::text AS registered_at FROM bugle.devices",
         "segment.sql: segment: the segment's registered_at column is of type text"),
        ("DELETE FROM bugle.devices RETURNING id AS device_id, user_id, token, platform", "segment.sql: segment: "),
        ("SELECT 1", "segment.sql: segment: the segment must return a column named device_id (it returns: ?column?)"),
        ("SELECT id AS device_id, user_id, token FROM bugle.devices", "segment.sql: segment: the segment must return a column named platform"),
        ("SELECT 'd' || id AS device_id, user_id, token, platform FROM bugle.devices", "segment.sql: segment: the segment's device_id column is of type text"),
    ])
    func unusableSegmentRefusedFirst(_ sql: String, _ expected: String) async throws {
        let (environment, configuration, _) = try await Self.mixedCampaign(devices: 20, name: "unusable", message: "default_locale: en")
        let campaign = try CLITests.temporaryFile(
            "unusable.yaml",
            """
            name: unusable
            notification_type: cli-unusable
            dedupe: none
            segment:
              sql: \(sql)
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Nobody } }
            """
        )
        let output = try await CLITests.bugle(
            ["run", campaign, "--providers", environment.material.providersFile], environment: ["BUGLE_DATABASE_URL": try CLITests.url(configuration)])
        try await environment.stop()
        #expect(output.status == 1, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("\(campaign): \(expected)"), "\(output.stderr)")
        let (runs, devices) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            (try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.runs", as: Int64.self),
             try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices", as: Int64.self))
        }
        #expect(runs == 0)
        #expect(devices == 20)
    }

    /// RELIABILITY.md §2.3 #38, the file half: the report cannot be written (a file-size limit, which fails the write
    /// with EFBIG as a full disk fails it with ENOSPC, needs no privileges and touches no other test).
    @Test("the CSV cannot be written (file-size limit): exit 2 naming the file and how to write it again, the summary printed, nothing at or beside the path; `bugle report` writes it later")
    func reportWriteFails() async throws {
        let (environment, configuration, campaign) = try await Self.mixedCampaign(
            devices: 400, name: "full-disk", message: "default_locale: en\nlocales: { en: { title: Hello, body: Disk } }")
        let directory = TestScratch.root + "bugle-full-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let csv = directory + "/report.csv"
        let url = try CLITests.url(configuration)
        // `ulimit -f 4`: files of at most 2–4 KB (the report of 400 recipients is about 60 KB).
        let limited = try RunningBugle(
            executable: "/bin/sh",
            arguments: ["-c", #"ulimit -f 4 && exec "$0" "$@""#, Self.binary, "run", campaign, "--providers", environment.material.providersFile, "--csv", csv],
            environment: ["BUGLE_DATABASE_URL": url]
        )
        let output = await limited.finish()
        let delivered = environment.apns.accepted().count + environment.fcm.accepted().count
        try await environment.stop()
        #expect(output.status == 2, "\(output.stdout) \(output.stderr)")
        #expect(output.stderr.contains("cannot write \(csv): File too large"), "\(output.stderr)")
        #expect(output.stderr.contains("the run is recorded; write its report again with `bugle report "), "\(output.stderr)")
        #expect(output.stdout.contains("completed"), "the summary was not printed: \(output.stdout)")
        #expect(delivered == 380)
        // Nothing half-written, neither at the path nor under a temporary name beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        let runID = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT id FROM bugle.runs WHERE status = 'completed' AND campaign = 'full-disk'", as: Int64.self)
        }
        let id = try #require(runID)
        let again = try await CLITests.bugle(["report", String(id), "--csv", csv], environment: ["BUGLE_DATABASE_URL": url])
        #expect(again.status == 0, "\(again.stderr)")
        // RFC 4180 lines end in CRLF (one Character in Swift), so count the LF bytes.
        let lines = try #require(FileManager.default.contents(atPath: csv)).filter { $0 == UInt8(ascii: "\n") }.count
        #expect(lines == 401)
    }

    @Test("a --metrics-port already in use is refused before the run is written: exit 1, the port named, no run left behind")
    func metricsPortInUse() async throws {
        let fixture = try await Fixture.make(devices: 20, rate: 300)
        let taken = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(taken.localAddress?.port)
        let output = try await CLITests.bugle(
            ["run", fixture.campaign, "--providers", fixture.providers, "--metrics-port", String(port)],
            environment: ["BUGLE_DATABASE_URL": fixture.databaseURL])
        try await taken.close()
        try await fixture.stop()
        #expect(output.status == 1, "\(output.stderr)")
        #expect(output.stderr.contains("--metrics-port \(port): 127.0.0.1:\(port) is already in use"), "\(output.stderr)")
        let runs = try await Database.withClient(try DatabaseConfiguration(url: fixture.databaseURL), logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.runs", as: Int64.self)
        }
        #expect(runs == 0)
    }

    /// The auditor's case: the port was checked by binding it and closing it again, and bound for good only once the
    /// segment was read, so a process that took it meanwhile left a `ready` run behind (exit 1, nothing sent).
    @Test("--metrics-port is held from before the run is written to the end: served while the segment is read, said once; port 0 picks one")
    func metricsPortHeldFromTheStart() async throws {
        let fixture = try await Fixture.make(devices: 40, rate: 300)
        // A segment read slowly: 20 rows, a tenth of a second each, five to a page.
        let campaign = try CLITests.temporaryFile(
            "slow-read.yaml",
            """
            name: slow-read
            notification_type: cli-slow-read
            dedupe: none
            segment:
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices WHERE platform = 'ios' AND pg_sleep(0.1)::text = '' ORDER BY id LIMIT 20
              page_size: 5
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Slowly } }
            """
        )
        let port = try freeLoopbackPort()
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-held-\(UUID().uuidString).csv").path
        let running = try RunningBugle(
            executable: Self.binary, arguments: ["run", campaign, "--providers", fixture.providers, "--csv", csv, "--quiet", "--metrics-port", String(port)],
            environment: ["BUGLE_DATABASE_URL": fixture.databaseURL])
        var servedWhileReading = false
        var takenMeanwhile = false
        let configuration = try DatabaseConfiguration(url: fixture.databaseURL)
        while running.process.isRunning && !servedWhileReading {
            let status = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
                try await LedgerTestSupport.scalar(client, "SELECT status FROM bugle.runs ORDER BY id DESC LIMIT 1", as: String.self)
            }
            if status == "materializing", (try? Self.get(port: port, path: "/metrics")) != nil {
                servedWhileReading = true
                // Another process cannot take the port now.
                do {
                    try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: port).get().close()
                    takenMeanwhile = true
                } catch {}
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let output = await running.finish()
        #expect(servedWhileReading, "the endpoint was never seen while the segment was read: \(output.stderr)")
        #expect(!takenMeanwhile)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.components(separatedBy: "metrics at http://127.0.0.1:\(port)/metrics").count == 2, "\(output.stdout)")
        // Port 0: a free one, said.
        let any = try await CLITests.bugle(
            ["run", fixture.campaign, "--providers", fixture.providers, "--csv", csv, "--quiet", "--json", "--metrics-port", "0"],
            environment: ["BUGLE_DATABASE_URL": fixture.databaseURL])
        try await fixture.stop()
        #expect(any.status == 0, "\(any.stderr)")
        #expect(try Regex(#"metrics at http://127\.0\.0\.1:[1-9][0-9]*/metrics"#).firstMatch(in: any.stderr) != nil, "\(any.stderr)")
    }

    @Test("a paced 2/s lane's progress lines read its rate to a tenth, not 0/s or 1/s")
    func progressOfASlowRun() async throws {
        let fixture = try await Fixture.make(devices: 40, rate: 2)
        let campaign = try CLITests.temporaryFile(
            "waiting.yaml",
            """
            name: slow-ios
            notification_type: cli-slow
            dedupe: none
            segment:
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices WHERE platform = 'ios' ORDER BY id LIMIT 6
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Later } }
            delivery: { rate: { apns: 2 } }
            """
        )
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-wait-\(UUID().uuidString).csv").path
        let output = try await CLITests.bugle(
            ["run", campaign, "--providers", fixture.providers, "--csv", csv, "--progress-interval", "0.2"],
            environment: ["BUGLE_DATABASE_URL": fixture.databaseURL])
        try await fixture.stop()
        #expect(output.status == 0, "\(output.stderr)")
        let progress = output.stderr.split(separator: "\n").filter { $0.hasPrefix("progress run=") }
        // Once something finished: the smoothed rate of a 2/s lane, to a tenth.
        let sending = progress.filter { !$0.contains("finished=0/") }
        let decimal = try Regex(#"rate=[0-9]+\.[0-9]/s"#)
        #expect(!sending.isEmpty && sending.allSatisfy { $0.contains(decimal) }, "\(sending)")
    }

    @Test("a lane paced above 999/s reads its rate without a thousands separator in the comma-separated log line")
    func progressOfAFastLane() async throws {
        // About 3,000 iOS devices at 1,500/s: two seconds of progress lines at least.
        let fixture = try await Fixture.make(devices: 6000, rate: 1500)
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-fast-\(UUID().uuidString).csv").path
        let output = try await CLITests.bugle(
            ["run", fixture.campaign, "--providers", fixture.providers, "--csv", csv, "--progress-interval", "0.2"],
            environment: ["BUGLE_DATABASE_URL": fixture.databaseURL])
        try await fixture.stop()
        #expect(output.status == 0, "\(output.stderr)")
        let progress = output.stderr.split(separator: "\n").filter { $0.hasPrefix("progress run=") }
        #expect(!progress.isEmpty && progress.allSatisfy { $0.contains(" apns:rate=1500,in_flight=") }, "\(progress)")
    }

    @Test("not a terminal: progress log lines on stderr, --json summary on stdout, /metrics live during the run")
    func logLinesJSONAndMetrics() async throws {
        let fixture = try await Fixture.make(devices: 1200, rate: 300, unavailableRatio: 0.03)
        let metricsPort = try freeLoopbackPort()
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-out-\(UUID().uuidString).csv").path
        let running = try RunningBugle(
            executable: Self.binary,
            arguments: [
                "run", fixture.campaign, "--providers", fixture.providers, "--csv", csv, "--json",
                "--metrics-port", String(metricsPort), "--progress-interval", "0.3",
            ],
            environment: ["BUGLE_DATABASE_URL": fixture.databaseURL]
        )
        // Scrape until the run has reported deliveries and retries (sending at 300/s for ~2 s; 3% of answers are 503).
        var scraped: String?
        var lastAnswer = "nothing"
        var attempts = 0
        while running.process.isRunning && scraped == nil {
            attempts += 1
            do {
                let text = try Self.get(port: metricsPort, path: "/metrics")
                lastAnswer = text
                if text.contains(#"bugle_sends_total{provider="apns",outcome="delivered"}"#),
                    text.contains(#"bugle_retries_total{provider="apns",code="ServiceUnavailable"}"#)
                {
                    scraped = text
                    continue
                }
            } catch {
                lastAnswer = "\(error)"
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let output = await running.finish()
        try await fixture.stop()
        #expect(output.status == 0, "\(output.stderr)")
        let metrics = try #require(scraped, "no /metrics answer with deliveries during the run; \(attempts) attempt(s), last: \(lastAnswer); stderr: \(output.stderr)")
        #expect(metrics.contains("bugle_in_flight"))
        // The rate in force: 300/s, or less while AIMD reacts to the 503s.
        let rateLine = metrics.split(separator: "\n").first { $0.hasPrefix(#"bugle_rate_limit_per_second{provider="apns"} "#) }
        let rate = rateLine.flatMap { Double($0.split(separator: " ").last ?? "") }
        #expect(rate.map { $0 > 0 && $0 <= 300 } == true, "\(rateLine ?? "no rate line")")
        #expect(metrics.contains("bugle_send_duration_seconds_bucket"))
        // stdout is exactly one JSON object.
        let object = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        #expect(object["status"] as? String == "completed")
        #expect(object["recipients"] as? Int == 600)
        let counts = try #require(object["counts"] as? [[String: Any]])
        let sent = counts.filter { $0["status"] as? String == "sent" }.compactMap { $0["count"] as? Int }.reduce(0, +)
        #expect(sent == 588)
        #expect((object["report"] as? [String: Any])?["rows"] as? Int == 600)
        // Never paused, so its rate is the answered recipients over its whole duration.
        let answered = counts.filter { ["sent", "invalid_token", "failed_permanent", "unknown"].contains($0["status"] as? String ?? "") }
            .compactMap { $0["count"] as? Int }.reduce(0, +)
        #expect(object["paused_seconds"] as? Double == 0)
        let duration = try #require(object["duration_seconds"] as? Double)
        let answeredRate = try #require(object["rate_per_second"] as? Double)
        #expect(answered >= 588 && abs(answeredRate * duration - Double(answered)) < 0.5, "\(answeredRate)/s over \(duration)s, \(answered) answered")
        // Phase timings: 600 recipients paced at 300/s cannot be sent in under a second and a half.
        let phases = try #require(object["phase_seconds"] as? [String: Double])
        #expect(Set(phases.keys) == ["materialize", "send", "report"])
        #expect((phases["send"] ?? 0) >= 1.5, "\(phases)")
        #expect(phases.values.allSatisfy { $0 > 0 }, "\(phases)")
        // Human output went to stderr, with at least one progress line before the final one.
        let progress = output.stderr.split(separator: "\n").filter { $0.hasPrefix("progress run=") }
        #expect(progress.count >= 2, "\(output.stderr)")
        #expect(progress.last?.contains("finished=600/600") == true, "\(progress)")
        #expect(progress.last?.contains("ios:sent=588,failed=0,deactivated=12,unknown=0,retries=") == true, "\(progress)")
        // 3% of first answers were 503: retried answers are counted as such.
        let retries = try Regex(#"ios:[^ ]*,retries=([0-9]+)"#)
        let counted = progress.last.flatMap { try? retries.firstMatch(in: String($0)) }.flatMap { Int($0.output[1].substring ?? "") }
        #expect((counted ?? 0) > 0, "\(progress)")
        #expect(output.stderr.contains("report: \(csv)"))
        #expect(!output.stderr.contains("\u{1B}["))
    }

    @Test("on a terminal: the progress block is redrawn in place")
    func terminal() async throws {
        let fixture = try await Fixture.make(devices: 800, rate: 400)
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-tty-\(UUID().uuidString).csv").path
        let command = [
            Self.binary, "run", fixture.campaign, "--providers", fixture.providers, "--csv", csv, "--progress-interval", "0.2",
        ].map { "'" + $0 + "'" }.joined(separator: " ")
        // script(1) gives the process a pseudo-terminal and copies what it draws to our pipe.
        let running = try RunningBugle(
            executable: "/usr/bin/script",
            arguments: ["-qfec", command, "/dev/null"],
            environment: ["BUGLE_DATABASE_URL": fixture.databaseURL, "TERM": "xterm"]
        )
        let output = await running.finish()
        try await fixture.stop()
        #expect(output.status == 0, "\(output.stdout)")
        let screen = output.stdout
        #expect(screen.contains("\u{1B}[2K"))
        #expect(screen.contains("\u{1B}[3F"), "the block of 3 lines is redrawn in place")
        #expect(screen.contains("of 400"))
        #expect(screen.contains("ios       sent"))
        #expect(screen.contains("apns 400/s"))
        #expect(!screen.contains("progress run="))
    }

    /// `GET path` on 127.0.0.1:port over a plain socket: the whole answer, status line and headers included.
    static func get(port: Int, path: String) throws -> String {
        try loopbackHTTPExchange("GET", port: port, path: path)
    }
}
