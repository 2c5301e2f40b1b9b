import NIOCore
import NIOHPACK
import NIOHTTP2

/// Serves one HTTP/2 stream of the simulator: collects HEADERS and DATA, then lets the
/// ``APNsSimulatorCore`` decide and writes the answer exactly as APNs does (200 + `apns-id` with
/// END_STREAM on HEADERS; errors with `content-type: application/json` and a `{"reason":...}` body).
final class APNsStreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let core: APNsSimulatorCore
    private let connection: APNsConnectionContext
    private var headers: HPACKHeaders?
    private var body: ByteBuffer?
    private var answered = false
    private var needsFlush = false
    /// The client reset this stream (RST_STREAM): its answer must not go out.
    private var streamReset = false

    init(core: APNsSimulatorCore, connection: APNsConnectionContext) {
        self.core = core
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let payload = unwrapInboundIn(data)
        switch payload {
        case .headers(let frame):
            if headers == nil {
                headers = frame.headers
            }
            if frame.endStream { respond(context: context) }
        case .data(let frame):
            if case .byteBuffer(var buffer) = frame.data {
                if body == nil {
                    body = buffer
                } else {
                    body?.writeBuffer(&buffer)
                }
            }
            if frame.endStream { respond(context: context) }
        case .rstStream:
            streamReset = true
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            // A request read together with the client's RST_STREAM reaches this handler only as that reset closes the
            // stream: NIOHTTP2 hands the stream its pending frames (the request, then the reset) and this read
            // completion before it closes the stream channel. An answer flushed here reached the connection's state
            // machine for a stream it had already closed, which refused it with NoSuchStream raised as a connection
            // error, and APNsConnectionErrorHandler closed the connection with every other request on it unanswered.
            // Not flushed, the answer is dropped as the stream channel closes, as a real server drops the answer of a
            // cancelled request.
            if !streamReset { context.flush() }
        }
        context.fireChannelReadComplete()
    }

    private func respond(context: ChannelHandlerContext) {
        guard !answered, let headers else { return }
        answered = true
        let streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)).map(Int.init) ?? 0
        guard connection.mayProcess(streamID: streamID) else {
            context.writeAndFlush(wrapOutboundOut(.rstStream(.refusedStream)), promise: nil)
            return
        }
        let answer = core.handle(headers: headers, body: body, connection: connection, streamID: streamID)
        self.headers = nil
        self.body = nil
        switch answer {
        case .hang:
            return
        case .respond(let response):
            if let latency = core.latency {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: latency) {
                    let (handler, context) = loopBound.value
                    guard !handler.streamReset else { return }
                    handler.write(response, context: context)
                    context.flush()
                }
            } else {
                write(response, context: context)
                needsFlush = true
            }
        }
    }

    private func write(_ response: APNsSimulatorCore.Response, context: ChannelHandlerContext) {
        if let body = response.body {
            context.write(wrapOutboundOut(.headers(.init(headers: response.headers, endStream: false))), promise: nil)
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
        } else {
            context.write(wrapOutboundOut(.headers(.init(headers: response.headers, endStream: true))), promise: nil)
        }
    }
}
