import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// An HTTP proxy on 127.0.0.1 that serves `CONNECT host:port` as squid or tinyproxy do: it reads the request head,
/// checks `Proxy-Authorization` when it requires credentials (407 otherwise), opens TCP to the target (502 when it
/// cannot), answers `200 Connection established` and then copies bytes both ways. It records every request it was
/// sent, so tests see which tunnels Bugle asked for and with which credentials. Given a TLS context it is an
/// `https://` proxy: TLS first, then the `CONNECT` inside it.
final class ConnectProxy: Sendable {
    /// One `CONNECT` the proxy was sent.
    struct Request: Sendable, Equatable {
        var target: String
        var authorization: String?
        var status: Int
        /// The request's `Host` header (RFC 9110 asks for the target's authority) and `User-Agent`.
        var host: String? = nil
        var userAgent: String? = nil
    }

    fileprivate struct State {
        var requests: [Request] = []
        var channels: [any Channel] = []
        var bytesRelayed = 0
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

    /// Starts a proxy.
    /// - Parameters:
    ///   - requiredAuthorization: The exact `Proxy-Authorization` value it wants (nil: none asked for).
    ///   - refuseWith: A status every `CONNECT` is answered with instead of a tunnel (for example 403).
    ///   - tls: The server side of TLS to the proxy itself (nil: a plain `http://` proxy).
    ///   - refusalDelay: How long it takes to refuse credentials (squid asks a helper program first), so a client
    ///     that took the connection for ready too early writes requests into it meanwhile.
    ///   - refusalDelays: The delay of the first, second, … `CONNECT` when they differ (later ones take
    ///     `refusalDelay`).
    static func start(
        requiredAuthorization: String? = nil, refuseWith: Int? = nil, tls: NIOSSLContext? = nil, refusalDelay: TimeAmount = .zero,
        refusalDelays: [TimeAmount] = []
    ) async throws -> ConnectProxy {
        let state = NIOLockedValueBox(State())
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                state.withLockedValue { $0.channels.append(channel) }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    if let tls { try sync.addHandler(NIOSSLServerHandler(context: tls)) }
                    try sync.addHandler(
                        ConnectRequestHandler(
                            requiredAuthorization: requiredAuthorization, refuseWith: refuseWith, refusalDelays: (refusalDelays, refusalDelay), state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = listener.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        return ConnectProxy(port: port, listener: listener, state: state)
    }

    /// Every `CONNECT` so far, in arrival order.
    var requests: [Request] { state.withLockedValue { $0.requests } }

    /// Bytes copied through tunnels, both ways.
    var bytesRelayed: Int { state.withLockedValue { $0.bytesRelayed } }

    /// Closes the listener and every connection.
    func stop() async {
        let channels = state.withLockedValue { $0.channels }
        for channel in channels { try? await channel.close() }
        try? await listener.close()
    }

    fileprivate static func record(_ state: NIOLockedValueBox<State>, _ request: Request) {
        state.withLockedValue { $0.requests.append(request) }
    }

    fileprivate static func register(_ state: NIOLockedValueBox<State>, _ channel: any Channel) {
        state.withLockedValue { $0.channels.append(channel) }
    }

    /// Reads one `CONNECT` head and answers it; on success turns the connection into a tunnel.
    private final class ConnectRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let requiredAuthorization: String?
        private let refuseWith: Int?
        private let refusalDelays: (each: [TimeAmount], otherwise: TimeAmount)
        private let state: NIOLockedValueBox<State>
        private var head = ByteBuffer()
        private var done = false

        init(requiredAuthorization: String?, refuseWith: Int?, refusalDelays: (each: [TimeAmount], otherwise: TimeAmount), state: NIOLockedValueBox<State>) {
            self.requiredAuthorization = requiredAuthorization
            self.refuseWith = refuseWith
            self.refusalDelays = refusalDelays
            self.state = state
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            guard !done else { return }
            head.writeBuffer(&bytes)
            let text = String(decoding: head.readableBytesView, as: UTF8.self)
            guard let end = text.range(of: "\r\n\r\n") else { return }
            done = true
            let lines = text[..<end.lowerBound].components(separatedBy: "\r\n")
            let parts = lines.first?.split(separator: " ") ?? []
            guard parts.count == 3, parts[0] == "CONNECT", parts[2] == "HTTP/1.1" else {
                answer(context: context, 400, "Bad Request")
                return
            }
            let target = String(parts[1])
            func header(_ name: String) -> String? {
                lines.dropFirst()
                    .first { $0.lowercased().hasPrefix(name + ":") }
                    .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
            }
            let authorization = header("proxy-authorization")
            let (host, userAgent) = (header("host"), header("user-agent"))
            if let refuseWith {
                ConnectProxy.record(state, Request(target: target, authorization: authorization, status: refuseWith, host: host, userAgent: userAgent))
                answer(context: context, refuseWith, "Forbidden")
                return
            }
            if let requiredAuthorization, authorization != requiredAuthorization {
                ConnectProxy.record(state, Request(target: target, authorization: authorization, status: 407, host: host, userAgent: userAgent))
                let index = state.withLockedValue { $0.requests.count } - 1
                let delay = index < refusalDelays.each.count ? refusalDelays.each[index] : refusalDelays.otherwise
                let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: delay) {
                    let (handler, context) = loopBound.value
                    handler.answer(context: context, 407, "Proxy Authentication Required", extra: "Proxy-Authenticate: Basic realm=\"bugle-test\"\r\n")
                }
                return
            }
            guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]) else {
                answer(context: context, 400, "Bad Request")
                return
            }
            var targetHost = String(target[..<colon])
            if targetHost.hasPrefix("["), targetHost.hasSuffix("]") { targetHost = String(targetHost.dropFirst().dropLast()) }
            let inbound = context.channel
            let state = self.state
            let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            inbound.setOption(.autoRead, value: false).whenComplete { _ in }
            ClientBootstrap(group: inbound.eventLoop)
                .connect(host: targetHost, port: port)
                .whenComplete { result in
                    let (handler, context) = loopBound.value
                    switch result {
                    case .failure:
                        ConnectProxy.record(state, Request(target: target, authorization: authorization, status: 502, host: host, userAgent: userAgent))
                        handler.answer(context: context, 502, "Bad Gateway")
                    case .success(let outbound):
                        ConnectProxy.register(state, outbound)
                        ConnectProxy.record(state, Request(target: target, authorization: authorization, status: 200, host: host, userAgent: userAgent))
                        do {
                            try outbound.pipeline.syncOperations.addHandler(TunnelRelay(partner: inbound, state: state))
                        } catch {
                            context.close(promise: nil)
                            return
                        }
                        context.writeAndFlush(
                            handler.wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n\r\n")), promise: nil)
                        context.pipeline.syncOperations.removeHandler(handler, promise: nil)
                        try? context.pipeline.syncOperations.addHandler(TunnelRelay(partner: outbound, state: state))
                        inbound.setOption(.autoRead, value: true).whenComplete { _ in }
                    }
                }
        }

        private func answer(context: ChannelHandlerContext, _ status: Int, _ reason: String, extra: String = "") {
            let response = "HTTP/1.1 \(status) \(reason)\r\n\(extra)Content-Length: 0\r\nConnection: close\r\n\r\n"
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: response))).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }

    /// Copies what one side of a tunnel reads to the other, and closes the other when its side closes.
    private final class TunnelRelay: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let partner: any Channel
        private let state: NIOLockedValueBox<State>

        init(partner: any Channel, state: NIOLockedValueBox<State>) {
            self.partner = partner
            self.state = state
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            state.withLockedValue { $0.bytesRelayed += bytes.readableBytes }
            partner.writeAndFlush(bytes, promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            partner.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
