import ArgumentParser
import BugleSimulator
import Foundation

extension BugleSim {
    /// `bugle-sim legacy --dir DIR [--port P] [--feedback-port F] [faults] [--record FILE]`
    struct Legacy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the legacy binary APNs gateway and feedback service until SIGINT/SIGTERM.",
            discussion: """
                Both ports use TLS and require the client certificate `bugle-sim certs` writes (legacy-client.pem, \
                legacy-client.key); they are created if DIR lacks them. Writes DIR/providers-legacy.yaml with a \
                legacy_apns: section for the bound ports. Tokens starting bad0 get status 8; tokens starting dead \
                are accepted and listed by the feedback service.
                """
        )

        @Option(help: "Simulator directory (certificates, keys, providers files).")
        var dir: String

        @Option(help: "Gateway port (0...65535, 0 = ephemeral).")
        var port: Int = 2195

        @Option(name: .customLong("feedback-port"), help: "Feedback port (0...65535, 0 = ephemeral).")
        var feedbackPort: Int = 2196

        @Option(help: "Append every accepted notification as JSON lines to this file.")
        var record: String?

        @Option(name: .customLong("payload-limit"), help: "Largest payload in bytes.")
        var payloadLimit: Int = 2048

        @Flag(name: .customLong("strict-legacy-limit"), help: "Limit commands 0 and 1 to 256-byte payloads.")
        var strictLegacyLimit = false

        @Option(name: .customLong("shutdown-every"), help: "Answer status 10 (shutdown) after every Nth accepted notification.")
        var shutdownEvery: Int?

        @Option(name: .customLong("silent-close-every"), help: "Close without an error response after every Nth accepted notification.")
        var silentCloseEvery: Int?

        @Option(
            name: .customLong("feedback-cut-after"),
            help: "Feedback service: send N complete tuples, then half of the next one, and close (the list is emptied all the same).")
        var feedbackCutAfter: Int?

        @Option(
            name: .customLong("feedback-stall-after"),
            help: "Feedback service: send N complete tuples, then nothing more, leaving the connection open (the list is emptied all the same).")
        var feedbackStallAfter: Int?

        @Option(name: .customLong("quiet-period"), help: "quiet_period written into providers-legacy.yaml, in seconds.")
        var quietPeriod: Double = 0.5

        @Option(help: "Event-loop threads (at least 1).")
        var threads: Int = 1

        @Option(
            name: .customLong("counters-port"),
            help: "Also serve the simulator's live counters as JSON on http://127.0.0.1:PORT/counters (plain HTTP/1.1, loopback only; 0 = ephemeral)."
        )
        var countersPort: Int?

        func validate() throws {
            try OptionCheck.ports([("--port", port), ("--feedback-port", feedbackPort), ("--counters-port", countersPort)])
            try OptionCheck.within(OptionCheck.threads, "--threads", threads)
            guard (256...65_535).contains(payloadLimit) else { throw ValidationError("--payload-limit must be within 256...65535") }
            guard (0.01...60).contains(quietPeriod) else { throw ValidationError("--quiet-period must be within 0.01...60") }
            if let shutdownEvery, shutdownEvery < 1 { throw ValidationError("--shutdown-every must be at least 1") }
            if let silentCloseEvery, silentCloseEvery < 1 { throw ValidationError("--silent-close-every must be at least 1") }
            if feedbackCutAfter != nil, feedbackStallAfter != nil {
                throw ValidationError("give at most one of --feedback-cut-after and --feedback-stall-after")
            }
            if let count = feedbackCutAfter ?? feedbackStallAfter, count < 0 {
                throw ValidationError("--feedback-cut-after and --feedback-stall-after must be at least 0")
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
                material = try SimulatorCertificates.generate(in: dir, port: 2197)
            }
            if !SimulatorCertificates.legacyClientExists(in: dir) {
                try SimulatorCertificates.generateLegacyClient(in: dir)
            }
            var configuration = LegacyAPNsSimulatorConfiguration(certificates: material, gatewayPort: port, feedbackPort: feedbackPort)
            configuration.payloadLimit = payloadLimit
            configuration.strictLegacyPayloadLimit = strictLegacyLimit
            let feedbackCut = feedbackCutAfter.map { LegacyAPNsSimulatorConfiguration.FeedbackCut.midTuple(after: $0) }
                ?? feedbackStallAfter.map { LegacyAPNsSimulatorConfiguration.FeedbackCut.stall(after: $0) }
            configuration.faults = .init(shutdownEvery: shutdownEvery, silentCloseEvery: silentCloseEvery, feedbackCut: feedbackCut)
            configuration.recordFile = record
            configuration.keepRecordsInMemory = false
            configuration.threads = threads
            let simulator = LegacyAPNsSimulator(configuration: configuration)
            let ports = try await ListenerStart.run([("--port", port), ("--feedback-port", feedbackPort)]) { try await simulator.start() }
            var countersServer: SimulatorCountersServer?
            var lines = "legacy 127.0.0.1:\(ports.gateway)\nfeedback 127.0.0.1:\(ports.feedback)\n"
            if let countersPort {
                let server = SimulatorCountersServer(port: countersPort) { SimulatorCountersSnapshot(legacy: simulator.counters()) }
                do {
                    let bound = try await ListenerStart.run([("--counters-port", countersPort)]) { try await server.start() }
                    lines += "counters \(SimulatorCountersServer.url(port: bound))\n"
                } catch {
                    try? await simulator.stop()
                    throw error
                }
                countersServer = server
            }
            try material.writeLegacyProvidersFile(gatewayPort: ports.gateway, feedbackPort: ports.feedback, quietPeriod: quietPeriod)
            lines += "providers file: \(material.legacyProvidersFile)\n"
            // FileHandle writes are unbuffered, so scripts reading our stdout see the ports at once.
            FileHandle.standardOutput.write(Data(lines.utf8))
            await LegacySignals.waitForTermination()
            try await countersServer?.stop()
            try await simulator.stop()
            let counters = simulator.counters()
            print(
                "accepted \(counters.accepted) rejected \(counters.rejected) connections \(counters.connections) "
                    + "shutdowns \(counters.shutdownsSent) silent closes \(counters.silentCloses) feedback tuples \(counters.feedbackTuplesSent)"
            )
        }
    }
}

/// Waits for SIGINT or SIGTERM. Every access (set-up and handlers) happens on one serial dispatch queue,
/// which is why `@unchecked Sendable` is sound here.
private final class LegacySignals: @unchecked Sendable {
    private var continuation: CheckedContinuation<Void, Never>?
    private var sources: [any DispatchSourceSignal] = []

    static func waitForTermination() async {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let queue = DispatchQueue(label: "bugle-sim.legacy.signals")
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.sync {
                let waiter = LegacySignals()
                waiter.continuation = continuation
                for signalNumber in [SIGINT, SIGTERM] {
                    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                    source.setEventHandler { waiter.fire() }
                    source.resume()
                    waiter.sources.append(source)
                }
            }
        }
    }

    private func fire() {
        continuation?.resume()
        continuation = nil
    }
}
