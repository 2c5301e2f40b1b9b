import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import Synchronization

/// `--metrics-port`: bootstraps swift-metrics with a Prometheus registry and serves its text format at
/// `http://127.0.0.1:PORT/metrics` (loopback only) until stopped.
final class MetricsExporter: Sendable {
    /// Installs the Prometheus backend. Call before any lane is built: swift-metrics binds a metric to the
    /// backend in force when the metric is created. Idempotent.
    static func bootstrap() {
        _ = registry
    }

    /// The registry every `bugle` metric lands in (swift-metrics can be bootstrapped once per process).
    private static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }()

    let port: Int
    /// The listening channel, open until the process exits (nothing stops it earlier: see ``serve(port:logger:)``).
    private let channel: any Channel

    /// The endpoint this process serves, once started: one for the whole process, so it stays up while a worker waits
    /// out a database outage and sends again, and across the runs of one `bugle tick`.
    private static let serving = Mutex<MetricsExporter?>(nil)

    /// The process's endpoint: started on `port` the first time (before the command writes anything, so a port in use
    /// leaves nothing behind), the same one after. It closes when the process exits.
    /// - Throws: ``UsageError`` when the port cannot be bound.
    /// - Returns: The endpoint, and whether this call started it.
    static func serve(port: Int, logger: Logger) async throws -> (exporter: MetricsExporter, started: Bool) {
        if let running = serving.withLock({ $0 }) { return (running, false) }
        let started = try await start(port: port, logger: logger)
        serving.withLock { $0 = started }
        return (started, true)
    }

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
    }

    /// Starts serving.
    /// - Parameters:
    ///   - port: TCP port on 127.0.0.1 (0 = any).
    ///   - logger: Logger.
    /// - Returns: The running exporter.
    /// - Throws: Bind errors.
    private static func start(port: Int, logger: Logger) async throws -> MetricsExporter {
        let registry = Self.registry
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(registry: registry))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: port).get()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw UsageError("--metrics-port \(port): 127.0.0.1:\(port) is already in use; choose another port (0 picks a free one)")
        } catch {
            throw UsageError("--metrics-port \(port): cannot listen on 127.0.0.1:\(port): \(error)")
        }
        let bound = channel.localAddress?.port ?? port
        logger.info("metrics endpoint listening", metadata: ["port": "\(bound)"])
        return MetricsExporter(port: bound, channel: channel)
    }
}

/// Answers `GET /metrics` with the registry's Prometheus text; anything else is 404 (wrong method 405).
private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private var head: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
            let (status, body): (HTTPResponseStatus, [UInt8])
            if path != "/metrics" {
                (status, body) = (.notFound, Array("not found\n".utf8))
            } else if head.method != .GET {
                (status, body) = (.methodNotAllowed, Array("method not allowed\n".utf8))
            } else {
                (status, body) = (.ok, registry.emitToBuffer())
            }
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: status == .ok ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain")
            headers.add(name: "content-length", value: String(body.count))
            let keepAlive = head.isKeepAlive
            if !keepAlive { headers.add(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
            let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                done.whenComplete { _ in loopBound.value.close(promise: nil) }
            }
        }
    }
}
