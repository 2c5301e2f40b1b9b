import BugleCore
import BugleHTTP2
import NIOCore
import NIOPosix
import NIOSSL

/// Reads the legacy feedback service: connect over TLS with the provider's client certificate, read every
/// byte until the service closes, decode the tuples (PROTOCOLS.md §3.4). Nothing is sent to the service.
public struct LegacyAPNSFeedbackClient: Sendable {
    private let host: String
    private let port: Int
    private let sslContext: NIOSSLContext
    private let tunnel: ProxyTunnel?
    private let group: any EventLoopGroup
    private let timeout: TimeAmount

    /// Creates a client (usually through ``LegacyAPNSProvider/feedbackClient(timeout:)``).
    /// - Parameters:
    ///   - host: Feedback host.
    ///   - port: Feedback port.
    ///   - sslContext: Client TLS context presenting the provider certificate.
    ///   - tunnel: The proxy to tunnel through (nil: connect directly).
    ///   - group: Event loops.
    ///   - timeout: Longest time for connecting and reading.
    public init(host: String, port: Int, sslContext: NIOSSLContext, tunnel: ProxyTunnel? = nil, group: any EventLoopGroup, timeout: TimeAmount) {
        self.host = host
        self.port = port
        self.sslContext = sslContext
        self.tunnel = tunnel
        self.group = group
        self.timeout = timeout
    }

    /// Connects, reads until the service closes, and decodes.
    /// - Returns: The tuples, in the order sent.
    /// - Throws: ``LegacyAPNSFeedbackError``.
    public func fetch() async throws -> [LegacyAPNSFeedbackTuple] {
        let eventLoop = group.next()
        let done = eventLoop.makePromise(of: ByteBuffer.self)
        let sslContext = self.sslContext
        let serverHostname = LegacyAPNSClientTLS.serverHostname(for: host)
        let (host, port, tunnel, timeout) = (self.host, self.port, self.tunnel, self.timeout)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try tunnel?.addHandlers(to: sync, host: host, port: port, timeout: timeout)
                        try sync.addHandler(TLSClientHandlers.make(context: sslContext, serverHostname: serverHostname))
                        try sync.addHandler(Collector(done: done))
                    }
                }
                .connect(host: host, port: port, through: tunnel)
                .get()
        } catch {
            done.fail(LegacyAPNSFeedbackError.connectFailed(NetworkErrorText.describe(error)))
            throw LegacyAPNSFeedbackError.connectFailed(NetworkErrorText.describe(error))
        }
        let timer = eventLoop.scheduleTask(in: timeout) {
            done.fail(LegacyAPNSFeedbackError.timedOut)
            channel.close(promise: nil)
        }
        defer { timer.cancel() }
        var bytes = try await done.futureResult.get()
        let tuples = LegacyAPNSFeedbackTuple.decodeAll(from: &bytes)
        guard bytes.readableBytes == 0 else { throw LegacyAPNSFeedbackError.truncated(completeTuples: tuples.count) }
        return tuples
    }

    /// Accumulates everything the service sends; completes at close (or fails on a real error).
    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let done: EventLoopPromise<ByteBuffer>
        private var received: ByteBuffer?
        private var failure: (any Error)?

        init(done: EventLoopPromise<ByteBuffer>) {
            self.done = done
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var chunk = unwrapInboundIn(data)
            if received == nil {
                received = chunk
            } else {
                received?.writeBuffer(&chunk)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // A service that closes TCP without TLS close_notify has still sent everything it had.
            if let ssl = error as? NIOSSLError, case .uncleanShutdown = ssl { return }
            if failure == nil { failure = error }
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            if let failure {
                done.fail(LegacyAPNSFeedbackError.connectFailed(NetworkErrorText.describe(failure)))
            } else {
                done.succeed(received ?? context.channel.allocator.buffer(capacity: 0))
            }
            context.fireChannelInactive()
        }
    }
}
