import NIOCore
import NIOTLS

/// Sits after ``HTTP2ClientSession`` on a client connection and reports connection-level events to the pool:
/// TLS handshake done (ready), the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (including decreases),
/// GOAWAY, and errors. It also checks the connection's health: once ready it sends a PING every
/// `keepalive.interval`, and closes the connection (the pool then reconnects) when a PING goes unanswered
/// for `keepalive.timeout` — a peer that vanished without a FIN is found before requests are lost on it.
final class HTTP2ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2ConnectionSignal
    typealias OutboundOut = HTTP2PingRequest

    /// PING health checks.
    struct Keepalive: Sendable {
        var interval: TimeAmount
        var timeout: TimeAmount
    }

    /// Callbacks into the pool (all invoked on the connection's event loop).
    struct Events: Sendable {
        var ready: @Sendable () -> Void
        var maxConcurrentStreams: @Sendable (Int) -> Void
        var goAway: @Sendable (_ lastStreamID: Int, _ code: UInt32, _ debugData: String) -> Void
        /// The connection answered its first request.
        var answered: @Sendable () -> Void
        var failed: @Sendable (String) -> Void
        /// The connection closed with this many requests written and unanswered (after ``failed``, when a handler
        /// said why).
        var closedUnanswered: @Sendable (Int) -> Void
        /// The connection was refused in a way reconnecting cannot fix: a certificate in the TLS handshake (see
        /// ``TLSCertificateRejection``), or the HTTP proxy's tunnel (see ``HTTPProxyError/isConfiguration``). The error
        /// is ``HTTP2TransportError/certificateRejected(_:)`` or ``HTTP2TransportError/proxyRefused(_:)``.
        var rejected: @Sendable (HTTP2TransportError) -> Void
    }

    private let events: Events
    private let keepalive: Keepalive?
    private var isReady = false
    private var pings: RepeatedTask?
    private var unanswered: (data: UInt64, timeout: Scheduled<Void>)?
    private var pingCounter: UInt64 = 0

    init(events: Events, keepalive: Keepalive?) {
        self.events = events
        self.keepalive = keepalive
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopPings()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopPings()
        context.fireChannelInactive()
    }

    private func startPings(context: ChannelHandlerContext) {
        guard let keepalive, pings == nil else { return }
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        pings = context.eventLoop.scheduleRepeatedTask(initialDelay: keepalive.interval, delay: keepalive.interval) { _ in
            loopBound.value.handler.ping(context: loopBound.value.context, timeout: keepalive.timeout)
        }
    }

    private func ping(context: ChannelHandlerContext, timeout: TimeAmount) {
        guard unanswered == nil, context.channel.isActive else { return }
        pingCounter &+= 1
        let data = pingCounter
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        let scheduled = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = loopBound.value
            handler.unanswered = nil
            handler.events.failed("no answer to an HTTP/2 PING within \(timeout.nanoseconds / 1_000_000) ms")
            context.close(promise: nil)
        }
        unanswered = (data, scheduled)
        context.writeAndFlush(wrapOutboundOut(HTTP2PingRequest(data: data)), promise: nil)
    }

    private func stopPings() {
        pings?.cancel()
        pings = nil
        unanswered?.timeout.cancel()
        unanswered = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = tls {
            if let negotiated, negotiated != "h2" {
                events.failed("server negotiated \(negotiated) instead of h2")
                context.close(promise: nil)
            } else {
                isReady = true
                events.ready()
                startPings(context: context)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .maxConcurrentStreams(let value):
            events.maxConcurrentStreams(value)
        case .goAway(let lastStreamID, let code, let debugData):
            events.goAway(lastStreamID, code, debugData)
        case .answered:
            events.answered()
        case .closedUnanswered(let count):
            events.closedUnanswered(count)
        case .pingAnswered(let data):
            if let pending = unanswered, pending.data == data {
                pending.timeout.cancel()
                unanswered = nil
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Error text comes from NIO, BoringSSL or the session (no tokens or JWTs are part of it).
        if let reason = TLSCertificateRejection.reason(for: error) {
            events.rejected(.certificateRejected(reason))
        } else if let proxyError = error as? HTTPProxyError, proxyError.isConfiguration {
            events.rejected(.proxyRefused(proxyError.description))
        } else {
            events.failed(NetworkErrorText.describe(error))
        }
        context.close(promise: nil)
    }
}
