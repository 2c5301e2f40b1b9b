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

    /// Connects, reads until the service closes, and decodes; any problem with the stream throws, even after
    /// complete tuples (which are then lost: prefer ``read()`` where they can be applied).
    /// - Returns: The tuples, in the order sent.
    /// - Throws: ``LegacyAPNSFeedbackError``.
    public func fetch() async throws -> [LegacyAPNSFeedbackTuple] {
        let read = try await read()
        if let problem = read.problem { throw problem }
        return read.tuples
    }

    /// Connects, reads until the service closes (or the timeout, or a failure), and decodes. The complete tuples
    /// received are returned even when the stream then ends badly: the service has already emptied its list.
    /// - Returns: The complete tuples and how the stream ended (``LegacyAPNSFeedbackRead/problem``: a cut inside a
    ///   tuple, the timeout, or a TLS or connection failure after connecting).
    /// - Throws: ``LegacyAPNSFeedbackError/connectFailed(_:)`` when no connection was made.
    public func read() async throws -> LegacyAPNSFeedbackRead {
        let eventLoop = group.next()
        let done = eventLoop.makePromise(of: Ending.self)
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
            let failure = LegacyAPNSFeedbackError.connectFailed(Self.describe(error))
            done.fail(failure)
            throw failure
        }
        let timer = eventLoop.scheduleTask(in: timeout) {
            // On the channel's event loop: the collector learns why the connection closes before it does.
            (try? channel.pipeline.syncOperations.handler(type: Collector.self))?.timeUp()
            channel.close(promise: nil)
        }
        defer { timer.cancel() }
        let ending = try await done.futureResult.get()
        var bytes = ending.bytes
        let tuples = LegacyAPNSFeedbackTuple.decodeAll(from: &bytes)
        let problem: LegacyAPNSFeedbackError?
        if ending.timedOut {
            problem = .timedOut(completeTuples: tuples.count)
        } else if let failure = ending.failure {
            problem = .connectFailed(failure)
        } else if bytes.readableBytes > 0 {
            problem = .truncated(completeTuples: tuples.count)
        } else {
            problem = nil
        }
        return LegacyAPNSFeedbackRead(tuples: tuples, problem: problem)
    }

    /// A connect, TLS or proxy error in the words the gateway's connections use: a refused certificate says which
    /// side refused it and what to check (``TLSCertificateRejection``), anything else as ``NetworkErrorText`` puts it.
    static func describe(_ error: any Error) -> String {
        TLSCertificateRejection.reason(for: error) ?? NetworkErrorText.describe(error)
    }

    /// How the connection ended: everything received, and the failure or timeout that ended it, if any.
    struct Ending: Sendable {
        var bytes: ByteBuffer
        var failure: String?
        var timedOut: Bool
    }

    /// Accumulates everything the service sends; completes at close, with the bytes received whatever ended it.
    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let done: EventLoopPromise<Ending>
        private var received: ByteBuffer?
        private var failure: (any Error)?
        private var timedOut = false

        init(done: EventLoopPromise<Ending>) {
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

        /// The read's time is up (called on the channel's event loop, just before the channel is closed).
        func timeUp() {
            if failure == nil { timedOut = true }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // A service that closes TCP without TLS close_notify has still sent everything it had.
            if let ssl = error as? NIOSSLError, case .uncleanShutdown = ssl { return }
            if failure == nil, !timedOut { failure = error }
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            done.succeed(
                Ending(
                    bytes: received ?? context.channel.allocator.buffer(capacity: 0),
                    failure: failure.map(LegacyAPNSFeedbackClient.describe),
                    timedOut: timedOut))
            context.fireChannelInactive()
        }
    }
}
