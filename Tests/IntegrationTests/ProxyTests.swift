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
    /// Each refusal here comes well within a second; the deadline only bounds a test that went wrong, and is long so a
    /// loaded machine (the whole suite on two cores) is not mistaken for one.
    static let refusalDeadline = TimeAmount.seconds(30)

    static let password = "pr0xy-CANARY-s3cret"
    static let credentials = "bugle:" + password

    /// TLS to the proxy itself (an `https://` proxy): its server context, and the CA file the providers file names as
    /// `proxy_ca_file` (nil: none named).
    struct ProxyTLS {
        var context: NIOSSLContext
        var caFile: String?

        /// A proxy certificate for 127.0.0.1 from a CA of its own (not the simulators'), in `directory`.
        static func ownCA(in directory: String, trusted: Bool) throws -> ProxyTLS {
            let material = try SimulatorCertificates.generate(in: directory, port: 0)
            let configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(material.serverCertificatePEM.utf8), format: .pem))],
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(material.serverKeyPEM.utf8), format: .pem)))
            return ProxyTLS(context: try NIOSSLContext(configuration: configuration), caFile: trusted ? material.caFile : nil)
        }
    }

    /// The simulators' providers file with `proxy` (and `proxy_credentials_env`, `proxy_ca_file`) in both sections.
    static func providers(
        _ environment: MixedTestEnvironment, proxyPort: Int, credentialsEnv: String?, tls: Bool = false, caFile: String? = nil, scheme: String? = nil
    ) throws -> String {
        var keys = "  proxy: \(scheme ?? (tls ? "https" : "http"))://127.0.0.1:\(proxyPort)\n"
        if let credentialsEnv { keys += "  proxy_credentials_env: \(credentialsEnv)\n" }
        if let caFile { keys += "  proxy_ca_file: \(caFile)\n" }
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
    static func proxiedRun(
        devices: Int, name: String, requiredAuthorization: String, credentials: String, tls: ((String) throws -> ProxyTLS)? = nil,
        refusalDelay: TimeAmount = .zero
    ) async throws -> ProxiedRun {
        let (environment, configuration, campaign) = try await CLIRunTests.mixedCampaign(
            devices: devices, name: name, message: "default_locale: en\nlocales: { en: { title: Hello, body: Through the proxy } }")
        let proxyTLS: ProxyTLS?
        do {
            proxyTLS = try tls?(environment.directory + "/proxy-ca")
        } catch {
            try await environment.stop()
            throw error
        }
        let proxy = try await ConnectProxy.start(requiredAuthorization: requiredAuthorization, tls: proxyTLS?.context, refusalDelay: refusalDelay)
        let output: CLITests.Output
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-\(name)-\(UUID().uuidString).csv").path
        defer { try? FileManager.default.removeItem(atPath: csv) }
        do {
            let providersFile = environment.directory + "/\(name)-providers.yaml"
            try Self.providers(environment, proxyPort: proxy.port, credentialsEnv: "BUGLE_TEST_PROXY_CREDENTIALS", tls: proxyTLS != nil, caFile: proxyTLS?.caFile)
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

    @Test(
        "a mixed campaign through a proxy that wants credentials (http://, and https:// with its own CA in proxy_ca_file): APNs, FCM and the token endpoint all tunnel through it, every live token once, the password nowhere in the output",
        arguments: [false, true])
    func mixedCampaignThroughProxy(tls: Bool) async throws {
        let authorization = HTTPProxy.basicAuthorization(Self.credentials)
        let run = try await Self.proxiedRun(
            devices: 400, name: tls ? "proxied-tls" : "proxied", requiredAuthorization: authorization, credentials: Self.credentials,
            tls: tls ? { try ProxyTLS.ownCA(in: $0, trusted: true) } : nil)
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
        #expect(everything.contains("through the proxy \(tls ? "https" : "http")://127.0.0.1:\(run.proxyPort) (with credentials)"), "\(run.output.stderr)")
        #expect(!everything.contains(Self.password))
        #expect(!everything.contains(authorization.dropFirst("Basic ".count)))
    }

    @Test(
        "a proxy refusing the credentials (http://, and https://) halts the run at once (exit 2, ProxyRefused, naming the proxy and 407): nothing sent, ambiguous or deactivated, the password nowhere",
        arguments: [false, true])
    func wrongCredentials(tls: Bool) async throws {
        let run = try await Self.proxiedRun(
            devices: 200, name: tls ? "proxy-refused-tls" : "proxy-refused", requiredAuthorization: HTTPProxy.basicAuthorization("bugle:another"),
            credentials: Self.credentials, tls: tls ? { try ProxyTLS.ownCA(in: $0, trusted: true) } : nil,
            // A refusal that takes a while, as squid's does: sends must not be written before the tunnel is up.
            refusalDelay: .milliseconds(300))
        #expect(run.output.status == 2, "\(run.output.stdout)\n\(run.output.stderr)")
        #expect(run.output.stderr.contains("ProxyRefused") && run.output.stderr.contains("407"), "\(run.output.stderr)")
        #expect(run.output.stderr.contains("\(tls ? "https" : "http")://127.0.0.1:\(run.proxyPort)"), "\(run.output.stderr)")
        #expect(!run.requests.isEmpty && run.requests.allSatisfy { $0.status == 407 }, "\(run.requests)")
        #expect(run.apns.accepted + run.fcm.accepted == 0 && run.apns.connections + run.fcm.connections == 0)
        #expect(!(run.output.stdout + run.output.stderr + run.csv).contains(Self.password))
        let (deactivated, sentOrFailed, states) = try await Database.withClient(run.configuration, logger: TestDatabase.logger) { client in
            (
                try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE NOT is_active", as: Int64.self),
                try await LedgerTestSupport.scalar(
                    client, """
                    SELECT count(*)::bigint FROM bugle.run_recipients
                     WHERE state IN ('sent', 'invalid_token', 'failed_permanent', 'unknown') OR attempts > 0 OR outcome_code = 'connection_lost'
                    """, as: Int64.self),
                try await LedgerTestSupport.scalar(
                    client, "SELECT string_agg(DISTINCT state || ':' || coalesce(outcome_code, '-') || ':' || attempts, ',') FROM bugle.run_recipients", as: String.self)
            )
        }
        #expect(deactivated == 0 && sentOrFailed == 0, "\(states)")
    }

    @Test("an https:// proxy whose certificate Bugle does not trust (no proxy_ca_file; the providers' ca_file does not count) halts at once: exit 2, ProxyRefused naming proxy_ca_file, no CONNECT sent, nothing sent")
    func untrustedProxyCertificate() async throws {
        let run = try await Self.proxiedRun(
            devices: 200, name: "proxy-untrusted", requiredAuthorization: HTTPProxy.basicAuthorization(Self.credentials),
            credentials: Self.credentials, tls: { try ProxyTLS.ownCA(in: $0, trusted: false) })
        #expect(run.output.status == 2, "\(run.output.stdout)\n\(run.output.stderr)")
        #expect(run.output.stderr.contains("ProxyRefused") && run.output.stderr.contains("proxy_ca_file"), "\(run.output.stderr)")
        #expect(run.output.stderr.contains("https://127.0.0.1:\(run.proxyPort)"), "\(run.output.stderr)")
        // The handshake failed before the CONNECT: the credentials never left Bugle.
        #expect(run.requests.isEmpty, "\(run.requests)")
        #expect(run.apns.accepted + run.fcm.accepted == 0 && run.apns.connections + run.fcm.connections == 0)
        #expect(!(run.output.stdout + run.output.stderr + run.csv).contains(Self.password))
    }

    /// The pool alone against a proxy: a refusal reconnecting cannot fix (403) fails requests at once as a
    /// configuration error; a proxy that cannot reach the provider (502), and a proxy nothing answers at, are outages,
    /// retried with backoff, and say which.
    @Test("the pool through a proxy: 403 is a configuration refusal; 502 (provider unreachable), an unreachable proxy and one hanging up unanswered are retryable connect failures naming the proxy")
    func poolRefusals() async throws {
        let forbidding = try await ConnectProxy.start(refuseWith: 403)
        let gateway = try await ConnectProxy.start()
        // Ports nothing listens on: the provider behind `gateway` (which answers 502), and a proxy that is not there.
        let closedPort = try freeLoopbackPort()
        let deadProxyPort = try freeLoopbackPort()
        // A port that hangs up on the plain CONNECT without a word, as some TLS servers do with bytes that are not TLS.
        let hangingUp = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(HangUp()) } }
            .bind(host: "127.0.0.1", port: 0).get()
        let hangingUpPort = try #require(hangingUp.localAddress?.port)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        let headers = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":authority", "x"), (":path", "/")])
        for (proxyPort, expected) in [
            (forbidding.port, "403"), (gateway.port, "502"), (deadProxyPort, "cannot reach the proxy"),
            (hangingUpPort, "closed the connection before answering CONNECT 127.0.0.1:\(closedPort) (if that port expects TLS, write https:// for the proxy)"),
        ] {
            var configuration = HTTP2ConnectionPool.Configuration(host: "127.0.0.1", port: closedPort, connections: 1, tls: tls, serviceName: "APNs")
            configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxyPort)
            let pool = try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: APNsTestEnvironment.logger)
            let error = await #expect(throws: HTTP2TransportError.self) {
                _ = try await pool.execute(headers: headers, body: ByteBuffer(), deadline: .now() + Self.refusalDeadline)
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
        try await hangingUp.close()
    }

    /// Closes the connection at the first bytes it reads.
    private final class HangUp: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.close(promise: nil) }
    }

    /// An `https://` proxy whose certificate, from a CA Bugle trusts (`proxy_ca_file`), names another host: a
    /// configuration refusal before the `CONNECT`, saying so, never an outage retried.
    @Test("the pool through an https:// proxy whose certificate names another host: refused as configuration, before any CONNECT")
    func misnamedProxyCertificate() async throws {
        let directory = try TestScratch.directory(prefix: "proxy-misnamed")
        let material = try SimulatorCertificates.generate(in: directory, port: 0)
        let elsewhere = try SimulatorCertificates.issue(
            in: directory, commonName: "proxy.elsewhere.example", purpose: .server(dnsNames: ["proxy.elsewhere.example"], ipv4Addresses: []))
        let context = try NIOSSLContext(configuration: TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(elsewhere.certificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(elsewhere.keyPEM.utf8), format: .pem))))
        let proxy = try await ConnectProxy.start(tls: context)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        var configuration = HTTP2ConnectionPool.Configuration(host: "127.0.0.1", port: try freeLoopbackPort(), connections: 1, tls: tls, serviceName: "APNs")
        configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port, tls: true, caFile: material.caFile)
        let pool = try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: APNsTestEnvironment.logger)
        let headers = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":authority", "x"), (":path", "/")])
        let error = await #expect(throws: HTTP2TransportError.self) {
            _ = try await pool.execute(headers: headers, body: ByteBuffer(), deadline: .now() + Self.refusalDeadline)
        }
        await pool.shutdown()
        let requests = proxy.requests
        await proxy.stop()
        guard case .proxyRefused(let message)? = error else {
            Issue.record("expected a proxy refusal, got \(String(describing: error))")
            return
        }
        #expect(message.contains("https://127.0.0.1:\(proxy.port)") && message.contains("does not name the proxy's host"), "\(message)")
        #expect(requests.isEmpty, "\(requests)")
    }

    /// An `https://` proxy completes its own TLS handshake before it answers the `CONNECT`: that handshake must not
    /// make the connection look ready. A request leased on it would be written into a tunnel that never opens, and
    /// come back lost after being written (ambiguous: maybe delivered) instead of refused.
    @Test("the pool through an https:// proxy that refuses the credentials after its handshake: the request fails as a proxy refusal, never as written and lost")
    func tlsProxyRefusalAfterHandshake() async throws {
        let directory = try TestScratch.directory(prefix: "proxy-tls")
        let proxyTLS = try ProxyTLS.ownCA(in: directory, trusted: true)
        let proxy = try await ConnectProxy.start(
            requiredAuthorization: HTTPProxy.basicAuthorization("bugle:right"), tls: proxyTLS.context, refusalDelay: .milliseconds(300))
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        var configuration = HTTP2ConnectionPool.Configuration(host: "127.0.0.1", port: try freeLoopbackPort(), connections: 1, tls: tls, serviceName: "APNs")
        configuration.proxy = HTTPProxy(
            host: "127.0.0.1", port: proxy.port, tls: true, caFile: proxyTLS.caFile, authorization: HTTPProxy.basicAuthorization("bugle:wrong"))
        let pool = try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: APNsTestEnvironment.logger)
        let headers = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", "x"), (":path", "/")])
        let error = await #expect(throws: HTTP2TransportError.self) {
            _ = try await pool.execute(headers: headers, body: ByteBuffer(string: "{}"), deadline: .now() + Self.refusalDeadline)
        }
        await pool.shutdown()
        await proxy.stop()
        guard case .proxyRefused(let message)? = error else {
            Issue.record("expected a proxy refusal, got \(String(describing: error))")
            return
        }
        #expect(message.contains("407") && message.contains("https://127.0.0.1:\(proxy.port)"), "\(message)")
    }

    /// A proxy that refuses one connection at once and the other only after 1.5 s: while the second is still being
    /// refused, the first slot's backoff ends, and it used to dial again (and again) for the waiting request. A refusal
    /// is configuration, so nothing is redialled while it stands: the request fails once the second refusal arrives,
    /// after exactly one `CONNECT` per slot. (Found by CI: under a loaded machine, a refused lane asked tinyproxy 5 times.)
    @Test("a refused proxy is not asked again while a slot's refusal is still on its way: one CONNECT per slot, then proxyRefused")
    func noRedialWhileRefused() async throws {
        let proxy = try await ConnectProxy.start(
            requiredAuthorization: HTTPProxy.basicAuthorization("bugle:right"), refusalDelays: [.zero, .milliseconds(1_500)])
        var configuration = HTTP2ConnectionPool.Configuration(
            host: "127.0.0.1", port: try freeLoopbackPort(), connections: 2, tls: TLSConfiguration.makeClientConfiguration(), serviceName: "APNs")
        configuration.backoffBase = .milliseconds(20)
        configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port, authorization: HTTPProxy.basicAuthorization("bugle:wrong"))
        let pool = try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: APNsTestEnvironment.logger)
        let headers = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", "x"), (":path", "/")])
        let error = await #expect(throws: HTTP2TransportError.self) {
            _ = try await pool.execute(headers: headers, body: ByteBuffer(string: "{}"), deadline: .now() + .seconds(10))
        }
        await pool.shutdown()
        await proxy.stop()
        if case .proxyRefused? = error {} else { Issue.record("expected a proxy refusal, got \(String(describing: error))") }
        #expect(proxy.requests.count == 2, "\(proxy.requests.count) CONNECTs for two slots")
    }

    /// An APNs simulator on loopback for `body` (its environment, the simulator, its port), stopped however `body` ends.
    static func withAPNsSimulator<T>(_ body: (APNsTestEnvironment, APNsSimulator, Int) async throws -> T) async throws -> T {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration())
        let port = try await simulator.start()
        do {
            let result = try await body(environment, simulator, port)
            try await simulator.stop()
            return result
        } catch {
            try await simulator.stop()
            throw error
        }
    }

    /// The APNs lane through `proxy` (`proxy_ca_file` `caFile`) with the proxy password variable set to `credentials`.
    static func provider(_ environment: APNsTestEnvironment, port: Int, proxy: ProxySetting, caFile: String? = nil, credentials: String) throws -> APNSProvider {
        var settings = environment.settings(port: port)
        settings.proxy = proxy
        settings.proxyCAFile = caFile
        return try APNSProvider(settings: settings, options: .init(environment: ["PROXY_CREDENTIALS": credentials]), logger: APNsTestEnvironment.logger)
    }

    /// 1,000 iOS devices (50 dead) into a fresh ledger, sent by `provider` to completion.
    static func deliverThousand(_ provider: APNSProvider) async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await APNsCampaignTests.seedIOS(client, count: 1_000)
            let (_, result) = try await APNsCampaignTests.run(client, LedgerTestSupport.campaign(window: 200), provider: provider)
            #expect(result.ending == .completed)
        }
        await provider.shutdown()
    }

    /// What one notification through `provider` came to (then shuts it down): a refusal halts with `ProxyRefused`.
    static func refusal(_ provider: APNSProvider) async -> (code: String, message: String)? {
        let outcome = await provider.send(APNsTestEnvironment.request(token: String(repeating: "ab", count: 32), seq: 1))
        await provider.shutdown()
        guard case .halt(let code, let message) = outcome else {
            Issue.record("expected a halt, got \(outcome)")
            return nil
        }
        return (code, message)
    }

    /// tinyproxy, a proxy written by others: its own answers (HTTP/1.0 407 with an HTML body, HTTP/1.0 200 for a
    /// tunnel) and its own CONNECT handling, with the APNs lane and a real ledger behind it.
    @Test(
        "through tinyproxy: 1,000 iOS devices, every live token once, every APNs connection tunnelled; a wrong password halts with ProxyRefused (tinyproxy answers it 401)",
        .enabled(if: Tinyproxy.enabled, Tinyproxy.reason))
    func throughTinyproxy() async throws {
        try await Tinyproxy.with(user: "bugle", password: Self.password) { proxy in
            try await Self.withAPNsSimulator { environment, simulator, port in
                let setting = ProxySetting.proxy(host: "127.0.0.1", port: proxy.port, tls: false, credentialsEnv: "PROXY_CREDENTIALS")
                try await Self.deliverThousand(try Self.provider(environment, port: port, proxy: setting, credentials: Self.credentials))
                let refusal = await Self.refusal(try Self.provider(environment, port: port, proxy: setting, credentials: "bugle:wrong"))
                let tokens = simulator.accepted().map(\.token)
                #expect(tokens.count == 950 && Set(tokens).count == 950, "\(tokens.count) deliveries")
                let connections = simulator.counters().connections
                // Every connection the simulator accepted is a tunnel tinyproxy opened; the refused lane asked once per
                // slot (2) and then stopped, instead of reconnecting.
                let asked = proxy.connectRequests(to: "127.0.0.1:\(port)")
                #expect(connections >= 1 && proxy.establishedTunnels() == connections, "\(connections) connections; \(proxy.log().suffix(2000))")
                #expect(asked - connections >= 1 && asked - connections <= 2, "\(asked) tunnels asked for, \(connections) opened")
                // tinyproxy answers wrong credentials 401 (407 only when none are sent).
                #expect(refusal?.code == "ProxyRefused", "\(String(describing: refusal))")
                #expect(refusal?.message.contains("401") == true && refusal?.message.contains("did not accept the credentials") == true, "\(String(describing: refusal))")
                #expect(refusal?.message.contains(Self.password) == false)
            }
        }
    }

    /// squid, the proxy most egress networks run, as `http://` and as `https://` (TLS to the proxy, its certificate
    /// from a CA of its own named by `proxy_ca_file`), with Basic credentials; and the two ways to give the wrong
    /// scheme, which halt instead of reconnecting.
    @Test(
        "through squid: 1,000 iOS devices over http:// and again over https:// (proxy_ca_file), every live token once, every connection a squid tunnel; a wrong password (407) and either wrong scheme halt with ProxyRefused",
        .enabled(if: Squid.enabled, Squid.reason))
    func throughSquid() async throws {
        let material = try SimulatorCertificates.generate(in: TestScratch.directory(prefix: "squid-ca"), port: 0)
        try await Squid.with(
            user: "bugle", password: Self.password, certificatePEM: material.serverCertificatePEM, keyPEM: material.serverKeyPEM
        ) { squid in
            let plain = ProxySetting.proxy(host: "127.0.0.1", port: squid.httpPort, tls: false, credentialsEnv: "PROXY_CREDENTIALS")
            let secure = ProxySetting.proxy(host: "127.0.0.1", port: squid.httpsPort, tls: true, credentialsEnv: "PROXY_CREDENTIALS")
            for (setting, caFile) in [(plain, nil), (secure, material.caFile)] {
                try await Self.withAPNsSimulator { environment, simulator, port in
                    try await Self.deliverThousand(try Self.provider(environment, port: port, proxy: setting, caFile: caFile, credentials: Self.credentials))
                    let tokens = simulator.accepted().map(\.token)
                    #expect(tokens.count == 950 && Set(tokens).count == 950, "\(setting): \(tokens.count) deliveries")
                    let connections = simulator.counters().connections
                    let tunnels = try await squid.tunnels(to: "127.0.0.1:\(port)", reaching: connections)
                    #expect(connections >= 1 && tunnels == connections, "\(setting): \(tunnels) squid tunnels, \(connections) connections")
                }
            }
            try await Self.withAPNsSimulator { environment, simulator, port in
                let refusals = [
                    ("wrong password", await Self.refusal(try Self.provider(environment, port: port, proxy: secure, caFile: material.caFile, credentials: "bugle:wrong"))),
                    // http:// at the TLS port: squid answers the CONNECT with a TLS alert.
                    ("http:// at the TLS port", await Self.refusal(try Self.provider(environment, port: port, proxy: .proxy(host: "127.0.0.1", port: squid.httpsPort, tls: false, credentialsEnv: "PROXY_CREDENTIALS"), credentials: Self.credentials))),
                    // https:// at the plain port: squid answers the TLS handshake in plain HTTP.
                    ("https:// at the plain port", await Self.refusal(try Self.provider(environment, port: port, proxy: .proxy(host: "127.0.0.1", port: squid.httpPort, tls: true, credentialsEnv: "PROXY_CREDENTIALS"), credentials: Self.credentials))),
                ]
                let expected = ["wrong password": "407", "http:// at the TLS port": "write its URL as https://", "https:// at the plain port": "write its URL as http://"]
                for (what, refusal) in refusals {
                    #expect(refusal?.code == "ProxyRefused", "\(what): \(String(describing: refusal))")
                    #expect(refusal?.message.contains(expected[what] ?? "?") == true, "\(what): \(String(describing: refusal))")
                    #expect(refusal?.message.contains(Self.password) == false)
                }
                #expect(simulator.counters().connections == 0)
                #expect(squid.connectLines(to: "127.0.0.1:\(port)").allSatisfy { $0.contains("TCP_DENIED/407") }, "\(squid.connectLines(to: "127.0.0.1:\(port)"))")
            }
        }
    }

    /// microsocks, a SOCKS5 server written by others, with a user name and password: the APNs lane's every connection
    /// is one of its tunnels; wrong credentials, and none where it wants them, halt instead of reconnecting.
    @Test(
        "through microsocks (socks5h://, user and password): 1,000 iOS devices, every live token once, every APNs connection a microsocks tunnel; a wrong password and no credentials halt with ProxyRefused",
        .enabled(if: Microsocks.enabled, Microsocks.reason))
    func throughMicrosocks() async throws {
        try await Microsocks.with(user: "bugle", password: Self.password) { socks in
            try await Self.withAPNsSimulator { environment, simulator, port in
                let setting = ProxySetting.proxy(host: "127.0.0.1", port: socks.port, tls: false, credentialsEnv: "PROXY_CREDENTIALS", socks: true)
                try await Self.deliverThousand(try Self.provider(environment, port: port, proxy: setting, credentials: Self.credentials))
                let tokens = simulator.accepted().map(\.token)
                #expect(tokens.count == 950 && Set(tokens).count == 950, "\(tokens.count) deliveries")
                let connections = simulator.counters().connections
                #expect(connections >= 1 && socks.tunnels(to: "127.0.0.1:\(port)") == connections, "\(connections) connections; \(socks.log().suffix(1000))")

                let wrong = await Self.refusal(try Self.provider(environment, port: port, proxy: setting, credentials: "bugle:wrong"))
                #expect(wrong?.code == "ProxyRefused" && wrong?.message.contains("rejected the user name and password") == true, "\(String(describing: wrong))")
                let anonymous = ProxySetting.proxy(host: "127.0.0.1", port: socks.port, tls: false, credentialsEnv: nil, socks: true)
                let none = await Self.refusal(try Self.provider(environment, port: port, proxy: anonymous, credentials: Self.credentials))
                #expect(none?.code == "ProxyRefused" && none?.message.contains("asks for credentials: set proxy_credentials_env") == true, "\(String(describing: none))")
                for refusal in [wrong, none] { #expect(refusal?.message.contains(Self.password) == false) }
                #expect(simulator.counters().connections == connections, "a refused lane reached the simulator")
            }
        }
    }

    /// Both lanes and FCM's token endpoint through microsocks, with `bugle run` as a user runs it.
    @Test(
        "a mixed campaign through microsocks (bugle run, proxy: socks5h://, proxy_credentials_env): APNs, FCM and the token endpoint each a tunnel, every live token once",
        .enabled(if: Microsocks.enabled, Microsocks.reason))
    func mixedCampaignThroughMicrosocks() async throws {
        try await Self.withMixedCampaign(name: "socks") { environment, run in
            try await Microsocks.with(user: "bugle", password: Self.password) { socks in
                let providersFile = environment.directory + "/socks-providers.yaml"
                try Self.providers(environment, proxyPort: socks.port, credentialsEnv: "BUGLE_TEST_PROXY_CREDENTIALS", scheme: "socks5h")
                    .write(toFile: providersFile, atomically: true, encoding: .utf8)
                let validate = try await run(["validate", "--offline"], providersFile)
                #expect(validate.stdout.contains("through the proxy socks5h://127.0.0.1:\(socks.port) (with credentials)"), "\(validate.stdout)\n\(validate.stderr)")
                _ = try await run(["run", "--quiet"], providersFile)
                let (apnsConnections, fcmConnections) = Self.expectMixedDeliveries(environment)
                #expect(socks.tunnels(to: "127.0.0.1:\(environment.apnsPort)") == apnsConnections, "\(socks.log().suffix(1000))")
                #expect(socks.tunnels(to: "127.0.0.1:\(environment.fcmPort)") == fcmConnections, "\(socks.log().suffix(1000))")
            }
        }
    }

    /// A mixed campaign of 400 devices (190 live on each platform) and its simulators, for `body` to send through a
    /// proxy with `run(["run", …], providersFile)`, which runs `bugle` on the campaign with the proxy password in
    /// `BUGLE_TEST_PROXY_CREDENTIALS`, expects exit 0 and no password in the output. The simulators stop however `body` ends.
    static func withMixedCampaign(
        name: String, _ body: (MixedTestEnvironment, _ run: ([String], String) async throws -> CLITests.Output) async throws -> Void
    ) async throws {
        let (environment, configuration, campaign) = try await CLIRunTests.mixedCampaign(
            devices: 400, name: name, message: "default_locale: en\nlocales: { en: { title: Hello, body: Through a proxy } }")
        let url = try CLITests.url(configuration)
        let run: ([String], String) async throws -> CLITests.Output = { arguments, providersFile in
            let output = try await CLITests.bugle(
                [arguments[0], campaign, "--providers", providersFile] + arguments.dropFirst(),
                environment: ["BUGLE_DATABASE_URL": url, "BUGLE_TEST_PROXY_CREDENTIALS": Self.credentials])
            #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
            #expect(!(output.stdout + output.stderr).contains(Self.password))
            return output
        }
        do {
            try await body(environment, run)
        } catch {
            try await environment.stop()
            throw error
        }
        try await environment.stop()
    }

    /// Every live token of both platforms delivered once, the token endpoint asked; returns the connections each
    /// simulator accepted (at least one to APNs, two to FCM and its token endpoint).
    static func expectMixedDeliveries(_ environment: MixedTestEnvironment) -> (apns: Int, fcm: Int) {
        let apnsTokens = environment.apns.accepted().map(\.token)
        let fcmTokens = environment.fcm.accepted().compactMap(\.token)
        #expect(apnsTokens.count == 190 && Set(apnsTokens).count == 190, "\(apnsTokens.count) APNs deliveries")
        #expect(fcmTokens.count == 190 && Set(fcmTokens).count == 190, "\(fcmTokens.count) FCM deliveries")
        #expect(environment.fcm.counters().tokenGrants >= 1)
        let connections = (environment.apns.counters().connections, environment.fcm.counters().connections)
        #expect(connections.0 >= 1 && connections.1 >= 2, "\(connections)")
        return connections
    }

    /// Both lanes and FCM's token endpoint through squid's `https_port`, with `bugle run` as a user runs it.
    @Test(
        "a mixed campaign through squid's https_port (bugle run, proxy_ca_file, credentials): APNs, FCM and the token endpoint each a squid tunnel, every live token once",
        .enabled(if: Squid.enabled, Squid.reason))
    func mixedCampaignThroughSquidTLS() async throws {
        try await Self.withMixedCampaign(name: "squid-tls") { environment, run in
            let material = try SimulatorCertificates.generate(in: environment.directory + "/squid-ca", port: 0)
            try await Squid.with(
                user: "bugle", password: Self.password, certificatePEM: material.serverCertificatePEM, keyPEM: material.serverKeyPEM
            ) { squid in
                let providersFile = environment.directory + "/squid-providers.yaml"
                try Self.providers(environment, proxyPort: squid.httpsPort, credentialsEnv: "BUGLE_TEST_PROXY_CREDENTIALS", tls: true, caFile: material.caFile)
                    .write(toFile: providersFile, atomically: true, encoding: .utf8)
                _ = try await run(["run", "--quiet"], providersFile)
                let (apnsConnections, fcmConnections) = Self.expectMixedDeliveries(environment)
                let apnsTunnels = try await squid.tunnels(to: "127.0.0.1:\(environment.apnsPort)", reaching: apnsConnections)
                let fcmTunnels = try await squid.tunnels(to: "127.0.0.1:\(environment.fcmPort)", reaching: fcmConnections)
                #expect(apnsTunnels == apnsConnections, "\(apnsTunnels) tunnels, \(apnsConnections) APNs connections")
                #expect(fcmTunnels == fcmConnections, "\(fcmTunnels) tunnels, \(fcmConnections) FCM connections")
            }
        }
    }
}
