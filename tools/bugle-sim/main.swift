import ArgumentParser
import BugleSimulator
import Foundation
import Logging

/// `bugle-sim`: local stand-ins for push providers (APNs today).
struct BugleSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bugle-sim",
        abstract: "Run local push-provider simulators for Bugle.",
        subcommands: [Certs.self, Serve.self, JWT.self, Legacy.self]
    )
}

extension BugleSim {
    /// `bugle-sim certs DIR [--port P]`
    struct Certs: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a private CA, a server certificate, an APNs .p8 key and providers.yaml into DIR."
        )

        @Argument(help: "Directory to write into (created if missing).")
        var dir: String

        @Option(help: "APNs port written into providers.yaml.")
        var port: Int = 2197

        @Option(help: "Bundle id (apns-topic) the simulator accepts.")
        var topic: String = "com.example.bugle"

        func run() throws {
            let material = try SimulatorCertificates.generate(in: dir, port: port, topic: topic)
            print("wrote \(dir): ca.pem, server.pem, AuthKey_\(material.keyID).p8, providers.yaml")
            try SimulatorCertificates.generateLegacyClient(in: dir, commonName: topic)
            print("wrote \(dir): legacy-client.pem, legacy-client.key (legacy APNs client certificate)")
            print("team_id \(material.teamID)  key_id \(material.keyID)  topic \(material.topic)")
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

    /// `bugle-sim serve --dir DIR --apns-port P [faults] [--record FILE]`
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the APNs simulator until SIGINT/SIGTERM (writes certificates first if DIR is empty)."
        )

        @Option(help: "Simulator directory (certificates, key, providers.yaml).")
        var dir: String

        @Option(name: .customLong("apns-port"), help: "APNs port (0 = ephemeral).")
        var apnsPort: Int = 2197

        @Option(help: "Append every accepted notification as JSON lines to this file.")
        var record: String?

        @Option(name: .customLong("max-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS.")
        var maxStreams: Int = 1000

        @Option(name: .customLong("error-ratio"), help: "Fraction of valid requests answered 503 ServiceUnavailable.")
        var errorRatio: Double = 0

        @Option(name: .customLong("hang-ratio"), help: "Fraction of valid requests never answered.")
        var hangRatio: Double = 0

        @Option(name: .customLong("latency-ms"), help: "Delay before every answer, in milliseconds.")
        var latencyMilliseconds: Int = 0

        @Option(name: .customLong("goaway-every"), help: "Send GOAWAY after N streams per connection.")
        var goAwayEvery: Int?

        @Option(name: .customLong("drop-every"), help: "Drop the TCP connection at its Nth stream.")
        var dropEvery: Int?

        @Option(name: .customLong("jwt-max-age"), help: "Seconds after which a JWT is ExpiredProviderToken.")
        var jwtMaxAge: Int = 3600

        @Option(name: .customLong("token-update-interval"), help: "Minimum seconds between JWT changes per connection.")
        var tokenUpdateInterval: Int = 1200

        @Option(help: "Random seed for fault injection.")
        var seed: UInt64 = 0x5EED

        @Option(help: "Event-loop threads (default: cores).")
        var threads: Int?

        func validate() throws {
            guard (0...1).contains(errorRatio), (0...1).contains(hangRatio), errorRatio + hangRatio <= 1 else {
                throw ValidationError("--error-ratio and --hang-ratio must be within 0...1 and sum to at most 1")
            }
        }

        func run() async throws {
            try await serve()
        }

        /// Starts the simulator and blocks until SIGINT/SIGTERM.
        func serve() async throws {
            let material: SimulatorCertificates
            if SimulatorCertificates.exists(in: dir) {
                material = try SimulatorCertificates.load(from: dir)
            } else {
                material = try SimulatorCertificates.generate(in: dir, port: apnsPort)
            }
            var configuration = APNsSimulatorConfiguration(certificates: material, port: apnsPort)
            configuration.maxConcurrentStreams = maxStreams
            configuration.jwtMaxAge = .seconds(jwtMaxAge)
            configuration.tokenUpdateMinInterval = .seconds(tokenUpdateInterval)
            configuration.recordFile = record
            configuration.keepRecordsInMemory = false
            if let threads { configuration.threads = threads }
            configuration.faults = .init(
                serviceUnavailableRatio: errorRatio,
                hangRatio: hangRatio,
                latency: latencyMilliseconds > 0 ? .milliseconds(latencyMilliseconds) : nil,
                goAwayEvery: goAwayEvery,
                dropConnectionEvery: dropEvery,
                seed: seed
            )
            let simulator = APNsSimulator(configuration: configuration)
            let port = try await simulator.start()
            if port != apnsPort {
                try material.writeProvidersFile(port: port)
            }
            // FileHandle writes are unbuffered, so scripts reading our stdout see the port at once.
            FileHandle.standardOutput.write(
                Data("apns https://127.0.0.1:\(port)\nproviders file: \(material.providersFile)\n".utf8)
            )
            await Self.waitForTermination()
            try await simulator.stop()
            let counters = simulator.counters()
            print("accepted \(counters.accepted) rejected \(counters.rejected) connections \(counters.connections)")
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
