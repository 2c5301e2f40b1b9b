import NIOCore
import NIOHTTP1

/// One connection's HTTP/1.1 requests, each answered in full by a function of its head (request bodies are read and
/// ignored): the plain-HTTP servers of the simulators (the metadata server, the counters server) share it.
///
/// It adds `Content-Length`, and `Connection: close` (closing once the answer is written) when the request does not
/// keep the connection alive.
final class SimulatorHTTP1Responder: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// A whole answer.
    struct Response {
        var status: HTTPResponseStatus
        /// Headers besides `Content-Length` and `Connection`.
        var headers: HTTPHeaders
        var body: String
    }

    private let respond: (HTTPRequestHead) -> Response
    private var head: HTTPRequestHead?

    /// A handler answering each request with `respond(head)`, called on the channel's event loop.
    init(respond: @escaping (HTTPRequestHead) -> Response) {
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            let response = respond(head)
            var headers = response.headers
            headers.add(name: "Content-Length", value: String(response.body.utf8.count))
            if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: response.body)))), promise: nil)
            if head.isKeepAlive {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            } else {
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }
}
