import BugleCore
import BugleLegacyAPNs
import BugleSimulator
import BugleTesting
import Foundation
import NIOCore
import Testing

/// The legacy lane against the in-process legacy simulator over real TLS with client certificates.
/// A timing suite (``TimingPhase``): see ``LegacyAPNsCampaignTests``.
@Suite("Legacy APNs lane against the simulator (TLS, client certificate)", .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct LegacyAPNsLaneTests {
    typealias Environment = LegacyTestEnvironment

    @Test("error responses mid-stream: the named tokens are invalid, every other one delivered and accepted exactly once (also in the JSONL record)")
    func errorMidStream() async throws {
        let recordFile = TestScratch.root + "bugle-legacy-records-\(UUID().uuidString).jsonl"
        defer { try? FileManager.default.removeItem(atPath: recordFile) }
        try await Environment.withLane(configure: { $0.recordFile = recordFile }) { _, simulator, lane in
            let tokens = (0..<300).map { $0 % 100 == 60 ? Environment.scriptedToken(prefix: "bad0", $0) : Environment.liveToken($0) }
            let outcomes = await sendAll(lane, tokens.enumerated().map { Environment.request(token: $1, seq: Int64($0)) }, concurrency: 300)
            for (token, outcome) in zip(tokens, outcomes) {
                if token.hasPrefix("bad0") {
                    #expect(outcome == .invalidToken(code: "InvalidToken", invalidSince: nil))
                } else {
                    #expect(outcome == .delivered(providerMessageID: nil))
                }
            }
            let records = simulator.accepted()
            #expect(records.count == 297)
            #expect(Set(records.map(\.token)) == Set(tokens.filter { !$0.hasPrefix("bad0") }))
            #expect(records.allSatisfy { $0.command == 2 && $0.priority == 10 && $0.expiry == 1_900_000_000 })
            #expect(simulator.counters().rejectedByStatus[8] == 3)
            #expect(lane.statistics().errorResponses["InvalidToken"] == 3)
            simulator.flushRecords()
            let lines = try String(contentsOfFile: recordFile, encoding: .utf8).split(separator: "\n")
            let decoded = try lines.map { try JSONDecoder().decode(LegacyAPNsRecord.self, from: Data($0.utf8)) }
            #expect(decoded == records)
        }
    }

    @Test("after an error response the new connection ramps up: the next error discards at most the first burst")
    func rampAfterError() async throws {
        // A long ramp step makes the bound deterministic: the second error response always arrives before the
        // second burst is written.
        try await Environment.withLane(options: LegacyAPNSProvider.Options(rampStart: 32, rampInterval: .milliseconds(400))) { _, simulator, lane in
            let tokens = (0..<300).map { [10, 20].contains($0) ? Environment.scriptedToken(prefix: "bad0", $0) : Environment.liveToken($0) }
            let outcomes = await sendAll(lane, tokens.enumerated().map { Environment.request(token: $1, seq: Int64($0)) }, concurrency: 300)
            #expect(outcomes.filter { $0 == .delivered(providerMessageID: nil) }.count == 298)
            #expect(Set(simulator.accepted().map(\.token)).count == 298)
            #expect(simulator.accepted().count == 298)
            let statistics = lane.statistics()
            #expect(statistics.connections == 3)
            // The 300 concurrent sends reach the lane in roughly, not exactly, token order. First connection: at
            // most the 299 frames written after token 10. Second: one burst of at most 32 frames, so at most the 31
            // after token 20 are discarded. Without the ramp the second connection writes every resend at once and
            // discards up to 288 after token 20 (measured in order: 289 + 22; a send overtaking token 10 adds one).
            #expect(statistics.resent <= 299 + 31)
        }
    }

    @Test("status 10 after every 40th notification: reconnect and resend after the last good identifier, nothing lost or doubled")
    func shutdownResend() async throws {
        try await Environment.withLane(configure: { $0.faults = .init(shutdownEvery: 40) }) { _, simulator, lane in
            let tokens = (0..<200).map(Environment.liveToken)
            let outcomes = await sendAll(lane, tokens.enumerated().map { Environment.request(token: $1, seq: Int64($0)) }, concurrency: 200)
            #expect(outcomes.allSatisfy { $0 == .delivered(providerMessageID: nil) })
            let records = simulator.accepted()
            #expect(records.count == 200)
            #expect(Set(records.map(\.token)).count == 200)
            #expect(simulator.counters().shutdownsSent == 5)
            #expect((lane.statistics().errorResponses["Shutdown"] ?? 0) >= 4)
            #expect(lane.statistics().connections >= 5)
        }
    }

    @Test("silent close: the unconfirmed window is ambiguous, nothing unaccepted is called delivered")
    func silentClose() async throws {
        try await Environment.withLane(configure: { $0.faults = .init(silentCloseEvery: 50) }) { _, simulator, lane in
            let tokens = (0..<200).map(Environment.liveToken)
            let outcomes = await sendAll(lane, tokens.enumerated().map { Environment.request(token: $1, seq: Int64($0)) }, concurrency: 200)
            let accepted = Set(simulator.accepted().map(\.token))
            var ambiguous = 0
            for (token, outcome) in zip(tokens, outcomes) {
                switch outcome {
                case .delivered: #expect(accepted.contains(token), "delivered but never accepted")
                case .ambiguous(let code): ambiguous += 1; #expect(code == "connection_closed")
                default: Issue.record("unexpected \(outcome)")
                }
            }
            #expect(ambiguous > 0)
            #expect(simulator.counters().silentCloses >= 1)
            #expect(lane.statistics().silentCloses >= 1)
        }
    }

    @Test("local refusals touch no socket: a token that is not 32 bytes, a payload over payload_limit")
    func localRefusals() async throws {
        try await Environment.withLane(settings: { $0.payloadLimit = 256 }) { _, simulator, lane in
            let short = await lane.send(Environment.request(token: String(repeating: "0a", count: 31), seq: 1))
            #expect(short == .rejected(code: "InvalidTokenSize"))
            var large = Environment.request(token: Environment.liveToken(2), seq: 2)
            large.body = Array(("{\"aps\":{},\"x\":\"" + String(repeating: "y", count: 300) + "\"}").utf8)
            #expect(await lane.send(large) == .rejected(code: "payload_too_large"))
            #expect(simulator.counters().connections == 0)
        }
    }

    @Test("a client certificate from another CA is refused at the handshake: the first refusal halts the lane naming the gateway's alert, nothing accepted")
    func foreignClientCertificate() async throws {
        let other = try LegacyTestEnvironment()
        defer { other.remove() }
        try await Environment.withLane(
            options: LegacyAPNSProvider.Options(connectTimeout: .seconds(5)),
            settings: {
                $0.certFile = other.client.certificateFile
                $0.keyFile = other.client.keyFile
            }
        ) { _, simulator, lane in
            for message in await Self.twoHalts(lane, code: "TLSCertificateRejected") {
                #expect(message.hasPrefix("cannot connect to the legacy APNs gateway: the server refused the TLS client certificate (TLSV1_ALERT_UNKNOWN_CA)"), "\(message)")
            }
            #expect(simulator.accepted().isEmpty)
            #expect(simulator.counters().handshakeFailures >= 1)
            // No reconnect loop: one refused handshake per send at most.
            #expect(lane.statistics().connectFailures <= 2)
        }
    }

    @Test(
        "through an HTTP CONNECT proxy with credentials (http://, and https:// with TLS to the proxy): every notification accepted once and the feedback service read, each simulator connection a tunnel the proxy opened",
        arguments: [false, true])
    func throughProxy(tls: Bool) async throws {
        let credentials = "alice:pr0xy-s3cret"
        let directory = TestScratch.root + "bugle-legacy-proxy-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let proxyTLS = tls ? try ProxyTests.ProxyTLS.ownCA(in: directory, trusted: true) : nil
        let proxy = try await ConnectProxy.start(requiredAuthorization: HTTPProxy.basicAuthorization(credentials), tls: proxyTLS?.context)
        do {
            try await Environment.withLane(
                options: LegacyAPNSProvider.Options(environment: ["BUGLE_TEST_LEGACY_PROXY": credentials]),
                settings: {
                    $0.proxy = .proxy(host: "127.0.0.1", port: proxy.port, tls: tls, credentialsEnv: "BUGLE_TEST_LEGACY_PROXY")
                    $0.proxyCAFile = proxyTLS?.caFile
                }
            ) { _, simulator, lane in
                let ports = try #require(simulator.ports)
                try await Self.sendAndReadFeedback(lane, simulator)
                let requests = proxy.requests
                let counters = simulator.counters()
                #expect(requests.filter { $0.target == "127.0.0.1:\(ports.gateway)" && $0.status == 200 }.count == counters.connections, "\(requests)")
                #expect(requests.filter { $0.target == "127.0.0.1:\(ports.feedback)" && $0.status == 200 }.count == counters.feedbackConnections)
                #expect(requests.allSatisfy { $0.authorization == HTTPProxy.basicAuthorization(credentials) })
            }
        } catch {
            await proxy.stop()
            throw error
        }
        await proxy.stop()
    }

    @Test(
        "through microsocks (SOCKS5, user name and password): every notification accepted once and the feedback service read, each simulator connection a tunnel it opened",
        .enabled(if: Microsocks.enabled, Microsocks.reason))
    func throughSOCKS5() async throws {
        try await Microsocks.with(user: "alice", password: "s0cks-s3cret") { socks in
            try await Environment.withLane(
                options: LegacyAPNSProvider.Options(environment: ["BUGLE_TEST_LEGACY_PROXY": "alice:s0cks-s3cret"]),
                settings: { $0.proxy = .proxy(host: "127.0.0.1", port: socks.port, tls: false, credentialsEnv: "BUGLE_TEST_LEGACY_PROXY", socks: true) }
            ) { _, simulator, lane in
                let ports = try #require(simulator.ports)
                try await Self.sendAndReadFeedback(lane, simulator)
                let counters = simulator.counters()
                #expect(socks.tunnels(to: "127.0.0.1:\(ports.gateway)") == counters.connections, "\(socks.log())")
                #expect(socks.tunnels(to: "127.0.0.1:\(ports.feedback)") == counters.feedbackConnections, "\(socks.log())")
            }
        }
    }

    /// Sends two notifications one after the other; each must halt the lane with `code`. - Returns: their messages.
    private static func twoHalts(_ lane: LegacyAPNSProvider, code expected: String) async -> [String] {
        var messages: [String] = []
        for seq in Int64(1)...2 {
            let outcome = await lane.send(Environment.request(token: Environment.liveToken(Int(seq)), seq: seq))
            guard case .halt(let code, let message) = outcome else {
                Issue.record("expected a halt, got \(outcome)")
                continue
            }
            #expect(code == expected)
            messages.append(message)
        }
        return messages
    }

    /// 200 notifications, two of them to invalid tokens (each error response closes the connection, so three gateway
    /// connections), then one feedback read.
    private static func sendAndReadFeedback(_ lane: LegacyAPNSProvider, _ simulator: LegacyAPNsSimulator) async throws {
        let tokens = (0..<200).map { [50, 120].contains($0) ? Environment.scriptedToken(prefix: "bad0", $0) : Environment.liveToken($0) }
        let outcomes = await sendAll(lane, tokens.enumerated().map { Environment.request(token: $1, seq: Int64($0)) }, concurrency: 200)
        #expect(outcomes.filter { $0 == .delivered(providerMessageID: nil) }.count == 198)
        #expect(outcomes.filter { $0 == .invalidToken(code: "InvalidToken", invalidSince: nil) }.count == 2)
        #expect(simulator.accepted().count == 198)
        #expect(Set(simulator.accepted().map(\.token)).count == 198)
        #expect(simulator.counters().connections >= 3)
        #expect(simulator.queueFeedback(token: Environment.liveToken(7), time: 1_700_000_000))
        let tuples = try await lane.fetchFeedback()
        #expect(tuples.map(\.tokenHex) == [Environment.liveToken(7)])
        #expect(simulator.counters().feedbackConnections == 1)
    }

    @Test(
        "through squid's https_port with Basic credentials: every notification accepted once and the feedback service read, each simulator connection a TCP_TUNNEL/200 in squid's access log",
        .enabled(if: Squid.enabled, Squid.reason))
    func throughSquid() async throws {
        let directory = TestScratch.root + "bugle-legacy-squid-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let proxyMaterial = try SimulatorCertificates.generate(in: directory, port: 0)
        try await Squid.with(user: "bugle", password: "squ1d-s3cret", certificatePEM: proxyMaterial.serverCertificatePEM, keyPEM: proxyMaterial.serverKeyPEM) { squid in
            try await Environment.withLane(
                options: LegacyAPNSProvider.Options(environment: ["BUGLE_TEST_LEGACY_PROXY": "bugle:squ1d-s3cret"]),
                settings: {
                    $0.proxy = .proxy(host: "127.0.0.1", port: squid.httpsPort, tls: true, credentialsEnv: "BUGLE_TEST_LEGACY_PROXY")
                    $0.proxyCAFile = proxyMaterial.caFile
                }
            ) { _, simulator, lane in
                let ports = try #require(simulator.ports)
                try await Self.sendAndReadFeedback(lane, simulator)
                // Squid logs a tunnel when it closes.
                await lane.shutdown()
                let counters = simulator.counters()
                #expect(try await squid.tunnels(to: "127.0.0.1:\(ports.gateway)", reaching: counters.connections) == counters.connections)
                #expect(try await squid.tunnels(to: "127.0.0.1:\(ports.feedback)", reaching: 1) == counters.feedbackConnections)
            }
        }
    }

    @Test("a proxy refusing the credentials halts the lane naming the proxy and the status, never the password; the gateway is never reached; the feedback read fails naming the proxy")
    func proxyRefusal() async throws {
        let proxy = try await ConnectProxy.start(requiredAuthorization: HTTPProxy.basicAuthorization("alice:right"))
        do {
            try await Environment.withLane(
                options: LegacyAPNSProvider.Options(connectTimeout: .seconds(5), environment: ["BUGLE_TEST_LEGACY_PROXY": "alice:wr0ng-s3cret"]),
                settings: { $0.proxy = .proxy(host: "127.0.0.1", port: proxy.port, tls: false, credentialsEnv: "BUGLE_TEST_LEGACY_PROXY") }
            ) { _, simulator, lane in
                let ports = try #require(simulator.ports)
                for message in await Self.twoHalts(lane, code: "ProxyRefused") {
                    #expect(
                        message.hasPrefix(
                            "cannot connect to the legacy APNs gateway: the proxy http://127.0.0.1:\(proxy.port) (with credentials) refused the tunnel to 127.0.0.1:\(ports.gateway): 407"),
                        "\(message)")
                    #expect(!message.contains("wr0ng-s3cret"))
                }
                // No reconnect loop: one refused tunnel per send at most.
                #expect(lane.statistics().connectFailures <= 2)
                let feedback = await #expect(throws: LegacyAPNSFeedbackError.self) { try await lane.fetchFeedback() }
                #expect(feedback.map { "\($0)" }?.contains("the proxy http://127.0.0.1:\(proxy.port) (with credentials) refused the tunnel to 127.0.0.1:\(ports.feedback): 407") == true, "\(String(describing: feedback))")
                let counters = simulator.counters()
                #expect(counters.connections == 0 && counters.feedbackConnections == 0)
                #expect(simulator.accepted().isEmpty)
            }
        } catch {
            await proxy.stop()
            throw error
        }
        await proxy.stop()
    }

    @Test("a group-readable client key is refused unless allowed")
    func readableKey() throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: environment.client.keyFile)
        let settings = environment.settings(ports: .init(gateway: 1, feedback: 2))
        #expect(throws: LegacyAPNSConfigurationError.keyFileReadableByOthers(path: environment.client.keyFile, mode: 0o640)) {
            _ = try LegacyAPNSProvider(settings: settings, logger: Environment.logger)
        }
        _ = try LegacyAPNSProvider(settings: settings, options: .init(allowReadableKeys: true), logger: Environment.logger)
    }

    @Test("an expired or not-yet-valid client certificate is refused when the lane is built, naming the file and the date")
    func outOfDateClientCertificate() throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        let now = Date()
        let settings = environment.settings(ports: .init(gateway: 1, feedback: 2))
        for (validity, reason) in [
            (now.addingTimeInterval(-86_400 * 400)...now.addingTimeInterval(-60), "expired on"),
            (now.addingTimeInterval(3600)...now.addingTimeInterval(86_400 * 400), "is not valid before"),
        ] {
            try SimulatorCertificates.generateLegacyClient(in: environment.directory, validity: validity)
            let error = #expect(throws: LegacyAPNSConfigurationError.self) {
                _ = try LegacyAPNSProvider(settings: settings, logger: Environment.logger)
            }
            let message = error.map { String(describing: $0) } ?? ""
            #expect(message.hasPrefix("the client certificate in \(environment.client.certificateFile) \(reason) 20"), "\(message)")
        }
        // A valid one again: the lane builds.
        try SimulatorCertificates.generateLegacyClient(in: environment.directory)
        _ = try LegacyAPNSProvider(settings: settings, logger: Environment.logger)
    }

    @Test("feedback: dead tokens are accepted and listed with their acceptance time, queued tuples too; the list empties once read")
    func feedbackService() async throws {
        try await Environment.withLane(configure: { $0.wallClock = { 1_800_000_000.5 } }) { _, simulator, lane in
            let queued = Environment.liveToken(77)
            #expect(simulator.queueFeedback(token: queued, time: 1_700_000_000))
            let dead = (0..<3).map { Environment.scriptedToken(prefix: "dead", $0) }
            let outcomes = await sendAll(lane, dead.enumerated().map { Environment.request(token: $1, seq: Int64($0)) }, concurrency: 3)
            #expect(outcomes.allSatisfy { $0 == .delivered(providerMessageID: nil) })
            let tuples = try await lane.fetchFeedback()
            #expect(tuples.count == 4)
            #expect(tuples.first == LegacyAPNSFeedbackTuple(time: 1_700_000_000, token: LegacyAPNSHex.decode(queued) ?? []))
            #expect(Set(tuples.dropFirst().map(\.tokenHex)) == Set(dead))
            #expect(tuples.dropFirst().allSatisfy { $0.time == 1_800_000_000 })
            #expect(try await lane.fetchFeedback().isEmpty)
            #expect(simulator.counters().feedbackTuplesSent == 4)
        }
    }
}

@Suite("Legacy APNs simulator: packet parser")
struct LegacyAPNsFrameParserTests {
    static let token = [UInt8](repeating: 0x0A, count: 32)
    static let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

    static func parse(_ bytes: [UInt8], parser: LegacyAPNsFrameParser = LegacyAPNsFrameParser()) -> LegacyAPNsFrameParser.Verdict? {
        var buffer = ByteBuffer(bytes: bytes)
        return parser.next(from: &buffer)
    }

    static func item(_ id: UInt8, _ data: [UInt8]) -> [UInt8] { [id, UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data }
    static func frame(_ items: [UInt8]) -> [UInt8] {
        [2] + withUnsafeBytes(of: UInt32(items.count).bigEndian, Array.init) + items
    }

    @Test("the lane's command-2 frames parse back exactly, across any split of the stream")
    func roundTrip() {
        let notifications = (0..<3).map {
            LegacyAPNSNotification(token: Self.token, payload: Self.payload, identifier: UInt32(100 + $0), expiry: 1_900_000_000, priority: $0 == 1 ? 5 : 10)
        }
        let stream = notifications.flatMap { $0.encoded() }
        let parser = LegacyAPNsFrameParser()
        var buffer = ByteBuffer()
        var parsed: [LegacyAPNsFrameParser.Notification] = []
        for byte in stream {
            buffer.writeInteger(byte)
            while let verdict = parser.next(from: &buffer) {
                guard case .notification(let notification) = verdict else {
                    Issue.record("rejected \(verdict)")
                    return
                }
                parsed.append(notification)
            }
        }
        #expect(parsed.map(\.identifier) == [100, 101, 102])
        #expect(parsed.map(\.priority) == [10, 5, 10])
        #expect(parsed.allSatisfy { $0.token == Self.token && $0.payload == Self.payload && $0.expiry == 1_900_000_000 })
    }

    @Test("commands 0 and 1 parse; command 1's identifier is echoed in its errors; command 0 gets none")
    func simpleAndEnhanced() {
        let command0: [UInt8] = [0, 0, 32] + Self.token + [0, UInt8(Self.payload.count)] + Self.payload
        #expect(Self.parse(command0) == .notification(.init(command: 0, identifier: nil, expiry: nil, priority: nil, token: Self.token, payload: Self.payload)))
        let command1: [UInt8] = [1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 32] + Self.token + [0, UInt8(Self.payload.count)] + Self.payload
        #expect(Self.parse(command1) == .notification(.init(command: 1, identifier: 9, expiry: 0, priority: nil, token: Self.token, payload: Self.payload)))
        let shortToken: [UInt8] = [1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 31] + Self.token.dropFirst() + [0, UInt8(Self.payload.count)] + Self.payload
        #expect(Self.parse(shortToken) == .rejected(command: 1, status: 5, identifier: 9))
        let strict = LegacyAPNsFrameParser(payloadLimit: 2048, legacyPayloadLimit: 16)
        #expect(Self.parse(command1, parser: strict) == .rejected(command: 1, status: 7, identifier: 9))
        #expect(Self.parse(Array(command1.dropLast())) == nil)
    }

    @Test("every item is checked, each failure gets its documented status and the frame's identifier")
    func itemChecks() {
        let id = Self.item(3, [0, 0, 0, 42])
        let expiry = Self.item(4, [0, 0, 0, 0])
        let priority = Self.item(5, [10])
        let good = Self.item(1, Self.token) + Self.item(2, Self.payload) + id + expiry + priority
        #expect(Self.parse(Self.frame(good)).map { if case .notification = $0 { true } else { false } } == true)
        let cases: [(String, [UInt8], UInt8)] = [
            ("no token", Self.item(2, Self.payload) + id, 2),
            ("empty token", Self.item(1, []) + Self.item(2, Self.payload) + id, 2),
            ("31-byte token", Self.item(1, Array(Self.token.dropFirst())) + Self.item(2, Self.payload) + id, 5),
            ("no payload", Self.item(1, Self.token) + id, 4),
            ("payload over 2048", Self.item(1, Self.token) + Self.item(2, [UInt8](repeating: 0x20, count: 2049)) + id, 7),
            ("payload not JSON", Self.item(1, Self.token) + Self.item(2, Array("hello".utf8)) + id, 4),
            ("payload without aps", Self.item(1, Self.token) + Self.item(2, Array(#"{"x":1}"#.utf8)) + id, 4),
            ("priority 7", Self.item(1, Self.token) + Self.item(2, Self.payload) + id + Self.item(5, [7]), 128),
            ("priority of 2 bytes", Self.item(1, Self.token) + Self.item(2, Self.payload) + id + Self.item(5, [0, 10]), 128),
            ("expiry of 3 bytes", Self.item(1, Self.token) + Self.item(2, Self.payload) + id + Self.item(4, [0, 0, 0]), 128),
            ("repeated token", id + Self.item(1, Self.token) + Self.item(1, Self.token) + Self.item(2, Self.payload), 128),
            ("unknown item 9", Self.item(1, Self.token) + Self.item(2, Self.payload) + id + Self.item(9, [1]), 128),
            ("truncated item", id + [1, 0, 32] + Self.token.prefix(10), 128),
        ]
        for (name, items, status) in cases {
            #expect(Self.parse(Self.frame(items)) == .rejected(command: 2, status: status, identifier: 42), "\(name)")
        }
        #expect(Self.parse([7, 1, 2, 3]) == .rejected(command: 7, status: 128, identifier: 0))
    }
}
