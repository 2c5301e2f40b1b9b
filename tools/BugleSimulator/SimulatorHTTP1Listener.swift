import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The listening socket and event loop of a plain simulator server speaking HTTP/1.1 (the metadata server, the
/// counters server): idle, then listening once ``start(host:port:tls:respond:)`` bound it, then stopped for good.
final class SimulatorHTTP1Listener: Sendable {
    private enum State {
        case idle
        case running(group: MultiThreadedEventLoopGroup, channel: any Channel)
        case stopped
    }

    private let state = NIOLockedValueBox<State>(.idle)
    /// The server's name in errors ("the counters server").
    private let name: String

    /// A listener not yet bound, for the server called `name` in errors.
    init(name: String) {
        self.name = name
    }

    /// Binds `host:port` on an event loop of its own and answers each request of each connection with `respond`
    /// (``SimulatorHTTP1Responder``), over TLS when `tls` is given, until ``stop()``.
    /// - Returns: The bound port.
    /// - Throws: The bind error, or ``APNsSimulator/LifecycleError`` when it was started before; either way nothing is
    ///   left listening.
    func start(
        host: String,
        port: Int,
        tls: NIOSSLContext? = nil,
        respond: @escaping @Sendable (HTTPRequestHead) -> SimulatorHTTP1Responder.Response
    ) async throws -> Int {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls { try sync.addHandler(NIOSSLServerHandler(context: tls)) }
                    try sync.configureHTTPServerPipeline()
                    try sync.addHandler(SimulatorHTTP1Responder(respond: respond))
                }
            }
        let (channel, bound) = try await ListeningSocket.bind(bootstrap, host: host, port: port, group: group)
        let started = state.withLockedValue { state -> Bool in
            guard case .idle = state else { return false }
            state = .running(group: group, channel: channel)
            return true
        }
        guard started else {
            try? await channel.close()
            try? await group.shutdownGracefully()
            throw APNsSimulator.LifecycleError(description: "\(name) was already started")
        }
        return bound
    }

    /// Closes the socket and shuts the event loop down (its connections with it); nothing when not running.
    func stop() async throws {
        let running = state.withLockedValue { state -> (MultiThreadedEventLoopGroup, any Channel)? in
            defer { state = .stopped }
            if case .running(let group, let channel) = state { return (group, channel) }
            return nil
        }
        guard let (group, channel) = running else { return }
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}
