import ArgumentParser
import BugleSimulator
import Foundation
import Logging

/// `bugle-sim`: local stand-ins for push providers (APNs, FCM).
struct BugleSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bugle-sim",
        abstract: "Run local push-provider simulators for Bugle.",
        subcommands: [Certs.self, Serve.self, JWT.self, FCMToken.self, Legacy.self]
    )
}

extension BugleSim {
    /// `bugle-sim certs DIR [--port P] [--fcm-port P]`
    struct Certs: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Write a private CA, a server certificate, an APNs .p8 key, an FCM service account and providers.yaml into DIR."
        )

        @Argument(help: "Directory to write into (created if missing).")
        var dir: String

        @Option(help: "APNs port written into providers.yaml (0...65535).")
        var port: Int = 2197

        @Option(help: "Bundle id (apns-topic) the simulator accepts.")
        var topic: String = "com.example.bugle"

        @Option(
            name: .customLong("fcm-port"),
            help: "FCM port: adds an fcm: section to providers.yaml and points the service account's token_uri at it."
        )
        var fcmPort: Int?

        func validate() throws {
            try OptionCheck.ports([("--port", port), ("--fcm-port", fcmPort)])
        }

        func run() throws {
            let material = try SimulatorCertificates.generate(in: dir, port: port, topic: topic, fcmPort: fcmPort)
            print(
                "wrote \(dir): ca.pem, server.pem, AuthKey_\(material.keyID).p8, fcm-service-account.json, providers.yaml"
            )
            try SimulatorCertificates.generateLegacyClient(in: dir, commonName: topic)
            print("wrote \(dir): legacy-client.pem, legacy-client.key (legacy APNs client certificate)")
            print("team_id \(material.teamID)  key_id \(material.keyID)  topic \(material.topic)")
            print("fcm project \(material.fcmProjectID)  client_email \(material.fcmClientEmail)")
        }
    }

    /// `bugle-sim fcm-token DIR [--lifetime S]`: prints an FCM access token for h2load and curl.
    struct FCMToken: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fcm-token",
            abstract: "Print an access token the FCM simulator of DIR accepts (for h2load and curl; minted offline)."
        )

        @Argument(help: "Simulator directory written by `bugle-sim certs` or `serve`.")
        var dir: String

        @Option(help: "Seconds the token stays valid.")
        var lifetime: Int = 3600

        func validate() throws {
            guard lifetime > 0 else { throw ValidationError("--lifetime must be positive") }
        }

        func run() throws {
            print(try SimulatorCertificates.load(from: dir).fcmAccessToken(lifetime: .seconds(lifetime)))
        }
    }

    /// `bugle-sim jwt DIR`: prints a provider JWT for load generators (h2load) that cannot sign their own.
    struct JWT: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a provider JWT signed with DIR's .p8 key (for h2load and curl against the simulator)."
        )

        @Argument(help: "Simulator directory written by `bugle-sim certs`.")
        var dir: String

        func run() throws {
            print(try SimulatorCertificates.load(from: dir).providerJWT())
        }
    }

    /// `bugle-sim serve --dir DIR --apns-port P [faults] [--record FILE] [--fcm-port P [FCM options]]`
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Serve the APNs simulator (and the FCM simulator with --fcm-port) until SIGINT/SIGTERM (writes certificates first if DIR is empty)."
        )

        @Option(help: "Simulator directory (certificates, key, providers.yaml).")
        var dir: String

        @Option(name: .customLong("apns-port"), help: "APNs port (0...65535, 0 = ephemeral).")
        var apnsPort: Int = 2197

        @Option(help: "Append every accepted notification as JSON lines to this file.")
        var record: String?

        @Option(name: .customLong("max-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS (at least 1).")
        var maxStreams: Int = 1000

        @Option(
            name: .customLong("streams-before-auth"),
            help: "Token auth: the stream limit of a new connection until a request carries a valid JWT, as APNs does (0 = --max-streams from the start)."
        )
        var streamsBeforeAuth: Int = 1

        @Option(
            name: .customLong("streams-after-rejection"),
            help: "Lower a connection's stream limit to N after a rejected request, until the next success (0 = off)."
        )
        var streamsAfterRejection: Int = 0

        @Option(
            name: .customLong("client-ca"),
            help: "Certificate auth, as APNs' certificate-based connections: the TLS handshake requires a client certificate issued by this CA (a PEM file; DIR/ca.pem signs the legacy-client.pem `bugle-sim certs` writes) and requests need no provider JWT."
        )
        var clientCA: String?

        @Option(name: .customLong("error-ratio"), help: "Fraction of valid requests answered 503 ServiceUnavailable.")
        var errorRatio: Double = 0

        @Flag(help: "Answer as APNs' development environment: every answer also carries apns-unique-id.")
        var sandbox = false

        @Option(
            name: .customLong("other-topic"),
            help: "Another app of the team (repeatable): requests for it are answered 400 DeviceTokenNotForTopic, as APNs answers a campaign whose topic names the wrong app."
        )
        var otherTopics: [String] = []

        @Option(name: .customLong("hang-ratio"), help: "Fraction of valid requests never answered.")
        var hangRatio: Double = 0

        @Option(name: .customLong("latency-ms"), help: "Delay before every answer, in milliseconds (0 = none).")
        var latencyMilliseconds: Int = 0

        @Option(name: .customLong("goaway-every"), help: "Send GOAWAY after N streams per connection (at least 1).")
        var goAwayEvery: Int?

        @Option(name: .customLong("drop-every"), help: "Drop the TCP connection at its Nth stream (at least 1).")
        var dropEvery: Int?

        @Option(
            name: .customLong("goaway-first-stream"),
            help: "Turn every connection away at its first stream: GOAWAY (last-stream-id 0) with this debug data, e.g. '{\"reason\":\"BadCertificateEnvironment\"}' ('' for none)."
        )
        var goAwayFirstStream: String?

        @Option(
            name: .customLong("jwt-max-age"),
            help: "Seconds after which a JWT is ExpiredProviderToken (at least 1: with 0 every JWT would be expired at once)."
        )
        var jwtMaxAge: Int = 3600

        @Option(
            name: .customLong("token-update-interval"),
            help: "Minimum seconds between JWT changes per connection (0 = a connection may change its JWT at any time)."
        )
        var tokenUpdateInterval: Int = 1200

        @Option(help: "Random seed for fault injection.")
        var seed: UInt64 = 0x5EED

        @Option(help: "Event-loop threads (at least 1; default: cores).")
        var threads: Int?

        @Option(
            name: .customLong("fcm-port"),
            help: "Also serve the FCM simulator on this port (0 = ephemeral); off when not given."
        )
        var fcmPort: Int?

        @Option(name: .customLong("fcm-token-lifetime"), help: "Seconds an FCM access token from POST /token stays valid.")
        var fcmTokenLifetime: Int = 3600

        @Option(name: .customLong("fcm-quota"), help: "FCM messages per rolling minute (Google's default 600000).")
        var fcmQuota: Int = 600_000

        @Option(name: .customLong("fcm-error-ratio"), help: "Fraction of valid FCM messages answered 503 UNAVAILABLE.")
        var fcmErrorRatio: Double = 0

        @Option(name: .customLong("fcm-internal-ratio"), help: "Fraction of valid FCM messages answered 500 INTERNAL.")
        var fcmInternalRatio: Double = 0

        @Option(name: .customLong("fcm-retry-after"), help: "Retry-After seconds of scripted and injected FCM 429/503 answers.")
        var fcmRetryAfter: Int = 1

        @Option(name: .customLong("fcm-latency-ms"), help: "Delay before every FCM answer, in milliseconds (0 = none).")
        var fcmLatencyMilliseconds: Int = 0

        @Option(
            name: .customLong("fcm-token-outage"),
            help: "Seconds after start during which the FCM token endpoint answers every grant 503 temporarily_unavailable (0 = none)."
        )
        var fcmTokenOutage: Int = 0

        @Option(name: .customLong("fcm-record"), help: "Append every delivered FCM message as JSON lines to this file.")
        var fcmRecord: String?

        @Option(
            name: .customLong("metadata-port"),
            help: "Also serve a Google Cloud metadata server (plain HTTP/1.1) on this port (0 = ephemeral), issuing FCM access tokens for credentials: metadata_server; point Bugle at it with GCE_METADATA_HOST=127.0.0.1:PORT."
        )
        var metadataPort: Int?

        @Option(
            name: .customLong("counters-port"),
            help: "Also serve every simulator's live counters as JSON on http://127.0.0.1:PORT/counters (plain HTTP/1.1, loopback only; 0 = ephemeral)."
        )
        var countersPort: Int?

        func validate() throws {
            try OptionCheck.ports([
                ("--apns-port", apnsPort), ("--fcm-port", fcmPort), ("--metadata-port", metadataPort), ("--counters-port", countersPort),
            ])
            try OptionCheck.within(1...OptionCheck.streamLimits.upperBound, "--max-streams", maxStreams)
            try OptionCheck.within(OptionCheck.streamLimits, "--streams-before-auth", streamsBeforeAuth)
            try OptionCheck.within(OptionCheck.streamLimits, "--streams-after-rejection", streamsAfterRejection)
            try OptionCheck.atLeast(1, [
                ("--goaway-every", goAwayEvery), ("--drop-every", dropEvery), ("--jwt-max-age", jwtMaxAge),
                ("--fcm-token-lifetime", fcmTokenLifetime), ("--fcm-retry-after", fcmRetryAfter),
            ])
            try OptionCheck.within(OptionCheck.threads, "--threads", threads)
            try OptionCheck.within(OptionCheck.latencies, "--latency-ms", latencyMilliseconds)
            try OptionCheck.within(OptionCheck.latencies, "--fcm-latency-ms", fcmLatencyMilliseconds)
            try OptionCheck.atLeast(0, [
                ("--token-update-interval", tokenUpdateInterval), ("--fcm-quota", fcmQuota), ("--fcm-token-outage", fcmTokenOutage),
            ])
            guard (0...1).contains(errorRatio), (0...1).contains(hangRatio), errorRatio + hangRatio <= 1 else {
                throw ValidationError("--error-ratio and --hang-ratio must be within 0...1 and sum to at most 1")
            }
            guard (0...1).contains(fcmErrorRatio), (0...1).contains(fcmInternalRatio),
                fcmErrorRatio + fcmInternalRatio <= 1
            else {
                throw ValidationError("--fcm-error-ratio and --fcm-internal-ratio must be within 0...1 and sum to at most 1")
            }
        }

        func run() async throws {
            try await serve()
        }

        /// Starts the simulator and blocks until SIGINT/SIGTERM.
        func serve() async throws {
            let material: SimulatorCertificates
            if SimulatorCertificates.exists(in: dir) {
                // Also gives a directory from an older version its FCM material.
                material = try SimulatorCertificates.load(from: dir)
            } else {
                material = try SimulatorCertificates.generate(in: dir, port: apnsPort, fcmPort: fcmPort)
            }
            var configuration = APNsSimulatorConfiguration(certificates: material, port: apnsPort)
            configuration.maxConcurrentStreams = maxStreams
            configuration.streamsBeforeAuthentication = streamsBeforeAuth > 0 ? streamsBeforeAuth : nil
            configuration.streamsAfterRejection = streamsAfterRejection > 0 ? streamsAfterRejection : nil
            configuration.jwtMaxAge = .seconds(jwtMaxAge)
            configuration.tokenUpdateMinInterval = .seconds(tokenUpdateInterval)
            configuration.recordFile = record
            configuration.keepRecordsInMemory = false
            configuration.sandbox = sandbox
            configuration.otherTopics = otherTopics
            if let clientCA {
                do {
                    configuration.clientCAPEM = try String(contentsOfFile: clientCA, encoding: .utf8)
                } catch {
                    throw ValidationError("--client-ca: cannot read \(clientCA) as PEM text: \(error.localizedDescription)")
                }
            }
            if let threads { configuration.threads = threads }
            configuration.faults = .init(
                serviceUnavailableRatio: errorRatio,
                hangRatio: hangRatio,
                latency: latencyMilliseconds > 0 ? .milliseconds(latencyMilliseconds) : nil,
                goAwayEvery: goAwayEvery,
                dropConnectionEvery: dropEvery,
                goAwayOnFirstStream: goAwayFirstStream,
                seed: seed
            )
            let simulator = APNsSimulator(configuration: configuration)
            let port = try await ListenerStart.run([("--apns-port", apnsPort)]) { try await simulator.start() }

            var fcmSimulator: FCMSimulator?
            var boundFCMPort: Int?
            if let fcmPort {
                let fcm = FCMSimulator(configuration: fcmConfiguration(material: material, port: fcmPort))
                do {
                    boundFCMPort = try await ListenerStart.run([("--fcm-port", fcmPort)]) { try await fcm.start() }
                } catch {
                    try? await simulator.stop()
                    throw error
                }
                fcmSimulator = fcm
            }
            var metadataServer: MetadataServerSimulator?
            var boundMetadataPort: Int?
            if let metadataPort {
                var metadataConfiguration = MetadataServerConfiguration(certificates: material, port: metadataPort)
                metadataConfiguration.accessTokenLifetime = .seconds(fcmTokenLifetime)
                let server = MetadataServerSimulator(configuration: metadataConfiguration)
                do {
                    boundMetadataPort = try await ListenerStart.run([("--metadata-port", metadataPort)]) { try await server.start() }
                } catch {
                    try? await simulator.stop()
                    try? await fcmSimulator?.stop()
                    throw error
                }
                metadataServer = server
            }
            var countersServer: SimulatorCountersServer?
            var boundCountersPort: Int?
            if let countersPort {
                let (fcm, metadata) = (fcmSimulator, metadataServer)
                let server = SimulatorCountersServer(port: countersPort) {
                    SimulatorCountersSnapshot(apns: simulator.counters(), fcm: fcm?.counters(), metadata: metadata?.counters())
                }
                do {
                    boundCountersPort = try await ListenerStart.run([("--counters-port", countersPort)]) { try await server.start() }
                } catch {
                    try? await simulator.stop()
                    try? await fcmSimulator?.stop()
                    try? await metadataServer?.stop()
                    throw error
                }
                countersServer = server
            }
            if port != apnsPort || boundFCMPort != nil {
                try material.writeProvidersFile(port: port, fcmPort: boundFCMPort)
            }
            var lines = "apns https://127.0.0.1:\(port)\n"
            if let boundFCMPort {
                try material.writeServiceAccount(fcmPort: boundFCMPort)
                lines += "fcm https://127.0.0.1:\(boundFCMPort)\n"
                lines += "fcm service account: \(material.fcmServiceAccountFile)\n"
            }
            if let boundMetadataPort {
                lines += "metadata server http://127.0.0.1:\(boundMetadataPort) (GCE_METADATA_HOST=127.0.0.1:\(boundMetadataPort), project_id \(material.fcmProjectID))\n"
            }
            if let boundCountersPort {
                lines += "counters \(SimulatorCountersServer.url(port: boundCountersPort))\n"
            }
            lines += "providers file: \(material.providersFile)\n"
            // FileHandle writes are unbuffered, so scripts reading our stdout see the ports at once.
            FileHandle.standardOutput.write(Data(lines.utf8))
            await Self.waitForTermination()
            try await countersServer?.stop()
            try await simulator.stop()
            try await fcmSimulator?.stop()
            try await metadataServer?.stop()
            let counters = simulator.counters()
            print("accepted \(counters.accepted) rejected \(counters.rejected) connections \(counters.connections)")
            if let fcmCounters = fcmSimulator?.counters() {
                print(
                    "fcm accepted \(fcmCounters.accepted) rejected \(fcmCounters.rejected) token grants \(fcmCounters.tokenGrants) connections \(fcmCounters.connections)"
                )
            }
            if let metadataCounters = metadataServer?.counters() {
                print("metadata tokens issued \(metadataCounters.tokensIssued) of \(metadataCounters.tokenRequests) requests, refused for headers \(metadataCounters.refusedHeaders)")
            }
        }

        /// The FCM simulator's configuration from the command line.
        private func fcmConfiguration(material: SimulatorCertificates, port: Int) -> FCMSimulatorConfiguration {
            var configuration = FCMSimulatorConfiguration(certificates: material, port: port)
            configuration.accessTokenLifetime = .seconds(fcmTokenLifetime)
            configuration.quotaPerMinute = fcmQuota
            configuration.retryAfter = .seconds(fcmRetryAfter)
            configuration.recordFile = fcmRecord
            configuration.keepRecordsInMemory = false
            if let threads { configuration.threads = threads }
            configuration.faults = .init(
                unavailableRatio: fcmErrorRatio,
                internalRatio: fcmInternalRatio,
                latency: fcmLatencyMilliseconds > 0 ? .milliseconds(fcmLatencyMilliseconds) : nil,
                seed: seed,
                tokenOutage: .seconds(fcmTokenOutage)
            )
            return configuration
        }

        /// Suspends until SIGINT or SIGTERM.
        private static func waitForTermination() async {
            signal(SIGINT, SIG_IGN)
            signal(SIGTERM, SIG_IGN)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let queue = DispatchQueue(label: "bugle-sim.signals")
                queue.sync {
                    let once = SignalOnce(continuation: continuation)
                    for signalNumber in [SIGINT, SIGTERM] {
                        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                        source.setEventHandler { once.fire() }
                        source.resume()
                        once.retain(source)
                    }
                }
            }
        }
    }
}

/// Resumes a continuation on the first signal only. Every access (set-up and handlers) happens on one serial
/// dispatch queue, which is why `@unchecked Sendable` is sound here.
private final class SignalOnce: @unchecked Sendable {
    private var continuation: CheckedContinuation<Void, Never>?
    private var sources: [any DispatchSourceSignal] = []

    init(continuation: CheckedContinuation<Void, Never>) {
        self.continuation = continuation
    }

    func retain(_ source: any DispatchSourceSignal) {
        sources.append(source)
    }

    func fire() {
        continuation?.resume()
        continuation = nil
    }
}

// `main.swift` cannot use `@main`, so run the command the way `AsyncParsableCommand.main()` does.
do {
    var command = try BugleSim.parseAsRoot()
    if let serve = command as? BugleSim.Serve {
        try await serve.serve()
    } else if let legacy = command as? BugleSim.Legacy {
        try await legacy.serve()
    } else {
        try command.run()
    }
} catch {
    BugleSim.exit(withError: error)
}
