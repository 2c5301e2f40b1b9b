import BugleCore
import NIOCore
import NIOTLS

/// First handler on a connection made through an HTTP proxy (behind the proxy's own TLS for an `https://` proxy):
/// once the connection to the proxy is up it asks for a tunnel
/// (`CONNECT host:port HTTP/1.1`, with `Proxy-Authorization` when the proxy has credentials), reads the proxy's answer,
/// and only on a 2xx lets the handlers behind it see the channel become active, so TLS to the provider starts inside
/// the tunnel. It then removes itself. Any other answer, a close, or no answer within `timeout` fails the connection
/// with an ``HTTPProxyError``.
final class HTTPConnectTunnelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The largest proxy answer head read.
    static let maximumResponseHead = 16 * 1024

    private enum State {
        case connecting
        case awaitingAnswer(ByteBuffer)
        case established
        case failed
    }

    private let proxy: HTTPProxy
    private let target: String
    private let timeout: TimeAmount
    private var state = State.connecting
    private let gate = TunnelGate()

    /// - Parameters:
    ///   - proxy: The proxy (its authorization, if any, is sent).
    ///   - host: The provider's host.
    ///   - port: The provider's port.
    ///   - timeout: How long the proxy has to answer.
    init(proxy: HTTPProxy, host: String, port: Int, timeout: TimeAmount) {
        self.proxy = proxy
        self.target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        self.timeout = timeout
    }

    func channelActive(context: ChannelHandlerContext) {
        // A User-Agent as curl sends one: some proxies' policies refuse requests without it.
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\nUser-Agent: bugle\r\n"
        if let authorization = proxy.authorization { request += "Proxy-Authorization: \(authorization)\r\n" }
        request += "\r\n"
        state = .awaitingAnswer(context.channel.allocator.buffer(capacity: 256))
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        gate.timer = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = loopBound.value
            handler.fail(context: context, .noAnswer(milliseconds: handler.timeout.nanoseconds / 1_000_000))
        }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .awaitingAnswer(var buffer) = state else {
            context.fireChannelRead(data)
            return
        }
        var bytes = unwrapInboundIn(data)
        buffer.writeBuffer(&bytes)
        state = .awaitingAnswer(buffer)
        let view = buffer.readableBytesView
        if !proxy.tls, view.count >= 2, view.first == 0x15 || view.first == 0x16, view[view.startIndex + 1] == 0x03 {
            // A TLS record (an alert or a handshake) where an HTTP status line belongs: an https:// proxy.
            fail(context: context, .tls(reason: "it answered in TLS (an https:// proxy?): write its URL as https://", configuration: true))
            return
        }
        guard let end = Self.headEnd(view) else {
            if buffer.readableBytes > Self.maximumResponseHead { fail(context: context, .malformedAnswer) }
            return
        }
        guard let status = Self.status(of: view[view.startIndex..<end]) else {
            fail(context: context, .malformedAnswer)
            return
        }
        guard (200..<300).contains(status.code) else {
            fail(context: context, .refused(status: status.code, reason: status.reason))
            return
        }
        state = .established
        buffer.moveReaderIndex(forwardBy: end - view.startIndex + 4)
        gate.open(context: context, rest: buffer)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        gate.write(context: context, data: data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        gate.flush(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // An https:// proxy's own handshake is not the provider's: the handlers behind take a completed handshake to
        // mean the connection is ready, and must see only the one inside the tunnel.
        if event is TLSUserEvent, !isEstablished { return }
        context.fireUserInboundEventTriggered(event)
    }

    private var isEstablished: Bool {
        if case .established = state { return true }
        return false
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Before the tunnel is up, TLS errors are the https:// proxy's own handshake (TLS to the provider starts only
        // after the tunnel): say so, instead of letting them read as the provider's certificate.
        switch state {
        case .established:
            context.fireErrorCaught(error)
        case .failed:
            if HTTPProxyTLS.failure(error) == nil { context.fireErrorCaught(error) }
        case .connecting, .awaitingAnswer:
            guard proxy.tls, let kind = HTTPProxyTLS.failure(error) else {
                context.fireErrorCaught(error)
                return
            }
            fail(context: context, kind)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .awaitingAnswer = state { fail(context: context, .closed) }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        gate.discard()
    }

    private func fail(context: ChannelHandlerContext, _ kind: HTTPProxyError.Kind) {
        state = .failed
        gate.fail(context: context, HTTPProxyError(proxy: proxy.description, target: target, kind: kind))
    }

    /// Where the head ends (the index of its blank line's `\r\n\r\n`), if it has.
    private static func headEnd(_ view: ByteBufferView) -> Int? {
        var index = view.startIndex
        while index + 4 <= view.endIndex {
            if view[index] == 13, view[index + 1] == 10, view[index + 2] == 13, view[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// `HTTP/1.x NNN reason` → the code and the reason (printable ASCII, at most 64 characters).
    private static func status(of head: ByteBufferView.SubSequence) -> (code: Int, reason: String)? {
        let text = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
        let parts = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let code = Int(parts[1]) else { return nil }
        let reason = parts.count > 2 ? String(parts[2].filter { $0.isASCII && ($0.asciiValue ?? 0) >= 0x20 && $0 != "\u{7F}" }.prefix(64)) : ""
        return (code, reason)
    }
}
