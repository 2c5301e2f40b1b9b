import BugleHTTP2
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Testing

/// How the pool reports a provider it cannot reach.
@Suite("HTTP/2 pool: connect failures (real sockets)")
struct HTTP2ConnectFailureTests {
    /// Every slot of the pool retries with a short backoff, so an unreachable provider used to log a warning per slot
    /// per retry (about 80 in 3 s for a pool of 12, even under `--quiet`). The same reason is now one warning; the
    /// retries are debug lines.
    @Test("an unreachable provider is one warning, not one per slot per retry; the retries are logged at debug")
    func oneWarningPerOutage() async throws {
        let closedPort = try freeLoopbackPort()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        var configuration = HTTP2ConnectionPool.Configuration(host: "127.0.0.1", port: closedPort, connections: 4, tls: tls, serviceName: "APNs")
        configuration.backoffBase = .milliseconds(5)
        configuration.backoffCap = .milliseconds(20)
        let lines = RecordingLogHandler.Lines()
        let pool = try HTTP2ConnectionPool(
            configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: RecordingLogHandler.logger(lines, level: .debug))
        let headers = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":authority", "x"), (":path", "/")])
        // Requests keep coming, as a lane's sends do, until the slots have retried (three rounds of four), however slowly
        // a loaded machine gets there (60 s at most).
        let deadline = ContinuousClock.now + .seconds(60)
        var refused = 0
        while lines.all.filter({ $0.contains("APNs connect failed") }).count < 12, ContinuousClock.now < deadline {
            do {
                _ = try await pool.execute(headers: headers, body: ByteBuffer(), deadline: .now() + .milliseconds(200))
            } catch {
                refused += 1
            }
        }
        await pool.shutdown()
        #expect(refused > 0)
        let failures = lines.all.filter { $0.contains("APNs connect failed") }
        let warnings = failures.filter { $0.hasPrefix("warning") }
        #expect(failures.count >= 12, "\(failures.count) attempts in 60 s: the slots did not retry, so nothing was left to keep quiet")
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.contains("127.0.0.1:\(closedPort)") == true || warnings.first?.contains("refused") == true, "\(warnings)")
    }

    /// Connect errors used to reach warnings and `bugle feedback` as Swift prints them (`Connection errors:
    /// SingleConnectionFailure(target: [IPv4]127.0.0.1/127.0.0.1:…`), and BoringSSL's with the build's source paths.
    @Test("a refused connect reads as the address and the system's reason; a TLS error loses its library source paths")
    func connectErrorsReadForPeople() async throws {
        struct Handshake: Error, CustomStringConvertible {
            var description: String { "handshakeFailed(sslError([Error: 268436504 error:10000418:SSL routines:OPENSSL_internal:TLSV1_ALERT_UNKNOWN_CA at /work/main/.build/checkouts/swift-nio-ssl/Sources/CNIOBoringSSL/ssl/tls_record.cc:592]))" }
        }
        let closedPort = try freeLoopbackPort()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            _ = try await ClientBootstrap(group: group).connect(host: "127.0.0.1", port: closedPort).get()
            Issue.record("a closed port accepted")
        } catch {
            #expect(NetworkErrorText.describe(error) == "127.0.0.1:\(closedPort): Connection refused (errno 111)")
        }
        try await group.shutdownGracefully()
        #expect(NetworkErrorText.describe(Handshake()) == "handshakeFailed(sslError([Error: 268436504 error:10000418:SSL routines:OPENSSL_internal:TLSV1_ALERT_UNKNOWN_CA]))")
    }
}
