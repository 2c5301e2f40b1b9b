import NIOCore
import NIOHTTP1

/// Serves requests of one FCM simulator connection (HTTP/1.1) or one HTTP/2 stream (behind NIOHTTP2's
/// `HTTP2FramePayloadToHTTP1ServerCodec`): collects head and body, lets the ``FCMSimulatorCore`` decide,
/// and writes the answer at once (or after the configured latency).
final class FCMHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Largest request body read; a larger one gets 413 without being parsed.
    static let maxBodyBytes = 1 << 20

    private let core: FCMSimulatorCore
    private let connectionID: Int
    private let isHTTP2: Bool
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var bodyTooLarge = false
    private var needsFlush = false
    /// The client reset this HTTP/2 stream (``HTTP2StreamResetObserver/Reset``): its answer must not go out.
    private var streamReset = false

    /// Creates a handler.
    /// - Parameters:
    ///   - core: The shared decision logic.
    ///   - connectionID: The connection's id.
    ///   - isHTTP2: Whether this serves an HTTP/2 stream (no keep-alive handling).
    init(core: FCMSimulatorCore, connectionID: Int, isHTTP2: Bool) {
        self.core = core
        self.connectionID = connectionID
        self.isHTTP2 = isHTTP2
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
            body.removeAll(keepingCapacity: true)
            bodyTooLarge = false
        case .body(let buffer):
            if body.count + buffer.readableBytes > Self.maxBodyBytes {
                bodyTooLarge = true
            } else {
                body.append(contentsOf: buffer.readableBytesView)
            }
        case .end:
            respond(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            // A request read together with the client's RST_STREAM reaches this handler only as that reset closes the
            // stream: NIOHTTP2 hands the stream its pending frames (the request, then the reset) and this read
            // completion before it closes the stream channel. An answer flushed here reached the connection's state
            // machine for a stream it had already closed, which refused it with NoSuchStream raised as a connection
            // error, and FCMConnectionErrorHandler closed the connection with every other request on it unanswered.
            // Not flushed, the answer is dropped as the stream channel closes, as a real server drops the answer of a
            // cancelled request.
            if !streamReset { context.flush() }
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is HTTP2StreamResetObserver.Reset { streamReset = true }
        context.fireUserInboundEventTriggered(event)
    }

    private func respond(context: ChannelHandlerContext) {
        guard let requestHead = head else { return }
        head = nil
        let answer: FCMSimulatorCore.Answer
        if bodyTooLarge {
            answer = .respond(
                FCMSimulatorCore.Response(
                    status: 413,
                    headers: [("content-type", "application/json; charset=UTF-8")],
                    body: FCMErrorBody.render(code: 413, message: "Request entity too large.", status: "INVALID_ARGUMENT", details: [])
                )
            )
        } else {
            answer = core.handle(
                FCMSimulatorCore.Request(
                    method: requestHead.method,
                    uri: requestHead.uri,
                    authorization: requestHead.headers.first(name: "authorization"),
                    body: body,
                    connectionID: connectionID
                )
            )
        }
        body.removeAll(keepingCapacity: true)
        let keepAlive = isHTTP2 || requestHead.isKeepAlive
        switch answer {
        case .hang:
            return
        case .respond(let response):
            if let latency = core.latency {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: latency) {
                    let (handler, context) = loopBound.value
                    guard !handler.streamReset else { return }
                    handler.write(response, keepAlive: keepAlive, version: requestHead.version, context: context)
                    context.flush()
                }
            } else {
                write(response, keepAlive: keepAlive, version: requestHead.version, context: context)
                needsFlush = true
            }
        }
    }

    private func write(
        _ response: FCMSimulatorCore.Response,
        keepAlive: Bool,
        version: HTTPVersion,
        context: ChannelHandlerContext
    ) {
        var buffer = context.channel.allocator.buffer(capacity: response.body.utf8.count)
        buffer.writeString(response.body)
        var headers = HTTPHeaders()
        headers.reserveCapacity(response.headers.count + 2)
        for (name, value) in response.headers {
            headers.add(name: name, value: value)
        }
        headers.add(name: "content-length", value: String(buffer.readableBytes))
        if !isHTTP2 && !keepAlive {
            headers.add(name: "connection", value: "close")
        }
        let head = HTTPResponseHead(
            version: isHTTP2 ? version : .http1_1,
            status: HTTPResponseStatus(statusCode: response.status),
            headers: headers
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        if keepAlive {
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
    }
}
