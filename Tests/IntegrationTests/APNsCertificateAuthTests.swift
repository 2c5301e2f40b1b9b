import BugleAPNs
import BugleCore
import BugleHTTP2
import BugleSimulator
import Foundation
import NIOSSL
import Testing

/// Certificate-based APNs auth against the simulator in certificate mode: the TLS handshake carries the identity,
/// requests carry no bearer token.
@Suite("APNs certificate auth (PEM, encrypted PEM, PKCS#12) over TLS + HTTP/2")
struct APNsCertificateAuthTests {
    static let passphrase = "correct horse battery staple"
    static let variable = "BUGLE_TEST_APNS_PASSPHRASE"

    /// A simulator that requires a client certificate from its CA, and that certificate (plain PEM key).
    struct Fixture {
        let environment: APNsTestEnvironment
        let simulator: APNsSimulator
        let port: Int
        let certificateFile: String
        let keyFile: String

        static func start() async throws -> Fixture {
            let environment = try APNsTestEnvironment()
            let client = try SimulatorCertificates.generateLegacyClient(in: environment.directory)
            let simulator = APNsSimulator(configuration: environment.simulatorConfiguration { $0.clientCAPEM = environment.material.caPEM })
            let port = try await simulator.start()
            return Fixture(environment: environment, simulator: simulator, port: port, certificateFile: client.certificateFile, keyFile: client.keyFile)
        }

        func settings(_ auth: APNsSettings.Auth) -> APNsSettings {
            var settings = environment.settings(port: port, connections: 1)
            settings.auth = auth
            return settings
        }

        /// Sends one notification through a lane built from `auth`.
        func send(_ auth: APNsSettings.Auth, seq: Int64, environment variables: [String: String] = [:]) async throws -> SendOutcome {
            let provider = try APNSProvider(
                settings: settings(auth), tokenSource: nil, options: .init(environment: variables), logger: APNsTestEnvironment.logger
            )
            let outcome = await provider.send(APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(Int(seq)), seq: seq))
            await provider.shutdown()
            return outcome
        }

        func stop() async throws {
            try await simulator.stop()
            environment.remove()
        }

        /// Starts a fixture, runs `body` with it, and stops it whether `body` throws or not.
        static func with(_ body: (Fixture) async throws -> Void) async throws {
            let fixture = try await start()
            do {
                try await body(fixture)
            } catch {
                try await fixture.stop()
                throw error
            }
            try await fixture.stop()
        }

        /// Runs openssl with `arguments` and the suite's passphrase in `PASS`.
        func openssl(_ arguments: [String]) throws {
            #expect(try OpenSSLTool.run(arguments, passphrase: APNsCertificateAuthTests.passphrase) == 0, "openssl \(arguments.first ?? "") failed")
        }
    }

    static func isDelivered(_ outcome: SendOutcome) -> Bool {
        if case .delivered = outcome { return true }
        return false
    }

    @Test("a PEM certificate and key, an encrypted key and a PKCS#12 bundle each deliver without a bearer token")
    func everyFormDelivers() async throws {
        try await Fixture.with { fixture in
            let directory = fixture.environment.directory
            #expect(Self.isDelivered(try await fixture.send(.certificate(certFile: fixture.certificateFile, keyFile: fixture.keyFile, passphraseEnv: nil), seq: 1)))

            let encryptedKey = directory + "/client-encrypted.key"
            #expect(try OpenSSLTool.encrypt(key: fixture.keyFile, to: encryptedKey, passphrase: Self.passphrase) == 0)
            let encrypted = APNsSettings.Auth.certificate(certFile: fixture.certificateFile, keyFile: encryptedKey, passphraseEnv: Self.variable)
            #expect(Self.isDelivered(try await fixture.send(encrypted, seq: 2, environment: [Self.variable: Self.passphrase])))

            let bundle = directory + "/client.p12"
            try fixture.openssl(["pkcs12", "-export", "-in", fixture.certificateFile, "-inkey", fixture.keyFile, "-out", bundle, "-passout", "env:PASS"])
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: bundle)
            let pkcs12 = APNsSettings.Auth.certificate(certFile: bundle, keyFile: nil, passphraseEnv: Self.variable)
            #expect(Self.isDelivered(try await fixture.send(pkcs12, seq: 3, environment: [Self.variable: Self.passphrase])))

            // Three notifications reached the simulator, none of them with a token.
            #expect(fixture.simulator.accepted().count == 3)
            #expect(fixture.simulator.counters().rejectedByReason.isEmpty)
        }
    }

    @Test("a missing or wrong passphrase, or a readable bundle, stops the lane with an error that names the file and variable only")
    func badPassphrasesAreClearErrors() async throws {
        try await Fixture.with { fixture in
            let bundle = fixture.environment.directory + "/client.p12"
            try fixture.openssl(["pkcs12", "-export", "-in", fixture.certificateFile, "-inkey", fixture.keyFile, "-out", bundle, "-passout", "env:PASS"])
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: bundle)
            let pkcs12 = APNsSettings.Auth.certificate(certFile: bundle, keyFile: nil, passphraseEnv: Self.variable)

            let missing = #expect(throws: APNSConfigurationError.self) {
                _ = try APNSProvider(settings: fixture.settings(pkcs12), tokenSource: nil, options: .init(environment: [:]), logger: APNsTestEnvironment.logger)
            }
            #expect(missing == .missingPassphrase(variable: Self.variable))

            let wrong = #expect(throws: APNSConfigurationError.self) {
                _ = try APNSProvider(
                    settings: fixture.settings(pkcs12), tokenSource: nil, options: .init(environment: [Self.variable: "not it"]),
                    logger: APNsTestEnvironment.logger
                )
            }
            let message = wrong.map { String(describing: $0) } ?? ""
            #expect(message.contains(bundle) && message.contains(Self.variable), "\(message)")
            #expect(!message.contains("not it") && !message.contains(Self.passphrase))

            // An encrypted PEM key without passphrase_env says what is missing (it said "not a PEM private key").
            let encryptedKey = fixture.environment.directory + "/client-encrypted.key"
            #expect(try OpenSSLTool.encrypt(key: fixture.keyFile, to: encryptedKey, passphrase: Self.passphrase) == 0)
            let noVariable = APNsSettings.Auth.certificate(certFile: fixture.certificateFile, keyFile: encryptedKey, passphraseEnv: nil)
            let unnamed = #expect(throws: APNSConfigurationError.self) {
                _ = try APNSProvider(settings: fixture.settings(noVariable), tokenSource: nil, options: .init(environment: [:]), logger: APNsTestEnvironment.logger)
            }
            #expect(unnamed == .encryptedKey(path: encryptedKey))

            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: bundle)
            #expect(throws: APNSConfigurationError.self) {
                _ = try APNSProvider(
                    settings: fixture.settings(pkcs12), tokenSource: nil, options: .init(environment: [Self.variable: Self.passphrase]),
                    logger: APNsTestEnvironment.logger
                )
            }
        }
    }

    /// It said `… could not be opened: not a valid key or PKCS#12 bundle`, with no word of the passphrase it lacked.
    @Test("an encrypted PKCS#12 bundle without passphrase_env says it may need one; with the passphrase it loads")
    func encryptedBundleWithoutPassphrase() async throws {
        try await Fixture.with { fixture in
            let bundle = fixture.environment.directory + "/client.p12"
            try fixture.openssl(["pkcs12", "-export", "-in", fixture.certificateFile, "-inkey", fixture.keyFile, "-out", bundle, "-passout", "env:PASS"])
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: bundle)
            let unnamed = APNsSettings.Auth.certificate(certFile: bundle, keyFile: nil, passphraseEnv: nil)
            let error = #expect(throws: APNSConfigurationError.self) {
                _ = try APNSProvider(settings: fixture.settings(unnamed), tokenSource: nil, options: .init(environment: [:]), logger: APNsTestEnvironment.logger)
            }
            let message = error.map { String(describing: $0) } ?? ""
            #expect(
                message == "\(bundle) could not be opened without a passphrase: it may be encrypted (set passphrase_env to the "
                    + "environment variable that holds its passphrase), or it is not a valid PKCS#12 bundle")
            let named = APNsSettings.Auth.certificate(certFile: bundle, keyFile: nil, passphraseEnv: Self.variable)
            _ = try APNSProvider(
                settings: fixture.settings(named), tokenSource: nil, options: .init(environment: [Self.variable: Self.passphrase]),
                logger: APNsTestEnvironment.logger)
        }
    }

    @Test("a PEM certificate with a key that is not its own is refused naming both files (it said only failedToLoadCertificate)")
    func mismatchedKeyNamesTheFiles() async throws {
        try await Fixture.with { fixture in
            let other = fixture.environment.directory + "/other.key"
            try fixture.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", other])
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: other)
            let auth = APNsSettings.Auth.certificate(certFile: fixture.certificateFile, keyFile: other, passphraseEnv: nil)
            let refused = #expect(throws: APNSConfigurationError.self) {
                _ = try APNSProvider(settings: fixture.settings(auth), tokenSource: nil, options: .init(environment: [:]), logger: APNsTestEnvironment.logger)
            }
            let message = refused.map { String(describing: $0) } ?? ""
            #expect(message.contains(fixture.certificateFile) && message.contains(other) && message.contains("is the key the certificate's own?"), "\(message)")
        }
    }

    @Test("an expired or not-yet-valid client certificate, PEM or PKCS#12, is refused when the lane is built, naming the file and the date")
    func outOfDateCertificatesAreRefused() async throws {
        try await Fixture.with { fixture in
            let directory = fixture.environment.directory
            let now = Date()
            for (validity, reason) in [
                (now.addingTimeInterval(-86_400 * 400)...now.addingTimeInterval(-60), "expired on"),
                (now.addingTimeInterval(3600)...now.addingTimeInterval(86_400 * 400), "is not valid before"),
            ] {
                let client = try SimulatorCertificates.generateLegacyClient(in: directory, validity: validity)
                let bundle = directory + "/out-of-date.p12"
                try fixture.openssl(["pkcs12", "-export", "-in", client.certificateFile, "-inkey", client.keyFile, "-out", bundle, "-passout", "env:PASS"])
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: bundle)
                for (auth, file) in [
                    (APNsSettings.Auth.certificate(certFile: client.certificateFile, keyFile: client.keyFile, passphraseEnv: nil), client.certificateFile),
                    (APNsSettings.Auth.certificate(certFile: bundle, keyFile: nil, passphraseEnv: Self.variable), bundle),
                ] {
                    let error = #expect(throws: APNSConfigurationError.self) {
                        _ = try APNSProvider(
                            settings: fixture.settings(auth), tokenSource: nil, options: .init(environment: [Self.variable: Self.passphrase]),
                            logger: APNsTestEnvironment.logger)
                    }
                    let message = error.map { String(describing: $0) } ?? ""
                    #expect(message.hasPrefix("the client certificate in \(file) \(reason) 20"), "\(message)")
                }
            }
            #expect(fixture.simulator.counters().connections == 0)
        }
    }

    @Test("a certificate's validity: refused before notBefore and after notAfter, warned about within 30 days of notAfter, silent before")
    func validityWindow() throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let end = start.addingTimeInterval(86_400 * 90)
        let issued = try SimulatorCertificates.issue(in: environment.directory, commonName: "c", purpose: .client, validity: start...end)
        let certificate = try NIOSSLCertificate(bytes: Array(issued.certificatePEM.utf8), format: .pem)
        let path = "/keys/apns.pem"
        #expect(ClientCertificateValidity(of: certificate, at: start.addingTimeInterval(-1)) == .notYetValid(until: start))
        #expect(ClientCertificateValidity(of: certificate, at: end.addingTimeInterval(1)) == .expired(on: end))
        #expect(ClientCertificateValidity(of: certificate, at: end.addingTimeInterval(1)).refusal(path: path)
            == "the client certificate in /keys/apns.pem expired on 2027-04-15T08:00:00Z; the server will refuse it: renew it")
        let early = start.addingTimeInterval(86_400)
        #expect(ClientCertificateValidity(of: certificate, at: early) == .valid(expires: end))
        #expect(ClientCertificateValidity(of: certificate, at: early).refusal(path: path) == nil)
        #expect(ClientCertificateValidity(of: certificate, at: early).warning(path: path, at: early) == nil)
        let late = end.addingTimeInterval(-86_400 * 29.5)
        #expect(ClientCertificateValidity(of: certificate, at: late).warning(path: path, at: late)
            == "the client certificate in /keys/apns.pem expires on 2027-04-15T08:00:00Z (in 29 days): renew it")
    }

    @Test("without a client certificate the certificate-mode simulator refuses the connection and nothing is delivered")
    func tokenLaneIsRefusedInCertificateMode() async throws {
        try await Fixture.with { fixture in
            var settings = fixture.environment.settings(port: fixture.port, connections: 1, timeout: 5)
            settings.auth = .token(teamID: fixture.environment.material.teamID, keyID: fixture.environment.material.keyID, keyFile: fixture.environment.material.keyFile)
            let provider = try APNSProvider(settings: settings, logger: APNsTestEnvironment.logger)
            let outcome = await provider.send(APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(9), seq: 9))
            await provider.shutdown()
            #expect(!Self.isDelivered(outcome), "\(outcome)")
            #expect(fixture.simulator.accepted().isEmpty)
        }
    }
}
