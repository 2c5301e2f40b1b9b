import BugleCore
import BugleHTTP2
import BugleLegacyAPNs
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import NIOCore
import PostgresNIO
import Testing

/// The legacy feedback service read to a bad end (cut inside a tuple, stalled), its connection errors in the gateway's
/// words, and the legacy lane's configuration errors. Nothing here waits on a quiet period, so it is not a timing
/// suite: a stall is ended by the read's own timeout, the behaviour under test.
@Suite("Legacy APNs feedback: cut and stalled streams, connection errors, key files (PostgreSQL + legacy simulator)")
struct LegacyFeedbackTests {
    typealias Environment = LegacyTestEnvironment

    /// Queues a tuple for each of `indices` (live tokens), reported an hour ago.
    static func queue(_ simulator: LegacyAPNsSimulator, _ indices: [Int]) {
        let time = UInt32(Date().timeIntervalSince1970 - 3600)
        for index in indices { #expect(simulator.queueFeedback(token: Environment.liveToken(index), time: time)) }
    }

    @Test("a stream cut inside the third tuple hands back the two complete tuples and says it was cut; the service's list is empty")
    func cutStreamKeepsCompleteTuples() async throws {
        try await Environment.withLane(configure: { $0.faults.feedbackCut = .midTuple(after: 2) }) { _, simulator, lane in
            Self.queue(simulator, [1, 2, 3])
            let read = try await lane.readFeedback()
            #expect(read.tuples.map(\.tokenHex) == [Environment.liveToken(1), Environment.liveToken(2)])
            #expect(read.problem == .truncated(completeTuples: 2))
            #expect(simulator.pendingFeedback().isEmpty)
        }
    }

    @Test("a stream that stalls after two tuples hands them back when the read's time is up, saying it did not finish")
    func stalledStreamKeepsCompleteTuples() async throws {
        try await Environment.withLane(configure: { $0.faults.feedbackCut = .stall(after: 2) }) { _, simulator, lane in
            Self.queue(simulator, [1, 2, 3])
            let read = try await lane.readFeedback(timeout: .seconds(2))
            #expect(read.tuples.map(\.tokenHex) == [Environment.liveToken(1), Environment.liveToken(2)])
            #expect(read.problem == .timedOut(completeTuples: 2))
            #expect("\(read.problem.map { "\($0)" } ?? "")" == "the feedback service did not finish in time (after 2 complete tuple(s))")
        }
    }

    /// Six active iOS devices on a fresh database, and a simulator whose feedback stream is cut inside its third tuple:
    /// tuples for devices 4 (gone), 5 (gone, but registered again since) and 6 (the tuple that is cut).
    private static func withCutFeedback(
        _ body: (LegacyTestEnvironment, LegacyAPNsSimulator, DatabaseConfiguration, String) async throws -> Void
    ) async throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        let simulator = LegacyAPNsSimulator(configuration: environment.simulatorConfiguration { $0.faults.feedbackCut = .midTuple(after: 2) })
        let ports = try await simulator.start()
        do {
            try environment.material.writeLegacyProvidersFile(gatewayPort: ports.gateway, feedbackPort: ports.feedback, quietPeriod: 1.0)
            let configuration = try await TestDatabase.fresh()
            let url = try CLITests.url(configuration)
            try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
                try await LegacyAPNsCampaignTests.seedIOS(client, count: 6)
                try await DeviceStore(client: client, logger: TestDatabase.logger).register(userID: "u5", token: Environment.liveToken(5), platform: .ios)
            }
            Self.queue(simulator, [4, 5, 6])
            try await body(environment, simulator, configuration, url)
        } catch {
            try await simulator.stop()
            throw error
        }
        try await simulator.stop()
    }

    /// `(id, is_active, deactivation_reason)` of devices 4...6.
    private static func states(_ configuration: DatabaseConfiguration) async throws -> [String] {
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            let rows = try await client.query(
                "SELECT id, is_active, coalesce(deactivation_reason, '') FROM bugle.devices WHERE id BETWEEN 4 AND 6 ORDER BY id",
                logger: TestDatabase.logger)
            var states: [String] = []
            for try await (id, active, reason) in rows.decode((Int64, Bool, String).self) { states.append("\(id):\(active):\(reason)") }
            return states
        }
    }

    /// It used to exit 2 with `the feedback stream ended inside a tuple (after 2 complete tuple(s))` and deactivate
    /// nobody, though the service had already emptied its list.
    @Test("CLI: `bugle feedback` applies the complete tuples of a stream cut inside a tuple (re-registration respected) and exits 2 saying so")
    func feedbackCommandAppliesCompleteTuples() async throws {
        try await Self.withCutFeedback { environment, _, configuration, url in
            let feedback = try await CLITests.bugle(["feedback", "--providers", environment.material.legacyProvidersFile], environment: ["BUGLE_DATABASE_URL": url])
            #expect(feedback.status == 2, "\(feedback.stderr)")
            #expect(feedback.stdout.contains("feedback: 2 tuple(s); 1 device(s) deactivated, 1 kept (registered again later)"), "\(feedback.stdout)")
            #expect(
                feedback.stderr.contains(
                    "the feedback stream ended inside a tuple (after 2 complete tuple(s)); the 2 complete tuple(s) received before it were applied"),
                "\(feedback.stderr)")
            #expect(try await Self.states(configuration) == ["4:false:feedback", "5:true:", "6:true:"])
        }
    }

    @Test("CLI: the feedback read at the end of a legacy run applies the complete tuples of a cut stream and reports the cut; the run completes")
    func runEndAppliesCompleteTuples() async throws {
        try await Self.withCutFeedback { environment, _, configuration, url in
            let campaign = try LegacyAPNsCampaignTests.legacyCampaign(name: "legacy-cut", filter: "d.id <= 3")
            let csv = TestScratch.root + "bugle-legacy-cut-\(UUID().uuidString).csv"
            defer { try? FileManager.default.removeItem(atPath: csv) }
            let run = try await CLITests.bugle(
                ["run", campaign, "--providers", environment.material.legacyProvidersFile, "--csv", csv], environment: ["BUGLE_DATABASE_URL": url])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("feedback: 2 tuple(s); 1 device(s) deactivated, 1 kept (registered again later)"), "\(run.stdout)")
            #expect(
                run.stderr.contains(
                    "the legacy APNs feedback service was not read to the end: the feedback stream ended inside a tuple (after 2 complete tuple(s)); "
                        + "the 2 complete tuple(s) received before it were applied"),
                "\(run.stderr)")
            #expect(try await Self.states(configuration) == ["4:false:feedback", "5:true:", "6:true:"])
        }
    }

    /// It printed `handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: … TLSV1_ALERT_UNKNOWN_CA]))`.
    @Test("feedback TLS failures read as the gateway's: a client certificate from another CA, a ca_file that is not the server's")
    func feedbackCertificateErrorsReadForPeople() async throws {
        let other = try LegacyTestEnvironment()
        defer { other.remove() }
        try await Environment.withLane(settings: { $0.certFile = other.client.certificateFile; $0.keyFile = other.client.keyFile }) { _, simulator, lane in
            Self.queue(simulator, [1])
            // The handshake fails after TCP connected: no tuple, and the problem is the whole answer.
            let read = try await lane.readFeedback()
            #expect(read.tuples.isEmpty)
            let message = read.problem.map { "\($0)" } ?? ""
            #expect(
                message.hasPrefix("cannot reach the feedback service: the server refused the TLS client certificate (TLSV1_ALERT_UNKNOWN_CA)"),
                "\(message)")
            #expect(message.contains("check the certificate the providers file names") && !message.contains("BoringSSL"), "\(message)")
            #expect(simulator.pendingFeedback().count == 1)
        }
        try await Environment.withLane(settings: { $0.caFile = other.material.caFile }) { _, _, lane in
            let error = await #expect(throws: LegacyAPNSFeedbackError.self) { try await lane.fetchFeedback() }
            let message = error.map { "\($0)" } ?? ""
            #expect(message.hasPrefix("cannot reach the feedback service: the server's TLS certificate was refused"), "\(message)")
            #expect(message.hasSuffix("check the endpoint and ca_file") && !message.contains("BoringSSL"), "\(message)")
        }
    }

    /// It printed `Connection errors: SingleConnectionFailure(target: [IPv4]127.0.0.1/127.0.0.1:…, error: connection reset
    /// (error set): Connection refused) (errno: 111))`, in `bugle feedback` and in the gateway's connect warnings.
    @Test("a proxy that is down (http:// and socks5h://) reads as its address and the system's reason, for the feedback read and the gateway")
    func proxyDownReadsForPeople() async throws {
        for socks in [false, true] {
            let closedPort = try freeLoopbackPort()
            let scheme = socks ? "socks5h" : "http"
            let expected = "cannot reach the proxy \(scheme)://127.0.0.1:\(closedPort) (with credentials): 127.0.0.1:\(closedPort): Connection refused (errno 111)"
            let lines = RecordingLogHandler.Lines()
            let environment = try LegacyTestEnvironment()
            defer { environment.remove() }
            var settings = environment.settings(ports: .init(gateway: 2195, feedback: 2196))
            settings.proxy = .proxy(host: "127.0.0.1", port: closedPort, tls: false, credentialsEnv: "BUGLE_TEST_LEGACY_PROXY", socks: socks)
            let lane = try LegacyAPNSProvider(
                settings: settings,
                options: .init(connectTimeout: .seconds(5), environment: ["BUGLE_TEST_LEGACY_PROXY": "alice:s3cret"]),
                logger: RecordingLogHandler.logger(lines))
            let error = await #expect(throws: LegacyAPNSFeedbackError.self) { try await lane.readFeedback() }
            #expect(error.map { "\($0)" } == "cannot reach the feedback service: " + expected)
            let outcome = await lane.send(Environment.request(token: Environment.liveToken(1), seq: 1))
            #expect(outcome.code == "connect_failed", "\(outcome)")
            let warnings = lines.all.filter { $0.contains("legacy APNs connect failed") }
            #expect(!warnings.isEmpty && warnings.allSatisfy { $0.contains("error=\(expected)") }, "\(warnings)")
            #expect(!lines.all.contains { $0.contains("s3cret") || $0.contains("SingleConnectionFailure") })
            await lane.shutdown()
        }
    }

    /// It said `… is not a PEM private key`.
    @Test("an encrypted legacy key (PKCS#8 or traditional PEM) is refused as encrypted, with how to decrypt it")
    func encryptedKeyIsNamed() throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        let pkcs8 = environment.directory + "/legacy-pkcs8.key"
        #expect(try OpenSSLTool.encrypt(key: environment.client.keyFile, to: pkcs8, passphrase: "pass phrase") == 0)
        let traditional = environment.directory + "/legacy-traditional.key"
        #expect(
            try OpenSSLTool.run(
                ["pkey", "-in", environment.client.keyFile, "-traditional", "-aes256", "-out", traditional, "-passout", "env:PASS"], passphrase: "pass phrase")
                == 0)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: traditional)
        #expect(try String(contentsOfFile: traditional, encoding: .utf8).contains("Proc-Type: 4,ENCRYPTED"))
        for key in [pkcs8, traditional] {
            var settings = environment.settings(ports: .init(gateway: 1, feedback: 2))
            settings.keyFile = key
            let error = #expect(throws: LegacyAPNSConfigurationError.self) { _ = try LegacyAPNSProvider(settings: settings, logger: Environment.logger) }
            #expect(error == .encryptedKey(path: key))
            let message = error.map { "\($0)" } ?? ""
            #expect(message.contains("legacy_apns takes an unencrypted one") && message.contains("openssl pkey -in \(key) -out key.pem"), "\(message)")
        }
        // A key that is no key at all is still said to be that.
        let garbage = environment.directory + "/garbage.key"
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: garbage))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: garbage)
        var settings = environment.settings(ports: .init(gateway: 1, feedback: 2))
        settings.keyFile = garbage
        #expect(throws: LegacyAPNSConfigurationError.invalidKey(path: garbage)) { _ = try LegacyAPNSProvider(settings: settings, logger: Environment.logger) }
    }

    /// `bugle feedback` said `p.yaml: legacy_apns: key file … is readable by other users`, where validate and run name
    /// the line, column and key.
    @Test("CLI: `bugle feedback` names the providers file's line, column and key of a readable, encrypted or expired key file")
    func feedbackLocatesKeyErrors() async throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        let material = environment.material
        try material.writeLegacyProvidersFile(gatewayPort: 1, feedbackPort: 2)
        let path = material.legacyProvidersFile
        // Line 8 `  key_file: PATH`: the value starts at column 13; `cert_file` on line 7 at column 14.
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: environment.client.keyFile)
        let readable = try await CLITests.bugle(["feedback", "--providers", path], environment: ["BUGLE_HOME": environment.directory + "/home"])
        #expect(readable.status == 1)
        #expect(readable.stderr.hasPrefix("bugle: \(path):8:13: legacy_apns.key_file: key file \(environment.client.keyFile) is readable by other users"), "\(readable.stderr)")

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: environment.client.keyFile)
        let plain = try String(contentsOfFile: environment.client.keyFile, encoding: .utf8)
        #expect(try OpenSSLTool.encrypt(key: environment.client.keyFile, to: environment.client.keyFile + ".enc", passphrase: "pass phrase") == 0)
        try FileManager.default.removeItem(atPath: environment.client.keyFile)
        try FileManager.default.moveItem(atPath: environment.client.keyFile + ".enc", toPath: environment.client.keyFile)
        let encrypted = try await CLITests.bugle(["feedback", "--providers", path], environment: ["BUGLE_HOME": environment.directory + "/home"])
        #expect(encrypted.status == 1)
        #expect(encrypted.stderr.hasPrefix("bugle: \(path):8:13: legacy_apns.key_file: \(environment.client.keyFile) is an encrypted private key"), "\(encrypted.stderr)")
        #expect(!encrypted.stderr.contains("PRIVATE KEY-----") && !plain.isEmpty)

        let now = Date()
        try SimulatorCertificates.generateLegacyClient(in: environment.directory, validity: now.addingTimeInterval(-86_400 * 400)...now.addingTimeInterval(-60))
        let expired = try await CLITests.bugle(["feedback", "--providers", path], environment: ["BUGLE_HOME": environment.directory + "/home"])
        #expect(expired.status == 1)
        #expect(
            expired.stderr.hasPrefix("bugle: \(path):7:14: legacy_apns.cert_file: the client certificate in \(environment.client.certificateFile) expired on"),
            "\(expired.stderr)")
    }

    /// They said `p.yaml: legacy_apns: proxy_credentials_env names PX_CRED, which is not set …`, naming no line.
    @Test("CLI: validate and run name the line, column and key of a proxy_credentials_env that is unset or holds no colon (legacy_apns and apns)")
    func proxyCredentialErrorsAreLocated() async throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        let material = environment.material
        let legacy = material.legacyProvidersYAML(gatewayPort: 1, feedbackPort: 2)
            + "  proxy: http://127.0.0.1:3128\n  proxy_credentials_env: BUGLE_TEST_PX_CRED\n"
        let legacyFile = try CLITests.temporaryFile("legacy-proxy.yaml", legacy)
        // The comment line, then 10 keys: proxy_credentials_env is line 12, its value at column 26.
        let apns = """
            apns:
              endpoint: production
              topic: com.example.app
              auth: { token: { team_id: ABCDE12345, key_id: KEY1234567, key_file: \(material.keyFile) } }
              proxy: socks5h://127.0.0.1:1080
              proxy_credentials_env: BUGLE_TEST_PX_CRED

            """
        let apnsFile = try CLITests.temporaryFile("apns-proxy.yaml", apns)
        let campaign = try CLITests.temporaryFile(
            "legacy-proxy-campaign.yaml",
            """
            name: legacy-proxy
            notification_type: promo
            ios_transport: legacy
            segment:
              sql: SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale FROM bugle.devices d
            message:
              default_locale: en
              locales:
                en: { title: "Hello", body: "World" }
            """)
        let home = ["BUGLE_HOME": environment.directory + "/home"]
        for (file, section, line, campaignFile) in [(legacyFile, "legacy_apns", 12, campaign), (apnsFile, "apns", 6, "campaigns/spring-sale.yaml")] {
            let prefix = "bugle: \(file):\(line):26: \(section).proxy_credentials_env: "
            for command in ["validate", "run"] {
                // The run stops at its lanes, before the database; validate does not prepare the segment.
                let arguments = [command, campaignFile, "--providers", file] + (command == "validate" ? ["--offline"] : [])
                let unset = try await CLITests.bugle(arguments, environment: home)
                #expect(unset.status == 1, "\(unset.stderr)")
                #expect(unset.stderr.contains(prefix + "proxy_credentials_env names BUGLE_TEST_PX_CRED, which is not set"), "\(command): \(unset.stderr)")
                var malformed = home
                malformed["BUGLE_TEST_PX_CRED"] = "no-colon-s3cret"
                let noColon = try await CLITests.bugle(arguments, environment: malformed)
                #expect(noColon.status == 1, "\(noColon.stderr)")
                #expect(noColon.stderr.contains(prefix + "BUGLE_TEST_PX_CRED (proxy_credentials_env) must hold user:password"), "\(command): \(noColon.stderr)")
                #expect(!noColon.stderr.contains("s3cret"))
            }
        }
    }
}
