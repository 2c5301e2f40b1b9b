import BugleHTTP2
import NIOCore
import NIOTLS

/// The last handler of a gateway connection's pipeline (after TLS and the error-response decoder): reports
/// the connection's events to its slot. All callbacks run on the channel's event loop, which is the slot's.
final class LegacyAPNSConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = LegacyAPNSErrorResponse

    /// A connection refused in a way no reconnect fixes, described without secrets.
    struct Refusal: Equatable {
        /// `TLSCertificateRejected` or `ProxyRefused`, the halt's code.
        var code: String
        var reason: String
    }

    /// What the slot is told.
    struct Events {
        /// The TLS handshake completed: the connection may carry notifications.
        var ready: (any Channel) -> Void
        /// The gateway answered an error response (it closes the connection next).
        var errorResponse: (LegacyAPNSErrorResponse) -> Void
        /// A transport or TLS error (described without secrets); the connection is being closed.
        var failed: (String) -> Void
        /// The handshake failed on a certificate (the gateway's, or Bugle's refused by it), or the proxy refused the
        /// tunnel for its configuration (``BugleHTTP2/HTTPProxyError/isConfiguration``): reconnecting cannot help.
        /// The connection is being closed.
        var refused: (Refusal) -> Void
        /// The connection closed.
        var closed: () -> Void
    }

    private let events: Events

    init(events: Events) {
        self.events = events
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            events.ready(context.channel)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        events.errorResponse(unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let reason = TLSCertificateRejection.reason(for: error) {
            events.refused(Refusal(code: "TLSCertificateRejected", reason: reason))
        } else if let proxyError = error as? HTTPProxyError, proxyError.isConfiguration {
            events.refused(Refusal(code: "ProxyRefused", reason: proxyError.description))
        } else {
            events.failed(NetworkErrorText.describe(error))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        events.closed()
        context.fireChannelInactive()
    }
}
