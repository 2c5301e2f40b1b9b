import BugleHTTP2
import BugleSimulator
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Testing

/// PING health checks of the shared HTTP/2 pool, against the APNs simulator (certificate mode, so requests need
/// no token) over real TLS.
///
/// A timing suite (``TimingPhase``): PING timeouts and 3,000 answers within per-request deadlines. Beside the rest of
/// the suite in a debug build, a starved machine once timed out a batch of the window test and once closed a live
/// connection on an unanswered PING.
@Suite("HTTP/2 pool: PING health checks", .serialized, .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct HTTP2KeepaliveTests {
    typealias Fixture = APNsCertificateAuthTests.Fixture

    static func pool(_ fixture: Fixture, pingInterval: TimeAmount?, logger: Logger = APNsTestEnvironment.logger) throws -> HTTP2ConnectionPool {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(fixture.environment.material.caFile))
        tls.certificateChain = try NIOSSLCertificate.fromPEMFile(fixture.certificateFile).map { .certificate($0) }
        tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: fixture.keyFile, format: .pem))
        var configuration = HTTP2ConnectionPool.Configuration(host: "127.0.0.1", port: fixture.port, connections: 1, tls: tls, serviceName: "APNs")
        configuration.pingInterval = pingInterval
        // Long enough that a starved test machine (the whole suite runs in parallel) answers every PING in time: a
        // 300 ms timeout once closed the live connection under a request (`notWritten`); the silent peer is still
        // found within 2.2 s, well inside `waitUntilClosed`'s 10 s.
        configuration.pingTimeout = .seconds(2)
        return try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
    }

    static func send(_ pool: HTTP2ConnectionPool, fixture: Fixture, index: Int, within seconds: Int64, token: String? = nil) async throws -> HTTP2Response {
        let headers: HPACKHeaders = [
            ":method": "POST", ":scheme": "https", ":authority": "127.0.0.1:\(fixture.port)",
            ":path": "/3/device/" + (token ?? APNsTestEnvironment.liveToken(index)),
            "apns-topic": fixture.environment.material.topic, "apns-push-type": "alert",
        ]
        return try await pool.execute(headers: headers, body: ByteBuffer(string: #"{"aps":{"alert":"hi"}}"#), deadline: .now() + .seconds(seconds))
    }

    /// Waits (polling, up to 10 s) until the pool holds no open connection.
    static func waitUntilClosed(_ pool: HTTP2ConnectionPool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if pool.streamLimits().isEmpty { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test("a peer that goes silent is found by an unanswered PING: the connection is replaced before the next request")
    func silentPeerIsReplaced() async throws {
        try await Fixture.with { fixture in
            let pool = try Self.pool(fixture, pingInterval: .milliseconds(200))
            defer { Task { await pool.shutdown() } }
            #expect(try await Self.send(pool, fixture: fixture, index: 1, within: 10).status == 200)
            #expect(fixture.simulator.counters().connections == 1)
            await fixture.simulator.silenceOpenConnections()
            // PING at most 200 ms later, unanswered for 2 s: the pool closes that connection...
            #expect(try await Self.waitUntilClosed(pool), "the silent connection was never closed")
            // ...and the next request goes out on a new one.
            #expect(try await Self.send(pool, fixture: fixture, index: 2, within: 10).status == 200)
            #expect(fixture.simulator.counters().connections == 2)
            #expect(fixture.simulator.accepted().count == 2)
        }
    }

    @Test("a request written on a connection that then goes silent comes back lost after its write, and a warning says the connection closed with it unanswered, and why")
    func unansweredRequestsAreLogged() async throws {
        try await Fixture.with { fixture in
            let lines = RecordingLogHandler.Lines()
            let pool = try Self.pool(fixture, pingInterval: .milliseconds(200), logger: RecordingLogHandler.logger(lines))
            defer { Task { await pool.shutdown() } }
            #expect(try await Self.send(pool, fixture: fixture, index: 1, within: 10).status == 200)
            await fixture.simulator.silenceOpenConnections()
            // Written on the silent connection, which the PING closes about 2 s later.
            let error = await #expect(throws: HTTP2TransportError.self) { _ = try await Self.send(pool, fixture: fixture, index: 2, within: 20) }
            guard case .lostAfterWrite? = error else {
                Issue.record("expected a request lost after its write, got \(String(describing: error))")
                return
            }
            let warnings = lines.all.filter { $0.contains("connection closed with requests written and unanswered") }
            #expect(warnings.count == 1, "\(lines.all)")
            #expect(warnings.first?.hasPrefix("warning APNs connection closed") == true, "\(warnings)")
            #expect(warnings.first?.contains("unanswered=1") == true, "\(warnings)")
            #expect(warnings.first?.contains("reason=no answer to an HTTP/2 PING within 2000 ms") == true, "\(warnings)")
        }
    }

    @Test("without PINGs the same silent connection keeps the request until its deadline (what the check prevents)")
    func withoutPingsTheRequestIsLost() async throws {
        try await Fixture.with { fixture in
            let pool = try Self.pool(fixture, pingInterval: nil)
            defer { Task { await pool.shutdown() } }
            #expect(try await Self.send(pool, fixture: fixture, index: 1, within: 10).status == 200)
            await fixture.simulator.silenceOpenConnections()
            await #expect(throws: HTTP2TransportError.self) { _ = try await Self.send(pool, fixture: fixture, index: 2, within: 1) }
            #expect(!pool.streamLimits().isEmpty, "nothing noticed the silent connection")
            #expect(fixture.simulator.counters().connections == 1)
        }
    }

    @Test("answers with bodies past the 64 KiB connection window keep flowing on one connection (the window is given back)")
    func connectionWindowIsReplenished() async throws {
        try await Fixture.with { fixture in
            let pool = try Self.pool(fixture, pingInterval: nil)
            defer { Task { await pool.shutdown() } }
            // Each 400 answer carries {"reason":"BadDeviceToken"} (28 bytes): 3,000 of them are 84,000 bytes of DATA,
            // past HTTP/2's initial 65,535-byte connection window. Unreplenished, the server stalls after about 2,340
            // answers; a window update written from inside channelRead lost the answer it was read with (about the
            // 1,170th).
            let total = 3_000
            var answered = 0
            for batch in stride(from: 0, to: total, by: 200) {
                let statuses = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                    for index in batch..<batch + 200 {
                        group.addTask {
                            let token = APNsTestEnvironment.scriptedToken(prefix: "bad0", index)
                            let response = try await Self.send(pool, fixture: fixture, index: index, within: 30, token: token)
                            return (response.status, response.body.map { String(buffer: $0) } ?? "")
                        }
                    }
                    return try await group.reduce(into: [(Int, String)]()) { $0.append($1) }
                }
                for (status, body) in statuses where status == 400 && body.contains("BadDeviceToken") { answered += 1 }
            }
            #expect(answered == total)
            #expect(fixture.simulator.counters().connections == 1)
        }
    }
}

@Suite("HTTP/2 pool: PING timeout against the request timeout")
struct HTTP2PingTimeoutTests {
    @Test("a lane's connection is not judged dead by a PING sooner than a request on it may wait; a short request timeout keeps the 20 s PING timeout")
    func pingTimeoutFollowsLongRequestTimeouts() {
        var configuration = HTTP2ConnectionPool.Configuration(
            host: "127.0.0.1", port: 1, connections: 1, tls: TLSConfiguration.makeClientConfiguration(), serviceName: "APNs")
        configuration.waitForPings(asLongAsRequests: .seconds(10))
        #expect(configuration.pingTimeout == .seconds(20))
        configuration.waitForPings(asLongAsRequests: .seconds(60))
        #expect(configuration.pingTimeout == .seconds(60))
    }
}
