import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP proxy on 127.0.0.1 in front of a server on a Unix socket, whose path can go dark: while it is a black hole it
/// keeps every connection open (and accepts new ones) but moves no bytes either way, so each call through it hangs as
/// over a dead network path. When the path comes back, bytes held meanwhile flow on, as TCP would deliver them.
final class BlackholeProxy: Sendable {
    private struct State {
        var dark = false
        var channels: [any Channel] = []
    }

    /// The port clients connect to.
    let port: Int
    private let listener: any Channel
    private let state: NIOLockedValueBox<State>

    private init(port: Int, listener: any Channel, state: NIOLockedValueBox<State>) {
        self.port = port
        self.listener = listener
        self.state = state
    }

    /// Starts a proxy to the Unix socket at `upstream`.
    static func start(upstream: String) async throws -> BlackholeProxy {
        let state = NIOLockedValueBox(State())
        let group = MultiThreadedEventLoopGroup.singleton
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                ClientBootstrap(group: inbound.eventLoop)
                    .channelOption(.autoRead, value: false)
                    .connect(unixDomainSocketPath: upstream)
                    .flatMap { outbound in
                        let pipes = inbound.pipeline.addHandler(Relay(partner: outbound))
                            .and(outbound.pipeline.addHandler(Relay(partner: inbound)))
                        return pipes.map { _ in
                            // Registered and switched on under the lock, so a toggle never misses a new pair.
                            state.withLockedValue { state in
                                state.channels += [inbound, outbound]
                                if !state.dark {
                                    inbound.setOption(.autoRead, value: true).whenComplete { _ in }
                                    outbound.setOption(.autoRead, value: true).whenComplete { _ in }
                                }
                            }
                        }
                    }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = listener.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        return BlackholeProxy(port: port, listener: listener, state: state)
    }

    /// Turns the black hole on (nothing moves) or off (everything held moves on).
    func setDark(_ dark: Bool) {
        state.withLockedValue { state in
            state.dark = dark
            for channel in state.channels where channel.isActive {
                channel.setOption(.autoRead, value: !dark).whenComplete { _ in }
            }
        }
    }

    /// Closes the listener and every proxied connection.
    func stop() async {
        let channels = state.withLockedValue { $0.channels }
        for channel in channels { try? await channel.close() }
        try? await listener.close()
    }
}

/// Copies what one side reads to its partner, and closes the partner when its side closes.
private final class Relay: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let partner: any Channel

    init(partner: any Channel) {
        self.partner = partner
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        partner.writeAndFlush(unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
