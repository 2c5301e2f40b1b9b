import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// A minimal HTTPS test client for the FCM simulator: TLS trusting the simulator CA, ALPN `h2` (one
/// connection, one stream per request) or `http/1.1` (one connection per request). Test-only.
final class FCMTestClient: Sendable {
    /// The HTTP version to negotiate.
    enum Version: Sendable {
        case http2
        case http1
    }

    /// A complete response.
    struct Response: Sendable {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]

        /// The first header value named `name` (case-insensitive).
        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        /// The body as a JSON object (nil when it is not one).
        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        }

        /// `error.status` of a Google error body.
        var errorStatus: String? { (json?["error"] as? [String: Any])?["status"] as? String }

        /// `error.details` of a Google error body.
        var errorDetails: [[String: Any]] { ((json?["error"] as? [String: Any])?["details"] as? [[String: Any]]) ?? [] }

        /// The `errorCode` of the `FcmError` detail, if any.
        var fcmErrorCode: String? {
            errorDetails.first { ($0["@type"] as? String)?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?["errorCode"]
                as? String
        }

        /// The `@type` suffixes of the details, in order (`FcmError`, `BadRequest`, ...).
        var detailTypes: [String] {
            errorDetails.compactMap { ($0["@type"] as? String)?.split(separator: ".").last.map(String.init) }
        }

        /// The field paths of the BadRequest detail's violations.
        var violationFields: [String] {
            errorDetails.flatMap { detail -> [String] in
                ((detail["fieldViolations"] as? [[String: Any]]) ?? []).compactMap { $0["field"] as? String }
            }
        }

        /// The body as text.
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    struct ClientError: Error, CustomStringConvertible {
        var description: String
    }

    private let group: MultiThreadedEventLoopGroup
    private let port: Int
    private let sslContext: NIOSSLContext
    private let version: Version
    /// The HTTP/2 connection, created once by the first request (later ones wait for it).
    private let http2: NIOLockedValueBox<EventLoopFuture<HTTP2Connection>?>

    private struct HTTP2Connection: Sendable {
        var channel: any Channel
        var multiplexer: NIOHTTP2Handler.StreamMultiplexer
    }

    /// The ALPN protocol the last connection negotiated.
    let negotiated = NIOLockedValueBox<String?>(nil)

    /// Creates a client (connects lazily).
    /// - Parameters:
    ///   - port: The simulator port on 127.0.0.1.
    ///   - caPEM: The simulator CA.
    ///   - version: The HTTP version to offer via ALPN.
    init(port: Int, caPEM: String, version: Version = .http2) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        tls.applicationProtocols = version == .http2 ? ["h2"] : ["http/1.1"]
        self.sslContext = try NIOSSLContext(configuration: tls)
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.port = port
        self.version = version
        self.http2 = NIOLockedValueBox(nil)
    }

    /// Sends a request and waits for the complete response.
    /// - Parameters:
    ///   - method: HTTP method.
    ///   - path: Request path.
    ///   - headers: Extra headers.
    ///   - body: Body bytes.
    func request(
        _ method: HTTPMethod = .POST,
        _ path: String,
        headers: [(String, String)] = [],
        body: [UInt8] = []
    ) async throws -> Response {
        try await start(method, path, headers: headers, body: body).get()
    }

    /// Sends a request; the future completes with the response (or fails when the connection closes first).
    func start(
        _ method: HTTPMethod = .POST,
        _ path: String,
        headers: [(String, String)] = [],
        body: [UInt8] = []
    ) async throws -> EventLoopFuture<Response> {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: path)
        head.headers.add(name: "host", value: "localhost:\(port)")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        if !body.isEmpty || method == .POST { head.headers.add(name: "content-length", value: String(body.count)) }
        let requestHead = head
        switch version {
        case .http2:
            let connection = try await http2Connection()
            let channel = connection.channel
            let multiplexer = connection.multiplexer
            let promise = channel.eventLoop.makePromise(of: Response.self)
            let stream = channel.eventLoop.makePromise(of: (any Channel).self)
            multiplexer.createStreamChannel(promise: stream) { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: .https))
                    try stream.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise))
                }
            }
            let streamChannel = try await stream.futureResult.get()
            Self.write(requestHead, body: body, to: streamChannel)
            return promise.futureResult
        case .http1:
            let promise = group.next().makePromise(of: Response.self)
            let channel = try await connect { channel in
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(ResponseCollector(promise: promise))
            }
            Self.write(requestHead, body: body, to: channel)
            promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
            return promise.futureResult
        }
    }

    /// Closes the HTTP/2 connection (pending responses fail); the client stays usable for futures' results.
    func closeConnections() async {
        if let connection = try? await http2.withLockedValue({ $0 })?.get() {
            try? await connection.channel.close()
        }
    }

    /// Closes connections and the event loop.
    func close() async {
        await closeConnections()
        try? await group.shutdownGracefully()
    }

    private func http2Connection() async throws -> HTTP2Connection {
        let (future, promise) = http2.withLockedValue { box -> (EventLoopFuture<HTTP2Connection>, EventLoopPromise<HTTP2Connection>?) in
            if let existing = box { return (existing, nil) }
            let promise = group.next().makePromise(of: HTTP2Connection.self)
            box = promise.futureResult
            return (promise.futureResult, promise)
        }
        if let promise {
            do {
                promise.succeed(try await makeHTTP2Connection())
            } catch {
                promise.fail(error)
            }
        }
        return try await future.get()
    }

    private func makeHTTP2Connection() async throws -> HTTP2Connection {
        let multiplexerBox = NIOLockedValueBox<NIOHTTP2Handler.StreamMultiplexer?>(nil)
        let channel = try await connect { channel in
            let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                mode: .client,
                connectionConfiguration: .init(),
                streamConfiguration: .init()
            ) { stream in
                stream.eventLoop.makeSucceededVoidFuture()
            }
            multiplexerBox.withLockedValue { $0 = multiplexer }
        }
        guard let multiplexer = multiplexerBox.withLockedValue({ $0 }) else {
            throw ClientError(description: "no HTTP/2 multiplexer")
        }
        return HTTP2Connection(channel: channel, multiplexer: multiplexer)
    }

    private func connect(_ configure: @escaping @Sendable (any Channel) throws -> Void) async throws -> any Channel {
        let sslContext = self.sslContext
        let handshake = group.next().makePromise(of: String?.self)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: sslContext, serverHostname: "localhost")
                    )
                    try channel.pipeline.syncOperations.addHandler(ALPNRecorder(promise: handshake))
                    try configure(channel)
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        let negotiatedProtocol = try await handshake.futureResult.get()
        negotiated.withLockedValue { $0 = negotiatedProtocol }
        return channel
    }

    private static func write(_ head: HTTPRequestHead, body: [UInt8], to channel: any Channel) {
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if !body.isEmpty {
            channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }
}

/// Records the negotiated ALPN protocol once the TLS handshake completes.
private final class ALPNRecorder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    private let promise: EventLoopPromise<String?>

    init(promise: EventLoopPromise<String?>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiatedProtocol) = event {
            promise.succeed(negotiatedProtocol)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(FCMTestClient.ClientError(description: "closed during the handshake"))
        context.fireChannelInactive()
    }
}

/// Collects one HTTP response into a promise.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<FCMTestClient.Response>
    private var response: FCMTestClient.Response?

    init(promise: EventLoopPromise<FCMTestClient.Response>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            response = FCMTestClient.Response(
                status: Int(head.status.code),
                headers: head.headers.map { ($0.name, $0.value) },
                body: []
            )
        case .body(let buffer):
            response?.body.append(contentsOf: buffer.readableBytesView)
        case .end:
            if let response {
                promise.succeed(response)
            } else {
                promise.fail(FCMTestClient.ClientError(description: "response without head"))
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(FCMTestClient.ClientError(description: "closed before the response ended"))
        context.fireChannelInactive()
    }
}
