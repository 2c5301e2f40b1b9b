import BugleAPNs
import BugleCore
import BugleFCM
import BugleRunner
import BugleSimulator
import BugleTesting
import Foundation
import Logging
import PostgresNIO

/// Both simulators (APNs and FCM) from one throwaway directory, and paced lanes against them built the way
/// the CLI builds them (`LanePacing.wrap`).
struct MixedTestEnvironment {
    let directory: String
    let material: SimulatorCertificates
    let apns: APNsSimulator
    let fcm: FCMSimulator
    let apnsPort: Int
    let fcmPort: Int

    static let logger = Logger(label: "bugle.test.mixed")

    /// Starts both simulators.
    /// - Parameters:
    ///   - serverIdentity: The TLS identity both simulators serve instead of their own (nil: their own), issued from
    ///     the directory's CA (given the directory): a certificate for another host, or one out of date.
    ///   - clientCertificates: Serve APNs in certificate mode (a client certificate from the directory's CA).
    static func start(
        serverIdentity: (String) throws -> SimulatorCertificates.IssuedIdentity? = { _ in nil },
        clientCertificates: Bool = false,
        apns configureAPNs: (inout APNsSimulatorConfiguration) -> Void = { _ in },
        fcm configureFCM: (inout FCMSimulatorConfiguration) -> Void = { _ in }
    ) async throws -> MixedTestEnvironment {
        let directory = TestScratch.root + "bugle-mixed-\(UUID().uuidString)"
        let material = try SimulatorCertificates.generate(in: directory, port: 0)
        let identity = try serverIdentity(directory)
        var apnsConfiguration = APNsSimulatorConfiguration(certificates: material)
        apnsConfiguration.threads = 1
        if clientCertificates { apnsConfiguration.clientCAPEM = material.caPEM }
        configureAPNs(&apnsConfiguration)
        var fcmConfiguration = FCMSimulatorConfiguration(certificates: material)
        fcmConfiguration.threads = 1
        configureFCM(&fcmConfiguration)
        if let identity {
            apnsConfiguration.certificatePEM = identity.certificatePEM
            apnsConfiguration.privateKeyPEM = identity.keyPEM
            fcmConfiguration.certificatePEM = identity.certificatePEM
            fcmConfiguration.privateKeyPEM = identity.keyPEM
        }
        let apns = APNsSimulator(configuration: apnsConfiguration)
        let fcm = FCMSimulator(configuration: fcmConfiguration)
        let apnsPort = try await apns.start()
        let fcmPort: Int
        do {
            fcmPort = try await fcm.start()
            try material.writeServiceAccount(fcmPort: fcmPort)
            try material.writeProvidersFile(port: apnsPort, fcmPort: fcmPort)
        } catch {
            try await apns.stop()
            throw error
        }
        return MixedTestEnvironment(directory: directory, material: material, apns: apns, fcm: fcm, apnsPort: apnsPort, fcmPort: fcmPort)
    }

    /// Starts both simulators, runs `body` with them, and stops them whether `body` returns or throws.
    static func with(
        apns configureAPNs: (inout APNsSimulatorConfiguration) -> Void = { _ in },
        fcm configureFCM: (inout FCMSimulatorConfiguration) -> Void = { _ in },
        _ body: (MixedTestEnvironment) async throws -> Void
    ) async throws {
        let environment = try await start(apns: configureAPNs, fcm: configureFCM)
        do {
            try await body(environment)
        } catch {
            try await environment.stop()
            throw error
        }
        try await environment.stop()
    }

    /// The providers file `bugle-sim` wrote for both simulators.
    func settings() throws -> ProviderSettings {
        try ProviderSettingsLoader.load(path: material.providersFile)
    }

    /// Paced, instrumented lanes for `campaign`, as the CLI builds them.
    /// - Parameters:
    ///   - fcmTokens: Where FCM's tokens come from instead of the service account's token endpoint.
    ///   - fcmConcurrency: The FCM lane's `concurrency`.
    ///   - fcmEnvironment: Where the FCM lane reads `GOOGLE_APPLICATION_CREDENTIALS` and `GCE_METADATA_HOST`.
    ///   - adjust: Changes to the providers file's settings.
    func lanes(
        for campaign: Campaign, fcmTokens: (any FCMAccessTokenFetching)? = nil, fcmConcurrency: Int? = nil,
        fcmEnvironment: [String: String] = [:], adjust: (inout ProviderSettings) -> Void = { _ in }
    ) throws -> LanePacing.Lanes {
        var settings = try settings()
        if let fcmConcurrency { settings.fcm?.concurrency = fcmConcurrency }
        adjust(&settings)
        // Debug builds of two simulators and Bugle share two cores with the rest of the suite: give requests
        // room, so a starved scheduler is not mistaken for a lost answer.
        settings.fcm?.timeoutSeconds = 60
        settings.apns?.timeoutSeconds = 60
        var lanes: [ProviderKind: any PushProvider] = [:]
        if let apnsSettings = settings.apns {
            lanes[.apns] = try APNSProvider(settings: apnsSettings, logger: Self.logger)
        }
        if let fcmSettings = settings.fcm {
            if let fcmTokens {
                let account = try FCMServiceAccount.load(path: material.fcmServiceAccountFile, allowReadableKeys: false)
                lanes[.fcm] = try FCMProvider(settings: fcmSettings, account: account, tokenFetcher: fcmTokens, logger: Self.logger)
            } else {
                lanes[.fcm] = try FCMProvider(settings: fcmSettings, environment: fcmEnvironment, logger: Self.logger)
            }
        }
        return LanePacing.wrap(lanes, settings: settings, campaign: campaign)
    }

    func stop() async throws {
        try await fcm.stop()
        try await apns.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Inserts `count` devices alternating iOS (odd ids, 64-hex tokens) and Android (even ids); every
    /// `deadEvery`-th device of each platform has the simulators' `dead` prefix.
    static func seed(_ client: PostgresClient, count: Int, deadEvery: Int = 20) async throws {
        _ = try await client.query(
            """
            INSERT INTO bugle.devices (id, user_id, token, platform, locale)
            SELECT i, 'u' || i,
                   CASE WHEN i % 2 = 1
                        THEN CASE WHEN ((i + 1) / 2) % \(deadEvery) = 0 THEN 'dead' || lpad(to_hex(i), 60, '0') ELSE lpad(to_hex(i), 64, '0') END
                        ELSE CASE WHEN ((i + 1) / 2) % \(deadEvery) = 0 THEN 'dead-' ELSE 'live-' END || md5(i::text) || ':APA91b'
                   END,
                   CASE WHEN i % 2 = 1 THEN 'ios' ELSE 'android' END,
                   CASE WHEN i % 3 = 0 THEN 'de' ELSE 'en' END
              FROM generate_series(1, \(count)) i
            """,
            logger: LedgerTestSupport.logger
        ).collect()
    }
}
