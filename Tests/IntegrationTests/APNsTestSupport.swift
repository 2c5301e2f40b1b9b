import BugleAPNs
import BugleCore
import BugleSimulator
import BugleTesting
import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers

typealias APNsTestClock = ManualClock

/// A throwaway simulator directory plus helpers to build a provider against it.
struct APNsTestEnvironment {
    let directory: String
    let material: SimulatorCertificates

    init() throws {
        directory = TestScratch.root + "bugle-apns-\(UUID().uuidString)"
        material = try SimulatorCertificates.generate(in: directory, port: 0)
    }

    func simulatorConfiguration(_ customize: (inout APNsSimulatorConfiguration) -> Void = { _ in }) -> APNsSimulatorConfiguration {
        var configuration = APNsSimulatorConfiguration(certificates: material)
        configuration.threads = 1
        customize(&configuration)
        return configuration
    }

    func settings(port: Int, connections: Int = 2, timeout: Double = 60, keyFile: String? = nil) -> APNsSettings {
        APNsSettings(
            endpoint: Endpoint(host: "127.0.0.1", port: port),
            caFile: material.caFile,
            topic: material.topic,
            auth: .token(teamID: material.teamID, keyID: material.keyID, keyFile: keyFile ?? material.keyFile),
            connections: connections,
            timeoutSeconds: timeout
        )
    }

    /// An ES256 signer over this directory's key, driven by `clock` (wall time included).
    func signer(clock: APNsTestClock) throws -> APNSAuthenticationTokenSigner<APNsTestClock> {
        let keyPEM = try String(contentsOfFile: material.keyFile, encoding: .utf8)
        return APNSAuthenticationTokenSigner(
            privateKey: try P256.Signing.PrivateKey(pemRepresentation: keyPEM),
            keyID: material.keyID,
            teamID: material.teamID,
            clock: clock,
            epochSeconds: { Int64(clock.wallSeconds) }
        )
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func request(token: String, seq: Int64, pushType: APNsPushType = .alert, priority: Int = 10) -> PushRequest {
        let apnsID = UUID().uuidString.lowercased()
        return PushRequest(
            seq: seq,
            deviceID: seq,
            token: token,
            platform: .ios,
            body: Array(#"{"aps":{"alert":{"title":"Hi","body":"Spring sale"}}}"#.utf8),
            apns: APNsHeaders(pushType: pushType, priority: priority, expiration: nil, collapseID: nil, apnsID: apnsID)
        )
    }

    /// A 64-hex token that never matches a scripted prefix (first nibble 0).
    static func liveToken(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    /// A 64-hex token with a scripted prefix.
    static func scriptedToken(prefix: String, _ index: Int) -> String {
        let hex = String(index, radix: 16)
        return prefix + String(repeating: "0", count: 60 - hex.count) + hex
    }

    static var logger: Logger {
        var logger = Logger(label: "bugle.test.apns")
        logger.logLevel = .warning
        return logger
    }
}

/// Sends requests with bounded concurrency and returns the outcomes in request order.
func sendAll(_ provider: any PushProvider, _ requests: [PushRequest], concurrency: Int) async -> [SendOutcome] {
    await withTaskGroup(of: (Int, SendOutcome).self) { group in
        var outcomes = [SendOutcome?](repeating: nil, count: requests.count)
        var next = 0
        for _ in 0..<min(concurrency, requests.count) {
            let index = next
            next += 1
            group.addTask { (index, await provider.send(requests[index])) }
        }
        while let (index, outcome) = await group.next() {
            outcomes[index] = outcome
            if next < requests.count {
                let index = next
                next += 1
                group.addTask { (index, await provider.send(requests[index])) }
            }
        }
        return outcomes.map { $0 ?? .ambiguous(code: "missing") }
    }
}
