import NIOCore
import NIOHPACK
import NIOHTTP2

/// Client side of one request on its own HTTP/2 stream: writes HEADERS + DATA, collects the answer,
/// and completes `promise` exactly once — with the answer, or an ``HTTP2TransportError`` that says whether
/// the request can be retried safely. Enforces the per-request deadline.
final class HTTP2StreamHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let headers: HPACKHeaders
    private let body: ByteBuffer
    private let promise: EventLoopPromise<HTTP2Response>
    private let deadline: NIODeadline
    private let connection: HTTP2Connection
    private var sent = false
    private var written = false
    private var completed = false
    private var refused = false
    private var response = HTTP2Response(status: 0)
    private var timeoutTask: Scheduled<Void>?

    init(
        headers: HPACKHeaders,
        body: ByteBuffer,
        deadline: NIODeadline,
        connection: HTTP2Connection,
        promise: EventLoopPromise<HTTP2Response>
    ) {
        self.headers = headers
        self.body = body
        self.deadline = deadline
        self.connection = connection
        self.promise = promise
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { send(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        send(context: context)
        context.fireChannelActive()
    }

    private func send(context: ChannelHandlerContext) {
        guard !sent else { return }
        sent = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timeoutTask = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.fail(.timeout(written: handler.written))
            context.close(promise: nil)
        }
        // From here on the request may reach the server: a write promise completes only when the whole
        // coalesced TLS write it rode in has left, so a request the server already has can still look
        // "unwritten". Only an explicit refusal (REFUSED_STREAM, or a stream above a GOAWAY's last-stream-id)
        // proves it was not processed; every other failure after this point is ambiguous.
        written = true
        context.write(wrapOutboundOut(.headers(.init(headers: headers, endStream: false))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            for (name, value, indexing) in frame.headers {
                if name == ":status" {
                    response.status = Int(value) ?? 0
                } else if !name.hasPrefix(":") {
                    response.headers.add(name: name, value: value, indexing: indexing)
                }
            }
            if frame.endStream { succeed() }
        case .data(let frame):
            if case .byteBuffer(var buffer) = frame.data, buffer.readableBytes > 0 {
                if response.body == nil {
                    response.body = buffer
                } else {
                    response.body?.writeBuffer(&buffer)
                }
            }
            if frame.endStream { succeed() }
        case .rstStream(let code):
            if code == .refusedStream { refused = true }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let closed = error as? NIOHTTP2Errors.StreamClosed, closed.errorCode == .refusedStream {
            refused = true
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Streams above a GOAWAY's last-stream-id were not processed, whatever reset code ended them.
        if !refused, written, let streamID = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID),
            connection.isAboveGoAway(streamID: Int(streamID))
        {
            refused = true
        }
        if refused {
            fail(.refused)
        } else if written {
            fail(.lostAfterWrite("stream closed before an answer"))
        } else {
            fail(.notWritten("stream closed before the request was written"))
        }
        context.fireChannelInactive()
    }

    private func succeed() {
        guard !completed else { return }
        completed = true
        timeoutTask?.cancel()
        promise.succeed(response)
    }

    private func fail(_ error: HTTP2TransportError) {
        guard !completed else { return }
        completed = true
        timeoutTask?.cancel()
        promise.fail(error)
    }
}
