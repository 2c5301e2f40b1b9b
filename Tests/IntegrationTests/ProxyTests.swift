import BugleCore
import BugleHTTP2
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

    /// Runs `bugle run` over every device of the mixed campaign with `providers`, the proxy password in
    /// `BUGLE_TEST_PROXY_CREDENTIALS` as `credentials`. Returns the output and the CSV's text.
    static func run(
        name: String, providers: String, credentials: String, environment: MixedTestEnvironment, campaign: String, configuration: DatabaseConfiguration
    ) async throws -> (CLITests.Output, String) {
        let providersFile = environment.directory + "/\(name)-providers.yaml"
        try providers.write(toFile: providersFile, atomically: true, encoding: .utf8)
        let csv = FileManager.default.temporaryDirectory.appendingPathComponent("bugle-\(name)-\(UUID().uuidString).csv").path
        defer { try? FileManager.default.removeItem(atPath: csv) }
        let output = try await CLITests.bugle(
            ["run", campaign, "--providers", providersFile, "--csv", csv, "--log-level", "debug"],
            environment: ["BUGLE_DATABASE_URL": try CLITests.url(configuration), "BUGLE_TEST_PROXY_CREDENTIALS": credentials]
        )
        return (output, (try? String(contentsOfFile: csv, encoding: .utf8)) ?? "")
    }

    @Test("a mixed campaign through a proxy that wants credentials: APNs, FCM and the token endpoint all tunnel through it, every live token once, the password nowhere in the output")
    func mixedCampaignThroughProxy() async throws {
        let (environment, configuration, campaign) = try await CLIRunTests.mixedCampaign(
            devices: 400, name: "proxied", message: "default_locale: en\nlocales: { en: { title: Hello, body: Through the proxy } }")
        let proxy = try await ConnectProxy.start(requiredAuthorization: HTTPProxy.basicAuthorization(Self.credentials))
        let result: (CLITests.Output, String)
        do {
            let providers = try Self.providers(environment, proxyPort: proxy.port, credentialsEnv: "BUGLE_TEST_PROXY_CREDENTIALS")
            result = try await Self.run(
                name: "proxied", providers: providers, credentials: Self.credentials, environment: environment, campaign: campaign,
                configuration: configuration)
        } catch {
            await proxy.stop()
            try await environment.stop()
            throw error
        }
        let (output, csv) = result
        let requests = proxy.requests
        let relayed = proxy.bytesRelayed
        let apns = environment.apns.counters()
        let fcm = environment.fcm.counters()
        let apnsTokens = environment.apns.accepted().map(\.token)
        let fcmTokens = environment.fcm.accepted().compactMap(\.token)
        await proxy.stop()
        try await environment.stop()

        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        // 200 iOS and 200 Android devices, every 20th of each dead.
        #expect(apnsTokens.count == 190 && Set(apnsTokens).count == 190, "\(apnsTokens.count) APNs deliveries")
        #expect(fcmTokens.count == 190 && Set(fcmTokens).count == 190, "\(fcmTokens.count) FCM deliveries")
        #expect(fcm.tokenGrants >= 1, "the token endpoint was never asked")
        // Every connection either simulator accepted came through a tunnel: none went around the proxy.
        let apnsTarget = "127.0.0.1:\(environment.apnsPort)"
        let fcmTarget = "127.0.0.1:\(environment.fcmPort)"
        #expect(requests.allSatisfy { $0.status == 200 && $0.authorization == HTTPProxy.basicAuthorization(Self.credentials) }, "\(requests)")
        #expect(requests.filter { $0.target == apnsTarget }.count == apns.connections, "\(requests) against \(apns.connections) APNs connections")
        #expect(requests.filter { $0.target == fcmTarget }.count == fcm.connections, "\(requests) against \(fcm.connections) FCM connections")
        #expect(apns.connections >= 1 && fcm.connections >= 2, "FCM sends and the token endpoint each need a connection")
        #expect(relayed > 0)
        let everything = output.stdout + output.stderr + csv
        #expect(everything.contains("through the proxy http://127.0.0.1:\(proxy.port) (with credentials)"), "\(output.stderr)")
        #expect(!everything.contains(Self.password))
        #expect(!everything.contains(HTTPProxy.basicAuthorization(Self.credentials).dropFirst("Basic ".count)))
    }

    @Test("a proxy refusing the credentials halts the run at once (exit 2, ProxyRefused, naming the proxy and 407): nothing sent or deactivated, the password nowhere")
    func wrongCredentials() async throws {
        let (environment, configuration, campaign) = try await CLIRunTests.mixedCampaign(
            devices: 200, name: "proxy-refused", message: "default_locale: en\nlocales: { en: { title: Hello, body: Refused } }")
        let proxy = try await ConnectProxy.start(requiredAuthorization: HTTPProxy.basicAuthorization("bugle:another"))
        let result: (CLITests.Output, String)
        do {
            let providers = try Self.providers(environment, proxyPort: proxy.port, credentialsEnv: "BUGLE_TEST_PROXY_CREDENTIALS")
            result = try await Self.run(
                name: "proxy-refused", providers: providers, credentials: Self.credentials, environment: environment, campaign: campaign,
                configuration: configuration)
        } catch {
            await proxy.stop()
            try await environment.stop()
            throw error
        }
        let (output, csv) = result
        let requests = proxy.requests
        let accepted = environment.apns.counters().accepted + environment.fcm.counters().accepted
        let connections = environment.apns.counters().connections + environment.fcm.counters().connections
        await proxy.stop()
        try await environment.stop()

        #expect(output.status == 2, "\(output.stdout)\n\(output.stderr)")
        #expect(output.stderr.contains("ProxyRefused") && output.stderr.contains("407"), "\(output.stderr)")
        #expect(output.stderr.contains("http://127.0.0.1:\(proxy.port)"), "\(output.stderr)")
        #expect(!requests.isEmpty && requests.allSatisfy { $0.status == 407 }, "\(requests)")
        #expect(accepted == 0 && connections == 0)
        let everything = output.stdout + output.stderr + csv
        #expect(!everything.contains(Self.password))
        let (deactivated, sentOrFailed) = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            (
                try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self),
                try await LedgerTestSupport.scalar(
                    client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE state IN ('sent', 'failed', 'invalid_token')", as: Int64.self)
            )
        }
        #expect(deactivated == 0 && sentOrFailed == 0)
    }

    /// The pool alone against a proxy: a refusal reconnecting cannot fix (403) fails requests at once as a
    /// configuration error; a proxy that cannot reach the provider (502) is an outage, retried with backoff.
    @Test("the pool through a proxy: 403 is a configuration refusal, 502 (provider unreachable) a retryable connect failure")
    func poolRefusals() async throws {
        let forbidding = try await ConnectProxy.start(refuseWith: 403)
        let gateway = try await ConnectProxy.start()
        // A port nothing listens on: the proxy answers 502.
        let closedPort = try freeLoopbackPort()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        let headers = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":authority", "x"), (":path", "/")])
        for (proxy, expectConfiguration) in [(forbidding, true), (gateway, false)] {
            var configuration = HTTP2ConnectionPool.Configuration(host: "127.0.0.1", port: closedPort, connections: 1, tls: tls, serviceName: "APNs")
            configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port)
            let pool = try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: APNsTestEnvironment.logger)
            let error = await #expect(throws: HTTP2TransportError.self) {
                _ = try await pool.execute(headers: headers, body: ByteBuffer(), deadline: .now() + .seconds(5))
            }
            await pool.shutdown()
            switch error {
            case .proxyRefused(let message)? where expectConfiguration:
                #expect(message.contains("403") && message.contains("127.0.0.1:\(closedPort)") && message.contains("http://127.0.0.1:\(proxy.port)"), "\(message)")
                #expect(HTTP2TransportError.proxyRefused(message).outcome == .halt(code: "ProxyRefused", message: message))
            case .notWritten(let message)? where !expectConfiguration:
                #expect(message.contains("502"), "\(message)")
            default:
                Issue.record("\(expectConfiguration ? "403" : "502"): \(String(describing: error))")
            }
        }
        await forbidding.stop()
        await gateway.stop()
    }
}
