import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A local legacy binary APNs gateway and feedback service (PROTOCOLS.md §3, §4.3), both over TLS 1.2+
/// and both requiring a client certificate signed by the simulator's CA (`bugle-sim certs` writes one:
/// `legacy-client.pem`/`legacy-client.key`).
///
/// The gateway parses commands 0, 1 and 2 with every item checked (``LegacyAPNsFrameParser``), never
/// answers success, and on the first bad notification writes the 6-byte error response and closes,
/// discarding what followed. Tokens starting `bad0` get status 8; tokens starting `dead` are accepted and
/// listed by the feedback service (``LegacyAPNsTokenScript``). Status 10 and silent closes are injected by
/// ``LegacyAPNsSimulatorConfiguration/Faults``. The feedback service sends its whole list to each
/// connection and closes, emptying the list.
///
/// ```swift
/// let certs = try SimulatorCertificates.generate(in: dir, port: 0)
/// let client = try SimulatorCertificates.generateLegacyClient(in: dir)
/// let sim = LegacyAPNsSimulator(configuration: .init(certificates: certs))
/// let ports = try await sim.start()
/// // ... send to 127.0.0.1:ports.gateway, read 127.0.0.1:ports.feedback ...
/// let records = sim.accepted(); let counters = sim.counters()
/// try await sim.stop()
/// ```
public final class LegacyAPNsSimulator: Sendable {
    /// The bound ports.
    public struct Ports: Sendable, Equatable {
        /// The gateway (stand-in for 2195).
        public var gateway: Int
        /// The feedback service (stand-in for 2196).
        public var feedback: Int

        /// Creates a pair of ports.
        /// - Parameters:
        ///   - gateway: The gateway port.
        ///   - feedback: The feedback port.
        public init(gateway: Int, feedback: Int) {
            self.gateway = gateway
            self.feedback = feedback
        }
    }

    private enum Lifecycle {
        case idle
        case running(group: MultiThreadedEventLoopGroup, channels: [any Channel], ports: Ports)
        case stopped
    }

    private let configuration: LegacyAPNsSimulatorConfiguration
    private let logger: Logger
    private let lifecycle = NIOLockedValueBox<Lifecycle>(.idle)
    private let ledgerBox = NIOLockedValueBox<LegacyAPNsSimulatorLedger?>(nil)
    private let queuedFeedback = NIOLockedValueBox<[(time: UInt32, token: [UInt8])]>([])

    /// Creates a simulator (not yet listening).
    /// - Parameters:
    ///   - configuration: What to serve and how to misbehave.
    ///   - logger: Logger for lifecycle events (notifications are not logged).
    public init(configuration: LegacyAPNsSimulatorConfiguration, logger: Logger = Logger(label: "bugle.sim.legacy-apns")) {
        self.configuration = configuration
        self.logger = logger
    }

    /// The bound ports while running.
    public var ports: Ports? {
        lifecycle.withLockedValue {
            if case .running(_, _, let ports) = $0 { return ports }
            return nil
        }
    }

    /// Starts the gateway and the feedback service.
    /// - Returns: The bound ports (useful with port 0).
    /// - Throws: TLS material errors, bind errors, or ``APNsSimulator/LifecycleError`` when already started.
    @discardableResult
    public func start() async throws -> Ports {
        let ledger = try LegacyAPNsSimulatorLedger(configuration: configuration)
        for entry in queuedFeedback.withLockedValue({ $0 }) {
            ledger.queueFeedback(token: entry.token, time: entry.time)
        }
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(configuration.certificatePEM.utf8))
                .map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuration.privateKeyPEM.utf8), format: .pem))
        )
        tls.minimumTLSVersion = .tlsv12
        // Server-side verification requires a client certificate chaining to the simulator's CA.
        tls.certificateVerification = .noHostnameVerification
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(configuration.clientCAPEM.utf8)))
        let sslContext = try NIOSSLContext(configuration: tls)
        let parser = LegacyAPNsFrameParser(
            payloadLimit: configuration.payloadLimit,
            legacyPayloadLimit: configuration.strictLegacyPayloadLimit ? 256 : configuration.payloadLimit
        )
        let linger = TimeAmount.nanoseconds(
            configuration.lingerAfterError.components.seconds * 1_000_000_000
                + configuration.lingerAfterError.components.attoseconds / 1_000_000_000
        )

        let feedbackCut = configuration.faults.feedbackCut
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        let gateway = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let id = ledger.connectionOpened()
                    channel.closeFuture.whenComplete { _ in
                        ledger.updateCounters { $0.openConnections -= 1 }
                    }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    try sync.addHandler(LegacyAPNsGatewayHandler(connectionID: id, parser: parser, ledger: ledger, linger: linger))
                }
            }
        let feedback = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    try sync.addHandler(LegacyAPNsFeedbackHandler(ledger: ledger, cut: feedbackCut))
                }
            }
        var channels: [any Channel] = []
        do {
            channels.append(try await gateway.bind(host: configuration.host, port: configuration.gatewayPort).get())
            channels.append(try await feedback.bind(host: configuration.host, port: configuration.feedbackPort).get())
        } catch {
            for channel in channels { try? await channel.close() }
            try? await group.shutdownGracefully()
            throw error
        }
        guard let gatewayPort = channels[0].localAddress?.port, let feedbackPort = channels[1].localAddress?.port else {
            for channel in channels { try? await channel.close() }
            try? await group.shutdownGracefully()
            throw APNsSimulator.LifecycleError(description: "bound socket has no port")
        }
        let ports = Ports(gateway: gatewayPort, feedback: feedbackPort)
        let started = lifecycle.withLockedValue { state -> Bool in
            guard case .idle = state else { return false }
            state = .running(group: group, channels: channels, ports: ports)
            return true
        }
        guard started else {
            for channel in channels { try? await channel.close() }
            try? await group.shutdownGracefully()
            throw APNsSimulator.LifecycleError(description: "simulator already started")
        }
        ledgerBox.withLockedValue { $0 = ledger }
        logger.info("legacy APNs simulator listening", metadata: ["gateway": "\(gatewayPort)", "feedback": "\(feedbackPort)"])
        return ports
    }

    /// Stops listening, closes every connection and flushes the record file.
    public func stop() async throws {
        let previous = lifecycle.withLockedValue { state -> Lifecycle in
            defer { state = .stopped }
            return state
        }
        guard case .running(let group, let channels, _) = previous else { return }
        for channel in channels { try? await channel.close() }
        try await group.shutdownGracefully()
        ledgerBox.withLockedValue { $0 }?.close()
    }

    /// Adds a tuple to the feedback list (before or after ``start()``).
    /// - Parameters:
    ///   - token: The device token as hex.
    ///   - time: UNIX seconds when the app was seen gone.
    /// - Returns: False when `token` is not hex.
    @discardableResult
    public func queueFeedback(token: String, time: UInt32) -> Bool {
        guard let bytes = Self.bytes(hex: token) else { return false }
        if let ledger = ledgerBox.withLockedValue({ $0 }) {
            ledger.queueFeedback(token: bytes, time: time)
        } else {
            queuedFeedback.withLockedValue { $0.append((time, bytes)) }
        }
        return true
    }

    /// The feedback list as it stands (tokens as hex), without emptying it.
    public func pendingFeedback() -> [(time: UInt32, token: String)] {
        let entries = ledgerBox.withLockedValue { $0 }?.peekFeedback() ?? queuedFeedback.withLockedValue { $0 }
        return entries.map { ($0.time, LegacyAPNsSimulatorLedger.hex($0.token)) }
    }

    /// Every accepted notification so far (a snapshot).
    public func accepted() -> [LegacyAPNsRecord] {
        ledgerBox.withLockedValue { $0 }?.records() ?? []
    }

    /// Live counters (a snapshot).
    public func counters() -> LegacyAPNsSimulatorCounters {
        ledgerBox.withLockedValue { $0 }?.counters() ?? LegacyAPNsSimulatorCounters()
    }

    /// Flushes buffered JSONL records to the record file.
    public func flushRecords() {
        ledgerBox.withLockedValue { $0 }?.flush()
    }

    private static func bytes(hex: String) -> [UInt8]? {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return character - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
