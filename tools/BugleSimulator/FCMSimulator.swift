import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A local FCM HTTP v1 service with its OAuth2 token endpoint (TLS 1.2+, ALPN `h2` and `http/1.1`):
/// `POST /token` grants stateless access tokens for RS256 service-account assertions, and
/// `POST /v1/projects/{id}/messages:send` checks the bearer token, project, quota and message exactly as
/// `PROTOCOLS.md` §2/§4.2 describe, answers in Google's error model, scripts outcomes by token prefix
/// (``FCMTokenScript``), injects faults and records every delivered message.
/// See `tools/BugleSimulator/README.md`.
///
/// ```swift
/// let certs = try SimulatorCertificates.generate(in: dir, port: 0)
/// let sim = FCMSimulator(configuration: .init(certificates: certs))
/// let port = try await sim.start()
/// try certs.writeServiceAccount(fcmPort: port)          // token_uri → https://127.0.0.1:<port>/token
/// // ... send ...
/// let records = sim.accepted(); let counters = sim.counters()
/// try await sim.stop()
/// ```
public final class FCMSimulator: Sendable {
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

    private let configuration: FCMSimulatorConfiguration
    private let logger: Logger
    private let lifecycle = NIOLockedValueBox<Lifecycle>(.idle)
    private let ledgerBox = NIOLockedValueBox<FCMSimulatorLedger?>(nil)
    private let tokenOutage = FCMTokenOutage()

    /// Creates a simulator (not yet listening).
    /// - Parameters:
    ///   - configuration: What to serve and how to misbehave.
    ///   - logger: Logger for lifecycle events (requests, tokens and keys are never logged).
    public init(configuration: FCMSimulatorConfiguration, logger: Logger = Logger(label: "bugle.sim.fcm")) {
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
        let ledger = try FCMSimulatorLedger(
            seed: configuration.faults.seed,
            quota: FCMQuotaWindow(
                limit: configuration.quotaPerMinute,
                window: FCMSimulatorCore.seconds(configuration.quotaWindow)
            ),
            keepRecords: configuration.keepRecordsInMemory,
            recordFile: configuration.recordFile
        )
        tokenOutage.begin(now: configuration.wallClock(), lasting: FCMSimulatorCore.seconds(configuration.faults.tokenOutage))
        let core = FCMSimulatorCore(configuration: configuration, ledger: ledger, tokenOutage: tokenOutage)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(configuration.certificatePEM.utf8))
                .map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuration.privateKeyPEM.utf8), format: .pem))
        )
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2", "http/1.1"]
        let sslContext = try NIOSSLContext(configuration: tls)

        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16384),
            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
        ]
        connectionConfiguration.maximumConnectionGlitches = 1 << 20
        connectionConfiguration.maximumRecentlyResetStreams = 4096
        var streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
        streamConfiguration.targetWindowSize = 1 << 20
        let connectionSettings = connectionConfiguration
        let streamSettings = streamConfiguration

        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        let logger = self.logger
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let id = ledger.connectionOpened()
                channel.closeFuture.whenComplete { _ in
                    ledger.updateCounters { $0.openConnections -= 1 }
                }
                let connectionChannel = ObjectIdentifier(channel)
                do {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                return channel.configureCommonHTTPServerPipeline(
                    connectionConfiguration: connectionSettings,
                    streamConfiguration: streamSettings,
                    h2ConnectionChannelConfigurator: { connection in
                        ledger.updateCounters { $0.http2Connections += 1 }
                        return connection.eventLoop.makeCompletedFuture {
                            try connection.pipeline.syncOperations.addHandler(FCMConnectionErrorHandler(logger: logger))
                        }
                    },
                    configurator: { stream in
                        // HTTP/2 streams are child channels of the TCP connection; HTTP/1.1 runs on it directly. (Not
                        // `stream.parent != nil`: an accepted connection's parent is the listening socket, so that held
                        // for HTTP/1.1 too, and the observer below would have been handed TLS bytes.)
                        let isHTTP2 = ObjectIdentifier(stream) != connectionChannel
                        return stream.eventLoop.makeCompletedFuture {
                            if isHTTP2 {
                                // Ahead of NIOHTTP2's HTTP/1 codec, which drops RST_STREAM.
                                try stream.pipeline.syncOperations.addHandler(HTTP2StreamResetObserver(), position: .first)
                            }
                            try stream.pipeline.syncOperations.addHandler(
                                FCMHTTPHandler(core: core, connectionID: id, isHTTP2: isHTTP2)
                            )
                        }
                    }
                )
            }
        let (channel, port) = try await ListeningSocket.bind(bootstrap, host: configuration.host, port: configuration.port, group: group)
        core.bind(port: port)
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
        logger.info("FCM simulator listening", metadata: ["port": "\(port)"])
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

    /// Every message accepted for delivery so far (a snapshot; empty when `keepRecordsInMemory` is off).
    public func accepted() -> [FCMRecord] {
        ledgerBox.withLockedValue { $0 }?.records() ?? []
    }

    /// Every request that reached the send route so far, in arrival order, with its answer (a snapshot;
    /// empty when `keepRecordsInMemory` is off).
    public func requestTimes() -> [FCMRequestEntry] {
        ledgerBox.withLockedValue { $0 }?.requests() ?? []
    }

    /// Live counters (a snapshot).
    /// Ends the token endpoint's injected outage (``FCMSimulatorConfiguration/Faults/tokenOutage``): grants resume.
    public func endTokenOutage() {
        tokenOutage.end()
    }

    public func counters() -> FCMSimulatorCounters {
        ledgerBox.withLockedValue { $0 }?.counters() ?? FCMSimulatorCounters()
    }

    /// Flushes buffered JSONL records to the record file.
    public func flushRecords() {
        ledgerBox.withLockedValue { $0 }?.flush()
    }
}
