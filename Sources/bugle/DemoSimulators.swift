import BugleSimulator
import Logging

/// The two simulators `bugle demo` runs in-process (APNs and FCM with its OAuth2 token endpoint), with their
/// material in `$BUGLE_HOME/sim` and a providers file pointing at both.
struct DemoSimulators: Sendable {
    let certificates: SimulatorCertificates
    let apns: APNsSimulator
    let fcm: FCMSimulator
    let apnsPort: Int
    let fcmPort: Int

    /// Starts both on ephemeral loopback ports and rewrites the providers file and the service account's
    /// `token_uri` for them.
    static func start(directory: String, logger: Logger) async throws -> DemoSimulators {
        let certificates = SimulatorCertificates.exists(in: directory)
            ? try SimulatorCertificates.load(from: directory)
            : try SimulatorCertificates.generate(in: directory, port: 0)
        var simulatorLogger = logger
        simulatorLogger[metadataKey: "component"] = "simulator"
        let apns = APNsSimulator(configuration: APNsSimulatorConfiguration(certificates: certificates), logger: simulatorLogger)
        let fcm = FCMSimulator(configuration: FCMSimulatorConfiguration(certificates: certificates), logger: simulatorLogger)
        let apnsPort = try await apns.start()
        do {
            let fcmPort = try await fcm.start()
            try certificates.writeServiceAccount(fcmPort: fcmPort)
            try certificates.writeProvidersFile(port: apnsPort, fcmPort: fcmPort)
            return DemoSimulators(certificates: certificates, apns: apns, fcm: fcm, apnsPort: apnsPort, fcmPort: fcmPort)
        } catch {
            try? await fcm.stop()
            try? await apns.stop()
            throw error
        }
    }

    /// Notifications the simulators accepted (APNs, FCM).
    var accepted: (apns: Int, fcm: Int) {
        (apns.counters().accepted, fcm.counters().accepted)
    }

    func stop() async throws {
        try await fcm.stop()
        try await apns.stop()
    }
}
