import BugleCore
import BugleLegacyAPNs
import BugleSimulator
import BugleTesting
import Foundation
import Logging
import NIOCore

/// A throwaway simulator directory with a legacy client identity, plus helpers to build a lane against it.
struct LegacyTestEnvironment {
    let directory: String
    let material: SimulatorCertificates
    let client: SimulatorCertificates.LegacyClientIdentity

    init() throws {
        directory = TestScratch.root + "bugle-legacy-\(UUID().uuidString)"
        material = try SimulatorCertificates.generate(in: directory, port: 0)
        client = try SimulatorCertificates.generateLegacyClient(in: directory)
    }

    func simulatorConfiguration(_ customize: (inout LegacyAPNsSimulatorConfiguration) -> Void = { _ in }) -> LegacyAPNsSimulatorConfiguration {
        var configuration = LegacyAPNsSimulatorConfiguration(certificates: material)
        configuration.threads = 1
        customize(&configuration)
        return configuration
    }

    func settings(ports: LegacyAPNsSimulator.Ports, connections: Int = 1, quietPeriod: Double = 0.5, payloadLimit: Int = 2048) -> LegacyAPNsSettings {
        LegacyAPNsSettings(
            enabled: true, host: "127.0.0.1", port: ports.gateway, feedbackPort: ports.feedback,
            certFile: client.certificateFile, keyFile: client.keyFile, caFile: material.caFile,
            payloadLimit: payloadLimit, connections: connections, quietPeriodSeconds: quietPeriod
        )
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A 64-hex token (32 bytes) that never matches a scripted prefix (first nibble 0).
    static func liveToken(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    /// A 64-hex token with a scripted prefix (`bad0`: status 8; `dead`: accepted, then in the feedback list).
    static func scriptedToken(prefix: String, _ index: Int) -> String {
        let hex = String(index, radix: 16)
        return prefix + String(repeating: "0", count: 60 - hex.count) + hex
    }

    static func request(token: String, seq: Int64) -> PushRequest {
        PushRequest(
            seq: seq, deviceID: seq, token: token, platform: .ios,
            body: Array(#"{"aps":{"alert":{"title":"Hi","body":"Spring sale"}}}"#.utf8),
            apns: APNsHeaders(pushType: .alert, priority: 10, expiration: 1_900_000_000, collapseID: nil, apnsID: "00000000-0000-0000-0000-000000000000")
        )
    }

    static var logger: Logger {
        var logger = Logger(label: "bugle.test.legacy")
        logger.logLevel = .warning
        return logger
    }

    /// Starts a simulator and a lane against it for `body`, and stops both afterwards (also on failure).
    static func withLane(
        configure: (inout LegacyAPNsSimulatorConfiguration) -> Void = { _ in },
        connections: Int = 1,
        // Generous: a gateway answer slower than this would be mistaken for success (the protocol's inherent
        // limit), and these tests share 2 cores with builds.
        quietPeriod: Double = 1.0,
        options: LegacyAPNSProvider.Options = LegacyAPNSProvider.Options(),
        settings customize: (inout LegacyAPNsSettings) -> Void = { _ in },
        _ body: (LegacyTestEnvironment, LegacyAPNsSimulator, LegacyAPNSProvider) async throws -> Void
    ) async throws {
        let environment = try LegacyTestEnvironment()
        defer { environment.remove() }
        let simulator = LegacyAPNsSimulator(configuration: environment.simulatorConfiguration(configure))
        let ports = try await simulator.start()
        let lane: LegacyAPNSProvider
        do {
            var settings = environment.settings(ports: ports, connections: connections, quietPeriod: quietPeriod)
            customize(&settings)
            lane = try LegacyAPNSProvider(settings: settings, options: options, logger: logger)
        } catch {
            try await simulator.stop()
            throw error
        }
        do {
            try await body(environment, simulator, lane)
        } catch {
            await lane.shutdown()
            try await simulator.stop()
            throw error
        }
        await lane.shutdown()
        try await simulator.stop()
    }
}
