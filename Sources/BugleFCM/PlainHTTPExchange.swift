import BugleCore
import BugleHTTP2
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// One HTTP/1.1 request without a body on a connection of its own (`Connection: close`), for link-local metadata
/// services that speak nothing else: Google Cloud's metadata server, a federation `credential_source.url` such as
/// Azure's, and EC2's instance metadata (whose IMDSv2 session token is asked for with a `PUT`); and, over TLS when given
/// a context, an identity provider's `https://` token URL, through the section's proxy when given a tunnel (the
/// link-local services never are: Google's server refuses proxied requests). Token fetches come once an hour, so
/// nothing is pooled. The answer's body is capped at ``bodyLimit``.
enum PlainHTTPExchange {
    /// An answer: its status and body.
    struct Answer: Sendable {
        var status: Int
        var body: [UInt8]
    }

    /// Why no answer came.
    enum Failure: Error, CustomStringConvertible {
        /// The connection could not be opened (refused, unreachable, or not within the connect timeout).
        case connect(String)
        /// No whole answer within the deadline.
        case timedOut
        /// The server closed the connection before a whole answer.
        case closedEarly
        /// The body was longer than ``bodyLimit``.
        case tooLarge

        var description: String {
            switch self {
            case .connect(let why): return "cannot connect (\(why))"
            case .timedOut: return "no answer in time"
            case .closedEarly: return "the connection closed before a whole answer"
            case .tooLarge: return "an answer longer than \(PlainHTTPExchange.bodyLimit) bytes"
            }
        }
    }

    /// Longest body read: a token answer is a few hundred bytes.
    static let bodyLimit = 65_536

    /// Sends `method path` to `host:port` with `headers` (plus `Host`, `Connection: close`, and an empty body's
    /// `Content-Length` for a method other than `GET`) and reads the answer.
    /// - Parameters:
    ///   - timeout: Bounds the whole exchange, connecting included.
    ///   - group: Where the connection runs.
    ///   - tunnel: The proxy to go through, or nil to connect directly.
    /// - Throws: ``Failure``; ``BugleHTTP2/HTTPProxyError`` when the proxy did not open the tunnel.
    static func send(
        _ method: HTTPMethod = .GET, host: String, port: Int, path: String, headers: [(String, String)], timeout: TimeAmount,
        group: any EventLoopGroup, tls: NIOSSLContext? = nil, tunnel: ProxyTunnel? = nil
    ) async throws -> Answer {
        let promise = group.next().makePromise(of: Answer.self)
        let serverHostname = HTTP2ConnectionPool.serverHostname(host)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try tunnel?.addHandlers(to: channel.pipeline.syncOperations, host: host, port: port, timeout: timeout)
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(TLSClientHandlers.make(context: tls, serverHostname: serverHostname))
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(AnswerCollector(promise: promise))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host, port: port, through: tunnel).get()
        } catch {
            promise.fail(Failure.connect("\(error)"))
            throw Failure.connect("\(error)")
        }
        let deadline = channel.eventLoop.scheduleTask(in: timeout) {
            promise.fail(Failure.timedOut)
            channel.close(promise: nil)
        }
        let defaultPort = tls == nil ? 80 : 443
        var fields = HTTPHeaders([("Host", port == defaultPort ? host : "\(host):\(port)"), ("Connection", "close")])
        if method != .GET { fields.add(name: "Content-Length", value: "0") }
        fields.add(contentsOf: headers)
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: fields)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer {
            deadline.cancel()
            channel.close(promise: nil)
        }
        return try await promise.futureResult.get()
    }
}

/// Collects one HTTP/1.1 answer into a promise; a close or an error before its end fails it.
private final class AnswerCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<PlainHTTPExchange.Answer>
    private var status = 0
    private var body: [UInt8] = []

    init(promise: EventLoopPromise<PlainHTTPExchange.Answer>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
        case .body(let buffer):
            guard body.count + buffer.readableBytes <= PlainHTTPExchange.bodyLimit else {
                promise.fail(PlainHTTPExchange.Failure.tooLarge)
                context.close(promise: nil)
                return
            }
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            promise.succeed(PlainHTTPExchange.Answer(status: status, body: body))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(PlainHTTPExchange.Failure.closedEarly)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }
}
