import NIOCore
import NIOHTTP2
import NIOSSL
import NIOTLS

/// Sits after `NIOHTTP2Handler` on a client connection and reports connection-level events to the pool:
/// TLS handshake done (ready), the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (including decreases),
/// GOAWAY, and errors.
final class HTTP2ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    /// Callbacks into the pool (all invoked on the connection's event loop).
    struct Events: Sendable {
        var ready: @Sendable () -> Void
        var maxConcurrentStreams: @Sendable (Int) -> Void
        var goAway: @Sendable (_ lastStreamID: Int) -> Void
        var failed: @Sendable (String) -> Void
    }

    private let events: Events
    private var isReady = false

    init(events: Events) {
        self.events = events
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = tls {
            if let negotiated, negotiated != "h2" {
                events.failed("server negotiated \(negotiated) instead of h2")
                context.close(promise: nil)
            } else {
                isReady = true
                events.ready()
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                events.maxConcurrentStreams(setting.value)
            }
        case .goAway(let lastStreamID, _, _):
            events.goAway(Int(lastStreamID))
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Stream errors (one stream reset) must not take the connection's other streams down.
        if error is NIOHTTP2Errors.StreamError || error is NIOHTTP2Errors.StreamClosed {
            return
        }
        // Error text comes from NIO/BoringSSL (no tokens or JWTs are part of it).
        events.failed(String(describing: error))
        context.close(promise: nil)
    }
}
