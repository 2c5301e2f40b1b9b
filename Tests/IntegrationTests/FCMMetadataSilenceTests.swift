import BugleSimulator
import BugleTesting
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import BugleFCM

/// `credentials: metadata_server` where no metadata server exists (Bugle not on Google Cloud, or a wrong
/// `GCE_METADATA_HOST`): a server that has never answered is refused once the grace since the first attempt is over,
/// and the lane halts saying so instead of waiting out the provider-outage breaker. A server that answered once and
/// then went quiet is an outage, retried as before.
@Suite("FCM metadata server that never answers")
struct FCMMetadataSilenceTests {
    static func client(port: Int, grace: Duration) throws -> FCMMetadataTokenClient {
        let address = try FCMMetadataServerAddress.from(environment: ["GCE_METADATA_HOST": "127.0.0.1:\(port)"])
        return FCMMetadataTokenClient(address: address, timeout: .seconds(5), group: MultiThreadedEventLoopGroup.singleton, grace: grace)
    }

    /// A port nothing listens on: bound, then closed.
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 1
        try await channel.close()
        return port
    }

    static func outcome(_ client: FCMMetadataTokenClient) async -> String {
        do throws(FCMAuthError) {
            _ = try await client.fetch()
            return "token"
        } catch {
            switch error {
            case .rejected(let message, _): return "rejected: \(message)"
            case .unavailable(let message, _): return "unavailable: \(message)"
            }
        }
    }

    @Test("never answered: unavailable within the grace, refused after it, naming the silence")
    func neverAnswered() async throws {
        let port = try await Self.closedPort()
        let patient = await Self.outcome(try Self.client(port: port, grace: .seconds(3600)))
        #expect(patient.hasPrefix("unavailable: cannot connect"), "\(patient)")
        let expired = await Self.outcome(try Self.client(port: port, grace: .zero))
        #expect(expired.hasPrefix("rejected: no metadata server has answered in 0 s of trying (cannot connect"), "\(expired)")
    }

    @Test("a server that answered once (503) and then went away stays an outage, retried, whatever the grace")
    func answeredOnce() async throws {
        let material = try SimulatorCertificates.generate(in: try TestScratch.directory(prefix: "bugle-metadata-silence"), port: 0)
        var configuration = MetadataServerConfiguration(certificates: material)
        configuration.unavailableFirst = 1
        let server = MetadataServerSimulator(configuration: configuration)
        let port = try await server.start()
        let client = try Self.client(port: port, grace: .zero)
        let first = await Self.outcome(client)
        try await server.stop()
        #expect(first == "unavailable: HTTP 503", "\(first)")
        let second = await Self.outcome(client)
        #expect(second.hasPrefix("unavailable: cannot connect"), "\(second)")
    }
}
