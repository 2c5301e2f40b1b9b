import NIOCore
import NIOHPACK
import NIOHTTP2

/// Runs a connection's requests as frames on numbered streams, right after `NIOHTTP2Handler` (which keeps the
/// protocol state, flow control and HPACK): each request is a HEADERS + DATA pair on the next client stream id, its
/// answer is collected from the frames of that id, and its promise completes exactly once — with the answer, or an
/// ``HTTP2TransportError`` that says whether the request can be retried safely. Enforces the per-request deadline
/// with one timer per connection (see ``deadlines``).
///
/// Frames of the connection itself (SETTINGS, GOAWAY, PING) pass on to the handlers after it. A child channel per
/// stream (swift-nio-http2's multiplexer) did the same work with a pipeline, a channel and a handler per request:
/// measured at about a fifth of Bugle's CPU in a mixed run.
final class HTTP2RequestDispatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    fileprivate struct Exchange {
        var promise: EventLoopPromise<HTTP2Response>
        var response = HTTP2Response(status: 0)
        /// The server answered RST_STREAM with REFUSED_STREAM: it did not process the request.
        var refused = false
    }

    /// Client stream ids are odd and must grow; past this the connection can open no more streams.
    private static let lastStreamID: Int32 = Int32.max - 1

    /// The connection-level inbound window HTTP/2 starts with.
    private static let connectionWindow = 65_535

    private var exchanges: [HTTP2StreamID: Exchange] = [:]
    /// Every open exchange's deadline, earliest first (entries of answered exchanges are dropped lazily). A scheduled
    /// task per request cost a heap insert and, when cancelled on the answer, a linear search of the event loop's
    /// scheduled tasks (thousands with a large in-flight window): about 3% of Bugle's CPU in a mixed run. Deadlines
    /// almost always arrive in order, so keeping them sorted is an append.
    private var deadlines = CircularBuffer<(streamID: HTTP2StreamID, deadline: NIODeadline)>()
    /// The one timer, armed for the earliest deadline (or earlier) while any exchange is open.
    private var sweep: (task: Scheduled<Void>, at: NIODeadline)?
    private var connectionWindowUsed = 0
    private var nextStreamID: Int32 = 1
    private var goAwayLastStreamID: HTTP2StreamID?
    private var context: ChannelHandlerContext?
    private var isClosed = false

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeAll()
        self.context = nil
    }

    /// Writes one request on a new stream. Call on the channel's event loop.
    func send(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline, promise: EventLoopPromise<HTTP2Response>) {
        guard let context, !isClosed, context.channel.isActive else {
            promise.fail(HTTP2TransportError.notWritten("connection closed"))
            return
        }
        guard goAwayLastStreamID == nil else {
            promise.fail(HTTP2TransportError.notWritten("the server is closing the connection (GOAWAY)"))
            return
        }
        guard nextStreamID <= Self.lastStreamID else {
            promise.fail(HTTP2TransportError.notWritten("the connection has used every stream id"))
            context.close(promise: nil)
            return
        }
        let streamID = HTTP2StreamID(nextStreamID)
        nextStreamID += 2

        exchanges[streamID] = Exchange(promise: promise)
        track(streamID, deadline: deadline, context: context)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)

        // From here on the request may reach the server: a write completes only when the whole coalesced TLS
        // write it rode in has left, so a request the server already has can still look unwritten. Only an
        // explicit refusal (REFUSED_STREAM, a stream above a GOAWAY's last-stream-id, or HEADERS that the HTTP/2
        // layer itself rejected before encoding them) proves it was not processed; every other failure after
        // this point is ambiguous.
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { error in
            // NIOHTTP2's own errors are raised before a frame is encoded; I/O errors are left to channelInactive.
            guard error is any NIOHTTP2Error else { return }
            let (dispatcher, _) = loopBound.value
            dispatcher.complete(streamID, with: .failure(HTTP2TransportError.notWritten("cannot open a stream: \(error)")))
        }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: written)
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.streamID != .rootStream else {
            if case .goAway(let lastStreamID, _, _) = frame.payload {
                goAwayLastStreamID = min(goAwayLastStreamID ?? lastStreamID, lastStreamID)
            }
            context.fireChannelRead(data)
            return
        }
        let streamID = frame.streamID
        if case .data(let block) = frame.payload {
            connectionWindowUsed += block.data.readableBytes + (block.paddingBytes.map { $0 + 1 } ?? 0)
        }
        guard exchanges[streamID] != nil else { return }
        switch frame.payload {
        case .headers(let block):
            exchanges[streamID]?.collect(block.headers)
            if block.endStream { complete(streamID) }
        case .data(let block):
            if case .byteBuffer(let buffer) = block.data { exchanges[streamID]?.append(buffer) }
            if block.endStream { complete(streamID) }
        case .rstStream(let code):
            if code == .refusedStream { exchanges[streamID]?.refused = true }
        default:
            break
        }
    }

    /// The connection's inbound flow-control window is ours to keep open (without stream channels nothing else
    /// does): every DATA frame, answered or not, uses it up, and a WINDOW_UPDATE gives it back once half is used.
    /// Each stream's own window (`initialWindowSize`, 1 MiB) outlasts any provider answer.
    ///
    /// The update is written here, once the read is over, not from `channelRead`: a write there lets
    /// `NIOHTTP2Handler` deliver the stream's close event before the frame that ends the stream has been handled,
    /// and the answered request looked lost (one in about 1,170 answers of 28 bytes).
    func channelReadComplete(context: ChannelHandlerContext) {
        if connectionWindowUsed >= Self.connectionWindow / 2 {
            let increment = connectionWindowUsed
            connectionWindowUsed = 0
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, exchanges[closed.streamID] != nil {
            // An answer completes its exchange before the stream closes: this one got none.
            complete(closed.streamID, with: .failure(unanswered(closed.streamID, reason: closed.reason)))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let closed = error as? NIOHTTP2Errors.StreamClosed, closed.errorCode == .refusedStream {
            exchanges[closed.streamID]?.refused = true
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    private func closeAll() {
        isClosed = true
        sweep?.task.cancel()
        sweep = nil
        deadlines.removeAll()
        for streamID in Array(exchanges.keys) {
            complete(streamID, with: .failure(unanswered(streamID, reason: nil)))
        }
    }

    /// Why a written request got no answer.
    private func unanswered(_ streamID: HTTP2StreamID, reason: HTTP2ErrorCode?) -> HTTP2TransportError {
        let refused = reason == .refusedStream || exchanges[streamID]?.refused == true
            || goAwayLastStreamID.map { streamID > $0 } == true
        return refused ? .refused : .lostAfterWrite("stream closed before an answer")
    }

    private func complete(_ streamID: HTTP2StreamID) {
        guard let exchange = exchanges[streamID] else { return }
        complete(streamID, with: .success(exchange.response))
    }

    /// Completes the exchange once. - Returns: false when it had already completed.
    @discardableResult
    private func complete(_ streamID: HTTP2StreamID, with result: Result<HTTP2Response, any Error>) -> Bool {
        guard let exchange = exchanges.removeValue(forKey: streamID) else { return false }
        exchange.promise.completeWith(result)
        return true
    }

    // MARK: Deadlines

    /// Files a new exchange's deadline in order and makes sure the timer fires by then.
    private func track(_ streamID: HTTP2StreamID, deadline: NIODeadline, context: ChannelHandlerContext) {
        // Answered exchanges at the front go first, so the buffer holds about one entry per open exchange.
        while let first = deadlines.first, exchanges[first.streamID] == nil {
            deadlines.removeFirst()
        }
        // A hung exchange at the front holds back the entries behind it: compact when most of them are answered.
        if deadlines.count > 2 * exchanges.count + 1_024 {
            deadlines.removeAll { exchanges[$0.streamID] == nil }
        }
        if let last = deadlines.last, last.deadline > deadline {
            // A retry keeps its first attempt's deadline, which can be earlier than later requests' ones.
            var index = deadlines.endIndex
            while index > deadlines.startIndex, deadlines[deadlines.index(before: index)].deadline > deadline {
                index = deadlines.index(before: index)
            }
            deadlines.insert((streamID, deadline), at: index)
        } else {
            deadlines.append((streamID, deadline))
        }
        arm(for: deadline, context: context)
    }

    /// Schedules the timer for `deadline` unless it already fires by then.
    private func arm(for deadline: NIODeadline, context: ChannelHandlerContext) {
        if let sweep, sweep.at <= deadline { return }
        sweep?.task.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(deadline: deadline) {
            let (dispatcher, context) = loopBound.value
            dispatcher.sweep = nil
            dispatcher.expire(context: context)
        }
        sweep = (task, deadline)
    }

    /// Fails every exchange whose deadline has passed and re-arms the timer for the next one.
    private func expire(context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        while let first = deadlines.first {
            if exchanges[first.streamID] == nil {
                deadlines.removeFirst()
            } else if first.deadline <= now {
                deadlines.removeFirst()
                // Reset the stream: the server may still answer, and nobody would read it.
                if complete(first.streamID, with: .failure(HTTP2TransportError.timeout(written: true))) {
                    context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: first.streamID, payload: .rstStream(.cancel))), promise: nil)
                }
            } else {
                arm(for: first.deadline, context: context)
                return
            }
        }
    }
}

extension HTTP2RequestDispatcher.Exchange {
    mutating func collect(_ headers: HPACKHeaders) {
        for (name, value, indexing) in headers {
            if name == ":status" {
                response.status = Int(value) ?? 0
            } else if !name.hasPrefix(":") {
                response.headers.add(name: name, value: value, indexing: indexing)
            }
        }
    }

    mutating func append(_ buffer: ByteBuffer) {
        guard buffer.readableBytes > 0 else { return }
        if response.body == nil {
            response.body = buffer
        } else {
            var buffer = buffer
            response.body?.writeBuffer(&buffer)
        }
    }
}
