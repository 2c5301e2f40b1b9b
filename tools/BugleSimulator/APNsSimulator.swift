import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A local APNs provider API (HTTP/2 over TLS 1.2+, ALPN `h2`) that enforces Apple's request rules,
/// answers with Apple's status codes and reason JSON, injects faults and records every accepted
/// notification. See `tools/BugleSimulator/README.md` and ``APNsTokenScript`` for the token scheme.
///
/// ```swift
/// let certs = try SimulatorCertificates.generate(in: dir, port: 0)
/// let sim = APNsSimulator(configuration: .init(certificates: certs))
/// let port = try await sim.start()
/// // ... send ...
/// let records = sim.accepted(); let counters = sim.counters()
/// try await sim.stop()
/// ```
public final class APNsSimulator: Sendable {
    private enum Lifecycle {
        case idle
        case running(group: MultiThreadedEventLoopGroup, channel: any Channel, port: Int)
        case stopped
    }

    /// Errors of the simulator's lifecycle.
    public struct LifecycleError: Error, CustomStringConvertible, Sendable {
        /// What went wrong.
        public var description: String
    }

    private let configuration: APNsSimulatorConfiguration
    private let logger: Logger
    private let lifecycle = NIOLockedValueBox<Lifecycle>(.idle)
    private let connections = NIOLockedValueBox<[Int: APNsConnectionContext]>([:])
    private let ledgerBox = NIOLockedValueBox<APNsSimulatorLedger?>(nil)

    /// Creates a simulator (not yet listening).
    /// - Parameters:
    ///   - configuration: What to serve and how to misbehave.
    ///   - logger: Logger for lifecycle events (requests are not logged).
    public init(configuration: APNsSimulatorConfiguration, logger: Logger = Logger(label: "bugle.sim.apns")) {
        self.configuration = configuration
        self.logger = logger
    }

    /// The bound port while running.
    public var port: Int? {
        lifecycle.withLockedValue {
            if case .running(_, _, let port) = $0 { return port }
            return nil
        }
    }

    /// Starts listening.
    /// - Returns: The bound port (useful with port 0).
    /// - Throws: TLS material errors, bind errors, or ``LifecycleError`` when already started.
    @discardableResult
    public func start() async throws -> Int {
        let ledger = try APNsSimulatorLedger(
            seed: configuration.faults.seed,
            keepRecords: configuration.keepRecordsInMemory,
            recordFile: configuration.recordFile
        )
        let core = APNsSimulatorCore(configuration: configuration, ledger: ledger)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(configuration.certificatePEM.utf8))
                .map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuration.privateKeyPEM.utf8), format: .pem))
        )
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if let clientCAPEM = configuration.clientCAPEM {
            // Certificate mode: the handshake itself refuses a client without a certificate from this CA.
            tls.certificateVerification = .noHostnameVerification
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(clientCAPEM.utf8)))
        }
        let sslContext = try NIOSSLContext(configuration: tls)

        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
        ]
        connectionConfiguration.maximumConnectionGlitches = 1 << 20
        connectionConfiguration.maximumRecentlyResetStreams = 4096
        var streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
        streamConfiguration.targetWindowSize = 1 << 20
        let faults = configuration.faults
        let limits = APNsConnectionContext.StreamLimits(
            full: configuration.maxConcurrentStreams,
            beforeAuthentication: configuration.clientCAPEM == nil ? configuration.streamsBeforeAuthentication : nil,
            afterRejection: configuration.streamsAfterRejection
        )
        let connectionSettings = connectionConfiguration
        let streamSettings = streamConfiguration
        let registry = connections

        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        let logger = self.logger
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let id = ledger.connectionOpened()
                    let context = APNsConnectionContext(id: id, ledger: ledger, faults: faults, limits: limits)
                    context.bind(channel)
                    registry.withLockedValue { $0[id] = context }
                    channel.closeFuture.whenComplete { _ in
                        registry.withLockedValue { _ = $0.removeValue(forKey: id) }
                        ledger.updateCounters { $0.openConnections -= 1 }
                    }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    // The first SETTINGS carries the connection's starting limit (1 until authenticated, with token auth).
                    var settings = connectionSettings
                    settings.initialSettings = settings.initialSettings.map {
                        $0.parameter == .maxConcurrentStreams ? HTTP2Setting(parameter: .maxConcurrentStreams, value: limits.initial) : $0
                    }
                    _ = try sync.configureHTTP2Pipeline(
                        mode: .server,
                        connectionConfiguration: settings,
                        streamConfiguration: streamSettings,
                        streamDelegate: context
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(
                                APNsStreamHandler(core: core, connection: context)
                            )
                        }
                    }
                    try sync.addHandler(APNsConnectionErrorHandler(ledger: ledger, logger: logger))
                }
            }
        let (channel, port) = try await ListeningSocket.bind(bootstrap, host: configuration.host, port: configuration.port, group: group)
        let started = lifecycle.withLockedValue { state -> Bool in
            guard case .idle = state else { return false }
            state = .running(group: group, channel: channel, port: port)
            return true
        }
        guard started else {
            try? await channel.close()
            try? await group.shutdownGracefully()
            throw LifecycleError(description: "simulator already started")
        }
        ledgerBox.withLockedValue { $0 = ledger }
        logger.info("APNs simulator listening", metadata: ["port": "\(port)"])
        return port
    }

    /// Stops listening, closes every connection and flushes the record file.
    public func stop() async throws {
        let previous = lifecycle.withLockedValue { state -> Lifecycle in
            defer { state = .stopped }
            return state
        }
        guard case .running(let group, let channel, _) = previous else { return }
        try? await channel.close()
        try await group.shutdownGracefully()
        ledgerBox.withLockedValue { $0 }?.close()
    }

    /// Every accepted notification so far (a snapshot).
    public func accepted() -> [APNsRecord] {
        ledgerBox.withLockedValue { $0 }?.records() ?? []
    }

    /// Every error answer so far, when records are kept in memory (a snapshot; the counters count them either way).
    public func rejections() -> [APNsRejection] {
        ledgerBox.withLockedValue { $0 }?.rejections() ?? []
    }

    /// Live counters (a snapshot).
    public func counters() -> APNsSimulatorCounters {
        ledgerBox.withLockedValue { $0 }?.counters() ?? APNsSimulatorCounters()
    }

    /// Flushes buffered JSONL records to the record file.
    public func flushRecords() {
        ledgerBox.withLockedValue { $0 }?.flush()
    }

    /// Makes every connection open now go silent: still connected, but nothing is read or answered (a path that
    /// died without a FIN). Connections opened later are served normally.
    public func silenceOpenConnections() async {
        for context in connections.withLockedValue({ Array($0.values) }) {
            await context.stopReading()
        }
    }

    /// Starts `maxConcurrentStreamsObserved` again from the streams open now (to measure after a change).
    public func resetStreamHighWater() {
        ledgerBox.withLockedValue { $0 }?.updateCounters { $0.maxConcurrentStreamsObserved = 0 }
    }

    /// Sends SETTINGS with a new `MAX_CONCURRENT_STREAMS` on every open connection (a mid-run decrease).
    /// - Parameter value: The new limit.
    public func announceMaxConcurrentStreams(_ value: Int) {
        for context in connections.withLockedValue({ Array($0.values) }) {
            context.sendSettings(maxConcurrentStreams: value)
        }
    }
}
