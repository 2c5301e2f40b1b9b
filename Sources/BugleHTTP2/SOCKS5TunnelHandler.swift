import BugleCore
import NIOCore

/// First handler on a connection made through a SOCKS5 proxy (RFC 1928): once the connection to the proxy is up it
/// offers "no authentication" (and, with credentials, "username/password", RFC 1929, sending them when the proxy
/// picks it), asks the proxy to connect to the provider by name (address type 3: the proxy resolves it, as `socks5h`),
/// and only on success lets the handlers behind it see the channel become active, so TLS to the provider starts inside
/// the tunnel. It then removes itself. A refusal, a close, a malformed answer, or no answer within `timeout` fails the
/// connection with an ``HTTPProxyError``.
final class SOCKS5TunnelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case connecting
        /// Waiting for the method the proxy chose.
        case method
        /// Waiting for the username/password verdict.
        case authentication
        /// Waiting for the reply to `CONNECT`.
        case reply
        case established
        case failed
    }

    private let proxy: HTTPProxy
    private let host: String
    private let port: Int
    private let target: String
    private let timeout: TimeAmount
    private var state = State.connecting
    private var received: ByteBuffer?
    private let gate = TunnelGate()

    /// - Parameters:
    ///   - proxy: The SOCKS5 proxy (its credentials, if any, are offered).
    ///   - host: The provider's host, sent as a name.
    ///   - port: The provider's port.
    ///   - timeout: How long the proxy has for the whole exchange.
    init(proxy: HTTPProxy, host: String, port: Int, timeout: TimeAmount) {
        self.proxy = proxy
        self.host = host
        self.port = port
        self.target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        self.timeout = timeout
    }

    func channelActive(context: ChannelHandlerContext) {
        received = context.channel.allocator.buffer(capacity: 64)
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        gate.timer = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = loopBound.value
            handler.fail(context: context, .noAnswer(milliseconds: handler.timeout.nanoseconds / 1_000_000))
        }
        let methods: [UInt8] = proxy.socksCredentials == nil ? [0x00] : [0x00, 0x02]
        state = .method
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [0x05, UInt8(methods.count)] + methods)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        switch state {
        case .established, .failed, .connecting:
            context.fireChannelRead(data)
            return
        case .method, .authentication, .reply:
            received?.writeBuffer(&bytes)
        }
        advance(context: context)
    }

    /// Reads whatever whole answers have arrived, answering each in turn.
    private func advance(context: ChannelHandlerContext) {
        while var buffer = received {
            switch state {
            case .method:
                guard let answer = buffer.readBytes(length: 2) else { return }
                received = buffer
                chose(answer, context: context)
            case .authentication:
                guard let answer = buffer.readBytes(length: 2) else { return }
                received = buffer
                guard answer[1] == 0x00 else {
                    fail(context: context, .socks(reply: "rejected the user name and password", configuration: true))
                    return
                }
                sendConnect(context: context)
            case .reply:
                guard let length = Self.replyLength(buffer.readableBytesView) else { return }
                guard let reply = buffer.readBytes(length: length) else { return }
                received = buffer
                guard reply[0] == 0x05 else {
                    fail(context: context, .malformedAnswer)
                    return
                }
                guard reply[1] == 0x00 else {
                    let (reason, configuration) = Self.replyReason(reply[1])
                    fail(context: context, .socks(reply: "refused the connection: \(reason)", configuration: configuration))
                    return
                }
                established(context: context)
                return
            case .connecting, .established, .failed:
                return
            }
        }
    }

    /// The proxy's choice of method.
    private func chose(_ answer: [UInt8], context: ChannelHandlerContext) {
        guard answer[0] == 0x05 else {
            fail(context: context, .malformedAnswer)
            return
        }
        switch answer[1] {
        case 0x00:
            sendConnect(context: context)
        case 0x02 where proxy.socksCredentials != nil:
            let credentials = proxy.socksCredentials ?? ""
            let colon = credentials.firstIndex(of: ":") ?? credentials.endIndex
            let user = Array(credentials[..<colon].utf8)
            let password = colon < credentials.endIndex ? Array(credentials[credentials.index(after: colon)...].utf8) : []
            state = .authentication
            let request = [0x01, UInt8(user.count)] + user + [UInt8(password.count)] + password
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: request)), promise: nil)
        case 0xFF where proxy.socksCredentials == nil:
            fail(context: context, .socks(reply: "asks for credentials: set proxy_credentials_env (or user:password in the proxy URL)", configuration: true))
        case 0xFF:
            fail(context: context, .socks(reply: "accepts none of Bugle's methods (no authentication, username/password)", configuration: true))
        default:
            fail(context: context, .malformedAnswer)
        }
    }

    private func sendConnect(context: ChannelHandlerContext) {
        let name = Array(host.utf8.prefix(255))
        state = .reply
        let request = [0x05, 0x01, 0x00, 0x03, UInt8(name.count)] + name + [UInt8(port >> 8), UInt8(port & 0xFF)]
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: request)), promise: nil)
    }

    private func established(context: ChannelHandlerContext) {
        state = .established
        let rest = received
        received = nil
        gate.open(context: context, rest: rest)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        gate.write(context: context, data: data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        gate.flush(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .method, .authentication, .reply: fail(context: context, .closed)
        case .connecting, .established, .failed: break
        }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        gate.discard()
    }

    private func fail(context: ChannelHandlerContext, _ kind: HTTPProxyError.Kind) {
        state = .failed
        gate.fail(context: context, HTTPProxyError(proxy: proxy.description, target: target, kind: kind))
    }

    /// The length of a whole `CONNECT` reply at the start of `view`, once its address type is known.
    static func replyLength(_ view: ByteBufferView) -> Int? {
        guard view.count >= 5 else { return nil }
        switch view[view.startIndex + 3] {
        case 0x01: return 4 + 4 + 2
        case 0x04: return 4 + 16 + 2
        case 0x03: return 4 + 1 + Int(view[view.startIndex + 4]) + 2
        default: return 4 + 4 + 2
        }
    }

    /// RFC 1928's reply codes: what each means, and whether only a configuration change can help (the proxy's rules,
    /// an unsupported command or address type) rather than an outage of the path behind it.
    static func replyReason(_ code: UInt8) -> (String, configuration: Bool) {
        switch code {
        case 0x01: return ("general SOCKS server failure", false)
        case 0x02: return ("connection not allowed by ruleset", true)
        case 0x03: return ("network unreachable", false)
        case 0x04: return ("host unreachable", false)
        case 0x05: return ("connection refused", false)
        case 0x06: return ("TTL expired", false)
        case 0x07: return ("command not supported", true)
        case 0x08: return ("address type not supported", true)
        default: return ("reply \(code)", false)
        }
    }
}
