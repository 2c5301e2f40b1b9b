import BugleAPNs
import BugleCore
import BugleHTTP2
import BugleRunner
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import PostgresNIO
import Testing

/// Provider connections through an HTTP proxy's `CONNECT` tunnel (`proxy:` in the providers file): a real proxy
/// (``ConnectProxy``) in front of the simulators, TLS and HTTP/2 inside the tunnel.
@Suite("HTTP proxy (CONNECT tunnels to the simulators)")
struct ProxyTests {
    static let password = "pr0xy-CANARY-s3cret"
    static let credentials = "bugle:" + password

    /// The simulators' providers file with `proxy` (and `proxy_credentials_env`) in both sections.
    static func providers(_ environment: MixedTestEnvironment, proxyPort: Int, credentialsEnv: String?) throws -> String {
        var keys = "  proxy: http://127.0.0.1:\(proxyPort)\n"
        if let credentialsEnv { keys += "  proxy_credentials_env: \(credentialsEnv)\n" }
        return try String(contentsOfFile: environment.material.providersFile, encoding: .utf8)
            .replacingOccurrences(of: "apns:\n", with: "apns:\n" + keys)
            .replacingOccurrences(of: "fcm:\n", with: "fcm:\n" + keys)
    }

    /// What a `bugle run` through a proxy left behind.
    struct ProxiedRun {
        var output: CLITests.Output
        var csv: String
        var requests: [ConnectProxy.Request]
        var relayed: Int
        var proxyPort: Int
        var apns: APNsSimulatorCounters
        var fcm: FCMSimulatorCounters
        var apnsTokens: [String]
        var fcmTokens: [String]
        var apnsTarget: String
        var fcmTarget: String
        var configuration: DatabaseConfiguration
    }

    /// Both simulators behind a ``ConnectProxy`` wanting `requiredAuthorization`, `devices` mixed devices, and
    /// `bugle run` over all of them with `proxy` in both sections and the proxy password `credentials` in
    /// `BUGLE_TEST_PROXY_CREDENTIALS`. Everything is stopped before it returns.
    static func proxiedRun(devices: Int, name: String, requiredAuthorization: String, credentials: String) async throws -> ProxiedRun {
        let (environment, configuration, campaign) = try await CLIRunTests.mixedCampaign(
            devices: devices, name: name, message: "default_locale: en\nlocales: { en: { title: Hello, body: Through the proxy } }")
        let proxy = try await ConnectProxy.start(requiredAuthorization: requiredAuthorization)
        let output: CLITests.Output
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-\(name)-\(UUID().uuidString).csv").path
        defer { try? FileManager.default.removeItem(atPath: csv) }
        do {
            let providersFile = environment.directory + "/\(name)-providers.yaml"
            try Self.providers(environment, proxyPort: proxy.port, credentialsEnv: "BUGLE_TEST_PROXY_CREDENTIALS")
                .write(toFile: providersFile, atomically: true, encoding: .utf8)
            output = try await CLITests.bugle(
                ["run", campaign, "--providers", providersFile, "--csv", csv, "--log-level", "debug"],
                environment: ["BUGLE_DATABASE_URL": try CLITests.url(configuration), "BUGLE_TEST_PROXY_CREDENTIALS": credentials]
            )
        } catch {
            await proxy.stop()
            try await environment.stop()
            throw error
        }
        let run = ProxiedRun(
            output: output, csv: (try? String(contentsOfFile: csv, encoding: .utf8)) ?? "", requests: proxy.requests,
            relayed: proxy.bytesRelayed, proxyPort: proxy.port, apns: environment.apns.counters(), fcm: environment.fcm.counters(),
            apnsTokens: environment.apns.accepted().map(\.token), fcmTokens: environment.fcm.accepted().compactMap(\.token),
            apnsTarget: "127.0.0.1:\(environment.apnsPort)", fcmTarget: "127.0.0.1:\(environment.fcmPort)", configuration: configuration)
        await proxy.stop()
        try await environment.stop()
        return run
    }

    @Test("a mixed campaign through a proxy that wants credentials: APNs, FCM and the token endpoint all tunnel through it, every live token once, the password nowhere in the output")
    func mixedCampaignThroughProxy() async throws {
        let authorization = HTTPProxy.basicAuthorization(Self.credentials)
        let run = try await Self.proxiedRun(devices: 400, name: "proxied", requiredAuthorization: authorization, credentials: Self.credentials)
        #expect(run.output.status == 0, "\(run.output.stdout)\n\(run.output.stderr)")
        // 200 iOS and 200 Android devices, every 20th of each dead.
        #expect(run.apnsTokens.count == 190 && Set(run.apnsTokens).count == 190, "\(run.apnsTokens.count) APNs deliveries")
        #expect(run.fcmTokens.count == 190 && Set(run.fcmTokens).count == 190, "\(run.fcmTokens.count) FCM deliveries")
        #expect(run.fcm.tokenGrants >= 1, "the token endpoint was never asked")
        // Every connection either simulator accepted came through a tunnel: none went around the proxy.
        #expect(run.requests.allSatisfy { $0.status == 200 && $0.authorization == authorization }, "\(run.requests)")
        #expect(run.requests.allSatisfy { $0.host == $0.target && $0.userAgent == "bugle" }, "\(run.requests)")
        #expect(run.requests.filter { $0.target == run.apnsTarget }.count == run.apns.connections, "\(run.requests), \(run.apns.connections) APNs connections")
        #expect(run.requests.filter { $0.target == run.fcmTarget }.count == run.fcm.connections, "\(run.requests), \(run.fcm.connections) FCM connections")
        #expect(run.apns.connections >= 1 && run.fcm.connections >= 2, "FCM sends and the token endpoint each need a connection")
        #expect(run.relayed > 0)
        let everything = run.output.stdout + run.output.stderr + run.csv
        #expect(everything.contains("through the proxy http://127.0.0.1:\(run.proxyPort) (with credentials)"), "\(run.output.stderr)")
        #expect(!everything.contains(Self.password))
        #expect(!everything.contains(authorization.dropFirst("Basic ".count)))
    }

    @Test("a proxy refusing the credentials halts the run at once (exit 2, ProxyRefused, naming the proxy and 407): nothing sent or deactivated, the password nowhere")
    func wrongCredentials() async throws {
        let run = try await Self.proxiedRun(
            devices: 200, name: "proxy-refused", requiredAuthorization: HTTPProxy.basicAuthorization("bugle:another"), credentials: Self.credentials)
        #expect(run.output.status == 2, "\(run.output.stdout)\n\(run.output.stderr)")
        #expect(run.output.stderr.contains("ProxyRefused") && run.output.stderr.contains("407"), "\(run.output.stderr)")
        #expect(run.output.stderr.contains("http://127.0.0.1:\(run.proxyPort)"), "\(run.output.stderr)")
        #expect(!run.requests.isEmpty && run.requests.allSatisfy { $0.status == 407 }, "\(run.requests)")
        #expect(run.apns.accepted + run.fcm.accepted == 0 && run.apns.connections + run.fcm.connections == 0)
        #expect(!(run.output.stdout + run.output.stderr + run.csv).contains(Self.password))
        let (deactivated, sentOrFailed) = try await Database.withClient(run.configuration, logger: TestDatabase.logger) { client in
            (
                try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self),
                try await LedgerTestSupport.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE state IN ('sent', 'failed_permanent', 'invalid_token')", as: Int64.self)
            )
        }
        #expect(deactivated == 0 && sentOrFailed == 0)
    }

    /// The pool alone against a proxy: a refusal reconnecting cannot fix (403) fails requests at once as a
    /// configuration error; a proxy that cannot reach the provider (502), and a proxy nothing answers at, are outages,
    /// retried with backoff, and say which.
    @Test("the pool through a proxy: 403 is a configuration refusal; 502 (provider unreachable) and an unreachable proxy are retryable connect failures naming the proxy")
    func poolRefusals() async throws {
        let forbidding = try await ConnectProxy.start(refuseWith: 403)
        let gateway = try await ConnectProxy.start()
        // Ports nothing listens on: the provider behind `gateway` (which answers 502), and a proxy that is not there.
        let closedPort = try freeLoopbackPort()
        let deadProxyPort = try freeLoopbackPort()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        let headers = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":authority", "x"), (":path", "/")])
        for (proxyPort, expected) in [(forbidding.port, "403"), (gateway.port, "502"), (deadProxyPort, "cannot reach the proxy")] {
            var configuration = HTTP2ConnectionPool.Configuration(host: "127.0.0.1", port: closedPort, connections: 1, tls: tls, serviceName: "APNs")
            configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxyPort)
            let pool = try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: APNsTestEnvironment.logger)
            let error = await #expect(throws: HTTP2TransportError.self) {
                _ = try await pool.execute(headers: headers, body: ByteBuffer(), deadline: .now() + .seconds(5))
            }
            await pool.shutdown()
            switch error {
            case .proxyRefused(let message)? where expected == "403":
                #expect(message.contains("403") && message.contains("127.0.0.1:\(closedPort)") && message.contains("http://127.0.0.1:\(proxyPort)"), "\(message)")
                #expect(HTTP2TransportError.proxyRefused(message).outcome == .halt(code: "ProxyRefused", message: message))
            case .notWritten(let message)? where expected != "403":
                #expect(message.contains(expected) && message.contains("http://127.0.0.1:\(proxyPort)"), "\(message)")
            default:
                Issue.record("\(expected): \(String(describing: error))")
            }
        }
        await forbidding.stop()
        await gateway.stop()
    }

    /// tinyproxy, a proxy written by others: its own answers (HTTP/1.0 407 with an HTML body, HTTP/1.0 200 for a
    /// tunnel) and its own CONNECT handling, with the APNs lane and a real ledger behind it.
    @Test(
        "through tinyproxy: 1,000 iOS devices, every live token once, every APNs connection tunnelled; a wrong password halts with ProxyRefused (tinyproxy answers it 401)",
        .enabled(if: Tinyproxy.enabled, Tinyproxy.reason))
    func throughTinyproxy() async throws {
        try await Tinyproxy.with(user: "bugle", password: Self.password) { proxy in
            let environment = try APNsTestEnvironment()
            defer { environment.remove() }
            let simulator = APNsSimulator(configuration: environment.simulatorConfiguration())
            let port = try await simulator.start()
            var settings = environment.settings(port: port)
            settings.proxy = .proxy(host: "127.0.0.1", port: proxy.port, credentialsEnv: "TINYPROXY_CREDENTIALS")
            do {
                let provider = try APNSProvider(
                    settings: settings, options: .init(environment: ["TINYPROXY_CREDENTIALS": Self.credentials]), logger: APNsTestEnvironment.logger)
                let refused = try APNSProvider(
                    settings: settings, options: .init(environment: ["TINYPROXY_CREDENTIALS": "bugle:wrong"]), logger: APNsTestEnvironment.logger)
                try await LedgerTestSupport.withFreshDatabase { client in
                    try await APNsCampaignTests.seedIOS(client, count: 1_000)
                    let (_, result) = try await APNsCampaignTests.run(client, LedgerTestSupport.campaign(window: 200), provider: provider)
                    #expect(result.ending == .completed)
                }
                let outcome = await refused.send(APNsTestEnvironment.request(token: String(repeating: "ab", count: 32), seq: 1))
                await provider.shutdown()
                await refused.shutdown()
                let tokens = simulator.accepted().map(\.token)
                #expect(tokens.count == 950 && Set(tokens).count == 950, "\(tokens.count) deliveries")
                let connections = simulator.counters().connections
                // Every connection the simulator accepted is a tunnel tinyproxy opened; the refused lane asked once per
                // slot (2) and then stopped, instead of reconnecting.
                let asked = proxy.connectRequests(to: "127.0.0.1:\(port)")
                #expect(connections >= 1 && proxy.establishedTunnels() == connections, "\(connections) connections; \(proxy.log().suffix(2000))")
                #expect(asked - connections >= 1 && asked - connections <= 2, "\(asked) tunnels asked for, \(connections) opened")
                guard case .halt(let code, let message) = outcome else {
                    Issue.record("a refused password gave \(outcome)")
                    try await simulator.stop()
                    return
                }
                // tinyproxy answers wrong credentials 401 (407 only when none are sent).
                #expect(code == "ProxyRefused" && message.contains("401") && message.contains("did not accept the credentials"), "\(message)")
                #expect(!message.contains(Self.password), "\(message)")
            } catch {
                try await simulator.stop()
                throw error
            }
            try await simulator.stop()
        }
    }
}
