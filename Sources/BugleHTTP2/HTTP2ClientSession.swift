import NIOCore
import NIOHPACK
import NIOTLS

/// The client side of one HTTP/2 connection (RFC 9113), right after TLS: frames each request as HEADERS + DATA on the
/// next client stream, reads the server's frames, keeps flow control both ways, and completes each request exactly once — with the answer, or an ``HTTP2TransportError`` that says whether the request can be retried safely.
///
/// Bugle only ever sends requests and reads their answers, so this is the whole of the client's protocol state: no
/// server streams, no push, no priorities, and a header encoder whose dynamic table holds only the fields requests
/// mark as repeating (``HTTP2HeaderBlock``, ``HTTP2HeaderTable``). swift-nio-http2's `NIOHTTP2Handler` does the general job, per-frame state machines and
/// HPACK included, at about a third of Bugle's CPU per notification; NIOHPACK still decodes the answers here.
///
/// - Writes of one event-loop tick leave together: one buffer, one TLS write, one flush at the end of the tick.
/// - Connection-level news (SETTINGS, GOAWAY, PING answers) go on to the next handler as ``HTTP2ConnectionSignal``;
///   it may write ``HTTP2PingRequest``s back.
/// - A protocol breach by the server closes the connection with a GOAWAY (the error is passed on first).
/// - Per-request deadlines use one timer per connection (``HTTP2DeadlineQueue``).
final class HTTP2ClientSession: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = HTTP2ConnectionSignal
    typealias OutboundIn = HTTP2PingRequest
    typealias OutboundOut = ByteBuffer

    /// What this client announces in its SETTINGS.
    struct Settings {
        /// Each stream's receive window (answers larger than half of it get WINDOW_UPDATEs).
        var initialWindowSize = 1 << 20
        var maxHeaderListSize = 16_384
    }

    private struct Exchange {
        var completion: Completion
        var response = HTTP2Response(status: 0)
        /// Bytes this client may still send on the stream.
        var sendWindow: Int
        /// Body bytes waiting for flow-control window.
        var unsent: ByteBuffer?
        /// Bytes received since this stream's window was last given back.
        var received = 0
        /// The server answered RST_STREAM with REFUSED_STREAM: it did not process the request.
        var refused = false
    }

    /// A header block that continues in CONTINUATION frames.
    private struct PartialHeaders {
        var streamID: UInt32
        var endStream: Bool
        var block: ByteBuffer
    }

    /// How a request learns its answer: called once, on the event loop, with the answer or an ``HTTP2TransportError``.
    typealias Completion = @Sendable (Result<HTTP2Response, any Error>) -> Void

    /// Client stream ids are odd and must grow; past this the connection can open no more streams.
    private static let lastStreamID: UInt32 = UInt32(Int32.max) - 1
    /// The least `SETTINGS_MAX_CONCURRENT_STREAMS` assumed when the server sets no limit.
    private static let unlimitedStreams = 1_000

    private let settings: Settings
    private var reader = HTTP2FrameReader()
    private var decoder: HPACKDecoder
    private var exchanges: [UInt32: Exchange] = [:]
    private var deadlines = HTTP2DeadlineQueue()
    /// The one deadline timer, armed for the earliest deadline (or earlier) while any request is open.
    private var sweep: (task: Scheduled<Void>, at: NIODeadline)?
    private var nextStreamID: UInt32 = 1
    private var goAwayLastStreamID: UInt32?
    /// The GOAWAY's code and debug data, once one arrived.
    private var goAwayDetail: (code: UInt32, debugData: String) = (0, "")
    /// Whether any request on this connection was answered.
    private var answeredAny = false
    private var context: ChannelHandlerContext?
    private var isClosed = false
    private var prefaceSent = false
    private var sawSettings = false
    private var partialHeaders: PartialHeaders?
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` (no limit until it says otherwise), and the requests waiting
    /// for a stream under it.
    private var peerMaxStreams = HTTP2ClientSession.unlimitedStreams
    private var waiting = HTTP2WaitingRequests()

    /// Frames written this tick and not yet handed to TLS, and the streams whose requests are in them.
    private var outbound = ByteBuffer()
    private var unflushedStreams: [UInt32] = []
    private var flushScheduled = false
    /// What this client has put in the server's HPACK dynamic table.
    private var headerTable = HTTP2HeaderTable()
    /// Where a header block with indexed fields or a size update is put together before it is framed.
    private var blockScratch = ByteBuffer()

    // Flow control. Send: the server's windows. Receive: bytes of DATA taken since the last connection update.
    private var connectionSendWindow = HTTP2Wire.defaultWindow
    private var peerInitialWindow = HTTP2Wire.defaultWindow
    private var peerMaxFrameSize = HTTP2Wire.defaultMaxFrameSize
    private var connectionReceived = 0
    /// Streams with body bytes waiting for window, oldest first.
    private var blocked: [UInt32] = []

    /// Set when the TLS layer reported that the server refused the certificates (``TLSCertificateRejection``): the
    /// requests written on the connection were never read by an HTTP server.
    private var certificateRefusal: String?
    /// Names the server in a refusal (`cannot connect to APNs: …`).
    private let serviceName: String

    init(settings: Settings = Settings(), serviceName: String = "the server") {
        self.settings = settings
        self.serviceName = serviceName
        self.decoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize, maxHeaderListSize: settings.maxHeaderListSize)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        outbound = context.channel.allocator.buffer(capacity: 4_096)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeAll()
        self.context = nil
    }

    // MARK: Requests

    /// Writes one request on a new stream. Call on the channel's event loop.
    /// - Parameters:
    ///   - headers: The encoded header fields, pseudo-headers first.
    ///   - body: The body (may be empty).
    ///   - deadline: When to give up waiting for the answer.
    ///   - completion: Called once, with the answer or an ``HTTP2TransportError``.
    func send(headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline, completion: @escaping Completion) {
        guard let context, prefaceSent, !isClosed, context.channel.isActive else {
            completion(.failure(HTTP2TransportError.notWritten("connection closed")))
            return
        }
        guard goAwayLastStreamID == nil else {
            completion(.failure(goingAway))
            return
        }
        guard nextStreamID <= Self.lastStreamID else {
            completion(.failure(HTTP2TransportError.notWritten("the connection has used every stream id")))
            context.close(promise: nil)
            return
        }
        guard exchanges.count < peerMaxStreams else {
            waiting.append(.init(headers: headers, body: body, deadline: deadline, completion: completion))
            arm(for: deadline, context: context)
            return
        }
        open(headers: headers, body: body, deadline: deadline, completion: completion, context: context)
    }

    /// Opens the next stream for a request and writes it.
    private func open(headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline, completion: @escaping Completion, context: ChannelHandlerContext) {
        let streamID = nextStreamID
        nextStreamID += 2
        exchanges[streamID] = Exchange(completion: completion, sendWindow: peerInitialWindow)
        deadlines.add(streamID, deadline: deadline, openCount: exchanges.count) { exchanges[$0] != nil }
        arm(for: deadline, context: context)

        writeHeaders(headers, streamID: streamID, endStream: body.readableBytes == 0)
        unflushedStreams.append(streamID)
        if body.readableBytes > 0 {
            var body = body
            if !writeData(streamID, body: &body) {
                exchanges[streamID]?.unsent = body
                blocked.append(streamID)
            }
        }
        scheduleFlush(context: context)
    }

    /// HEADERS (and CONTINUATIONs when the block exceeds the server's frame size). Blocks are encoded here, in the
    /// order they go out, so the connection's table and the server's agree.
    private func writeHeaders(_ headers: HTTP2HeaderBlock, streamID: UInt32, endStream: Bool) {
        var block: ByteBuffer
        if headers.indexed.isEmpty && !headerTable.owesSizeUpdate {
            block = headers.bytes
        } else {
            blockScratch.clear()
            headerTable.encode(headers, into: &blockScratch)
            block = blockScratch
        }
        var first = true
        repeat {
            let length = min(block.readableBytes, peerMaxFrameSize)
            let last = length == block.readableBytes
            var flags: UInt8 = last ? HTTP2Wire.Flag.endHeaders : 0
            if first && endStream { flags |= HTTP2Wire.Flag.endStream }
            let type: HTTP2Wire.FrameType = first ? .headers : .continuation
            outbound.writeHTTP2FrameHeader(length: length, type: type, flags: flags, streamID: streamID)
            if let chunk = block.readSlice(length: length) { outbound.writeImmutableBuffer(chunk) }
            first = false
        } while block.readableBytes > 0
    }

    /// Writes as much of a body as the windows allow. - Returns: true when all of it was written.
    private func writeData(_ streamID: UInt32, body: inout ByteBuffer) -> Bool {
        while body.readableBytes > 0 {
            guard let window = exchanges[streamID]?.sendWindow else { return true }
            let length = min(body.readableBytes, connectionSendWindow, window, peerMaxFrameSize)
            guard length > 0, let chunk = body.readSlice(length: length) else { return false }
            let flags = body.readableBytes == 0 ? HTTP2Wire.Flag.endStream : 0
            outbound.writeHTTP2FrameHeader(length: length, type: .data, flags: flags, streamID: streamID)
            outbound.writeImmutableBuffer(chunk)
            connectionSendWindow -= length
            exchanges[streamID]?.sendWindow -= length
        }
        return true
    }

    /// Sends what waits for window, oldest first, after the server gave some back.
    private func writeBlocked() {
        guard !blocked.isEmpty, let context else { return }
        var still: [UInt32] = []
        for streamID in blocked {
            guard var body = exchanges[streamID]?.unsent else { continue }
            if writeData(streamID, body: &body) {
                exchanges[streamID]?.unsent = nil
            } else {
                exchanges[streamID]?.unsent = body
                still.append(streamID)
            }
        }
        blocked = still
        scheduleFlush(context: context)
    }

    // MARK: Writing

    private func scheduleFlush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (session, context) = loopBound.value
            session.flushNow(context: context)
        }
    }

    private func flushNow(context: ChannelHandlerContext) {
        flushScheduled = false
        guard outbound.readableBytes > 0, !isClosed else { return }
        let bytes = outbound
        outbound = context.channel.allocator.buffer(capacity: max(4_096, bytes.readableBytes))
        unflushedStreams.removeAll(keepingCapacity: true)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let ping = unwrapOutboundIn(data)
        outbound.writeHTTP2Ping(ping.data, ack: false)
        promise?.succeed(())
    }

    func flush(context: ChannelHandlerContext) {
        scheduleFlush(context: context)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Say goodbye politely when the close is ours (the server learns no more streams are coming).
        if mode == .all, !isClosed, prefaceSent, context.channel.isActive {
            outbound.writeHTTP2GoAway(lastStreamID: 0, code: HTTP2Wire.ErrorCode.noError)
            flushNow(context: context)
        }
        context.close(mode: mode, promise: promise)
    }

    // MARK: Connection start

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = tls, negotiated == nil || negotiated == "h2" {
            sendPreface(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func sendPreface(context: ChannelHandlerContext) {
        guard !prefaceSent else { return }
        prefaceSent = true
        outbound.writeBytes(HTTP2Wire.preface)
        outbound.writeHTTP2Settings([
            (HTTP2Wire.Setting.enablePush, 0),
            (HTTP2Wire.Setting.maxConcurrentStreams, 0),
            (HTTP2Wire.Setting.initialWindowSize, UInt32(settings.initialWindowSize)),
            (HTTP2Wire.Setting.maxHeaderListSize, UInt32(settings.maxHeaderListSize)),
        ])
        flushNow(context: context)
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reader.append(unwrapInboundIn(data))
        do {
            while !isClosed, let frame = try reader.next() {
                try handle(frame, context: context)
            }
        } catch {
            fail(context: context, error)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The connection's receive window is ours to keep open: every DATA frame uses it up, answered or not, and a
        // WINDOW_UPDATE gives it back once half is used.
        if connectionReceived >= HTTP2Wire.defaultWindow / 2, !isClosed {
            outbound.writeHTTP2WindowUpdate(streamID: 0, increment: connectionReceived)
            connectionReceived = 0
            flushNow(context: context)
        }
        context.fireChannelReadComplete()
    }

    private func handle(_ frame: HTTP2RawFrame, context: ChannelHandlerContext) throws(HTTP2ProtocolViolation) {
        if let partial = partialHeaders {
            guard frame.type == HTTP2Wire.FrameType.continuation.rawValue, frame.streamID == partial.streamID else {
                throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "a header block was interrupted by another frame")
            }
        }
        guard let type = HTTP2Wire.FrameType(rawValue: frame.type) else { return }  // unknown types are ignored
        switch type {
        case .data: try readData(frame)
        case .headers: try readHeaders(frame)
        case .continuation: try readContinuation(frame)
        case .rstStream: try readReset(frame)
        case .settings: try readSettings(frame, context: context)
        case .ping: try readPing(frame, context: context)
        case .goAway: try readGoAway(frame, context: context)
        case .windowUpdate: try readWindowUpdate(frame)
        case .priority: break
        case .pushPromise:
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "PUSH_PROMISE after push was disabled")
        }
    }

    private func readData(_ frame: HTTP2RawFrame) throws(HTTP2ProtocolViolation) {
        try Self.requireStream(frame, "DATA")
        connectionReceived += frame.payload.readableBytes
        var payload = try Self.unpadded(frame)
        guard exchanges[frame.streamID] != nil else { return }
        exchanges[frame.streamID]?.response.appendBody(&payload)
        if frame.has(HTTP2Wire.Flag.endStream) {
            complete(frame.streamID)
            return
        }
        exchanges[frame.streamID]?.received += frame.payload.readableBytes
        if let received = exchanges[frame.streamID]?.received, received >= settings.initialWindowSize / 2 {
            exchanges[frame.streamID]?.received = 0
            outbound.writeHTTP2WindowUpdate(streamID: frame.streamID, increment: received)
            if let context { scheduleFlush(context: context) }
        }
    }

    private func readHeaders(_ frame: HTTP2RawFrame) throws(HTTP2ProtocolViolation) {
        try Self.requireStream(frame, "HEADERS")
        var block = try Self.unpadded(frame)
        if frame.has(HTTP2Wire.Flag.priority) {
            guard block.readableBytes >= 5 else {
                throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.frameSizeError, message: "HEADERS too short for its priority")
            }
            block.moveReaderIndex(forwardBy: 5)
        }
        let endStream = frame.has(HTTP2Wire.Flag.endStream)
        if frame.has(HTTP2Wire.Flag.endHeaders) {
            try decodeHeaders(&block, streamID: frame.streamID, endStream: endStream)
        } else {
            partialHeaders = PartialHeaders(streamID: frame.streamID, endStream: endStream, block: block)
        }
    }

    private func readContinuation(_ frame: HTTP2RawFrame) throws(HTTP2ProtocolViolation) {
        guard var partial = partialHeaders else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "CONTINUATION without HEADERS")
        }
        var fragment = frame.payload
        partial.block.writeBuffer(&fragment)
        if frame.has(HTTP2Wire.Flag.endHeaders) {
            partialHeaders = nil
            try decodeHeaders(&partial.block, streamID: partial.streamID, endStream: partial.endStream)
        } else {
            partialHeaders = partial
        }
    }

    /// Every header block is decoded, answered or not, to keep the decoder's table in step with the server's.
    private func decodeHeaders(_ block: inout ByteBuffer, streamID: UInt32, endStream: Bool) throws(HTTP2ProtocolViolation) {
        let headers: HPACKHeaders
        do {
            headers = try decoder.decodeHeaders(from: &block)
        } catch {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.compressionError, message: "undecodable header block")
        }
        guard exchanges[streamID] != nil else { return }
        exchanges[streamID]?.response.collect(headers)
        if endStream { complete(streamID) }
    }

    private func readReset(_ frame: HTTP2RawFrame) throws(HTTP2ProtocolViolation) {
        try Self.requireStream(frame, "RST_STREAM")
        guard let code = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self), frame.payload.readableBytes == 4 else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.frameSizeError, message: "RST_STREAM of \(frame.payload.readableBytes) bytes")
        }
        guard exchanges[frame.streamID] != nil else { return }
        if code == HTTP2Wire.ErrorCode.refusedStream { exchanges[frame.streamID]?.refused = true }
        let error = code == HTTP2Wire.ErrorCode.refusedStream
            ? HTTP2TransportError.refused : .lostAfterWrite("stream reset by the server (\(HTTP2Wire.ErrorCode.name(code)))")
        complete(frame.streamID, with: .failure(error))
    }

    private func readSettings(_ frame: HTTP2RawFrame, context: ChannelHandlerContext) throws(HTTP2ProtocolViolation) {
        guard frame.streamID == 0 else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "SETTINGS on a stream")
        }
        if frame.has(HTTP2Wire.Flag.ack) { return }
        guard frame.payload.readableBytes % 6 == 0 else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.frameSizeError, message: "SETTINGS of \(frame.payload.readableBytes) bytes")
        }
        var payload = frame.payload
        var maxStreams: Int?
        var windowGrew = false
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch identifier {
            case HTTP2Wire.Setting.maxConcurrentStreams:
                maxStreams = Int(value)
                peerMaxStreams = Int(value)
            case HTTP2Wire.Setting.initialWindowSize:
                guard value <= UInt32(HTTP2Wire.maxWindow) else {
                    throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.flowControlError, message: "SETTINGS_INITIAL_WINDOW_SIZE \(value)")
                }
                let delta = Int(value) - peerInitialWindow
                peerInitialWindow = Int(value)
                for streamID in exchanges.keys { exchanges[streamID]?.sendWindow += delta }
                windowGrew = windowGrew || delta > 0
            case HTTP2Wire.Setting.maxFrameSize:
                guard (16_384...16_777_215).contains(value) else {
                    throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "SETTINGS_MAX_FRAME_SIZE \(value)")
                }
                peerMaxFrameSize = Int(value)
            case HTTP2Wire.Setting.headerTableSize:
                headerTable.peerLimitChanged(to: Int(value))
            default:
                break  // advisory
            }
        }
        outbound.writeHTTP2FrameHeader(length: 0, type: .settings, flags: HTTP2Wire.Flag.ack, streamID: 0)
        scheduleFlush(context: context)
        if windowGrew { writeBlocked() }
        if maxStreams == nil, !sawSettings { maxStreams = Self.unlimitedStreams }
        sawSettings = true
        admitWaiting()
        if let maxStreams { context.fireChannelRead(wrapInboundOut(.maxConcurrentStreams(maxStreams))) }
    }

    private func readPing(_ frame: HTTP2RawFrame, context: ChannelHandlerContext) throws(HTTP2ProtocolViolation) {
        guard frame.streamID == 0, frame.payload.readableBytes == 8, let data = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt64.self) else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.frameSizeError, message: "malformed PING")
        }
        if frame.has(HTTP2Wire.Flag.ack) {
            context.fireChannelRead(wrapInboundOut(.pingAnswered(data)))
        } else {
            outbound.writeHTTP2Ping(data, ack: true)
            scheduleFlush(context: context)
        }
    }

    private func readGoAway(_ frame: HTTP2RawFrame, context: ChannelHandlerContext) throws(HTTP2ProtocolViolation) {
        var payload = frame.payload
        guard frame.streamID == 0, let last = payload.readInteger(as: UInt32.self), let code = payload.readInteger(as: UInt32.self) else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.frameSizeError, message: "malformed GOAWAY")
        }
        let lastStreamID = last & 0x7FFF_FFFF
        goAwayLastStreamID = min(goAwayLastStreamID ?? lastStreamID, lastStreamID)
        goAwayDetail = (code, Self.printable(payload.readBytes(length: min(payload.readableBytes, 256)) ?? []))
        admitWaiting()  // no stream opens any more: the waiting requests fail, unwritten
        // Streams above the last one were not processed: safe to send again elsewhere.
        for streamID in exchanges.keys where streamID > lastStreamID {
            complete(streamID, with: .failure(goingAway))
        }
        context.fireChannelRead(wrapInboundOut(.goAway(lastStreamID: Int(lastStreamID), code: code, debugData: goAwayDetail.debugData)))
    }

    /// What a request the server will not process because of its GOAWAY fails with.
    private var goingAway: HTTP2TransportError {
        .goingAway(code: goAwayDetail.code, debugData: goAwayDetail.debugData, connectionAnswered: answeredAny)
    }

    /// `bytes` as text that is safe to log: printable ASCII kept, anything else as `?`.
    static func printable(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    private func readWindowUpdate(_ frame: HTTP2RawFrame) throws(HTTP2ProtocolViolation) {
        guard frame.payload.readableBytes == 4, let raw = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt32.self) else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.frameSizeError, message: "malformed WINDOW_UPDATE")
        }
        let increment = Int(raw & 0x7FFF_FFFF)
        if frame.streamID == 0 {
            guard increment > 0 else {
                throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "WINDOW_UPDATE of 0")
            }
            connectionSendWindow += increment
            guard connectionSendWindow <= HTTP2Wire.maxWindow else {
                throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.flowControlError, message: "connection window above 2^31-1")
            }
        } else {
            guard exchanges[frame.streamID] != nil, increment > 0 else { return }
            exchanges[frame.streamID]?.sendWindow += increment
        }
        writeBlocked()
    }

    private static func requireStream(_ frame: HTTP2RawFrame, _ name: String) throws(HTTP2ProtocolViolation) {
        guard frame.streamID != 0 else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "\(name) on stream 0")
        }
    }

    /// The payload without its padding (PADDED flag: a length byte first, that many bytes last).
    private static func unpadded(_ frame: HTTP2RawFrame) throws(HTTP2ProtocolViolation) -> ByteBuffer {
        var payload = frame.payload
        guard frame.has(HTTP2Wire.Flag.padded) else { return payload }
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes,
            let content = payload.readSlice(length: payload.readableBytes - Int(padding))
        else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.protocolError, message: "padding longer than its frame")
        }
        return content
    }

    // MARK: Ending

    /// A protocol breach: the error goes on (the connection handler reports it), then GOAWAY and close.
    private func fail(context: ChannelHandlerContext, _ error: any Error) {
        guard !isClosed else { return }
        let code = (error as? HTTP2ProtocolViolation)?.code ?? HTTP2Wire.ErrorCode.protocolError
        context.fireErrorCaught(error)
        outbound.writeHTTP2GoAway(lastStreamID: 0, code: code)
        flushNow(context: context)
        isClosed = true
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS 1.3 gives the server's verdict on the client's certificate after the client's handshake, so requests may
        // already be written when it comes: they fail with the refusal (the run halts), not as lost answers — which
        // one a request got depended on whether it was written before the verdict arrived.
        if certificateRefusal == nil, let reason = TLSCertificateRejection.reason(for: error) {
            certificateRefusal = "cannot connect to \(serviceName): \(reason)"
        }
        context.fireErrorCaught(error)
    }

    private func closeAll() {
        isClosed = true
        sweep?.task.cancel()
        sweep = nil
        deadlines.removeAll()
        blocked.removeAll()
        for request in waiting.removeAll() {
            request.completion(.failure(HTTP2TransportError.notWritten("connection closed")))
        }
        // Requests still in this tick's buffer never left: safe to send again.
        for streamID in unflushedStreams where exchanges[streamID] != nil {
            complete(streamID, with: .failure(HTTP2TransportError.notWritten("connection closed")))
        }
        unflushedStreams.removeAll()
        var unanswered = 0
        var failures: [(UInt32, HTTP2TransportError)] = []
        for streamID in Array(exchanges.keys) {
            let error: HTTP2TransportError
            if let certificateRefusal {
                error = .certificateRejected(certificateRefusal)
            } else if exchanges[streamID]?.refused == true {
                error = .refused
            } else if goAwayLastStreamID.map({ streamID > $0 }) == true {
                error = goingAway
            } else {
                error = .lostAfterWrite("stream closed before an answer")
                unanswered += 1
            }
            failures.append((streamID, error))
        }
        // Said before the requests come back: whoever awaited them may look for why at once (the warning used to be
        // logged after, and a test reading the log as its request failed found none).
        if unanswered > 0 { context?.fireChannelRead(wrapInboundOut(.closedUnanswered(unanswered))) }
        for (streamID, error) in failures { complete(streamID, with: .failure(error)) }
    }

    private func complete(_ streamID: UInt32) {
        guard let exchange = exchanges[streamID] else { return }
        if !answeredAny {
            answeredAny = true
            context?.fireChannelRead(wrapInboundOut(.answered))
        }
        complete(streamID, with: .success(exchange.response))
    }

    /// Completes the exchange once. - Returns: false when it had already completed.
    @discardableResult
    private func complete(_ streamID: UInt32, with result: Result<HTTP2Response, any Error>) -> Bool {
        guard let exchange = exchanges.removeValue(forKey: streamID) else { return false }
        exchange.completion(result)
        admitWaiting()
        return true
    }

    /// Opens streams for waiting requests while the server's limit allows, oldest first. Once no new stream can open
    /// on this connection (closed, GOAWAY), every waiting request fails, unwritten.
    private func admitWaiting() {
        guard !waiting.isEmpty else { return }
        guard let context, !isClosed, goAwayLastStreamID == nil, nextStreamID <= Self.lastStreamID else {
            let error = goAwayLastStreamID == nil ? HTTP2TransportError.notWritten("connection closed") : goingAway
            for request in waiting.removeAll() { request.completion(.failure(error)) }
            return
        }
        let now = NIODeadline.now()
        while exchanges.count < peerMaxStreams, let request = waiting.popFirst() {
            guard request.deadline > now else {
                request.completion(.failure(HTTP2TransportError.notWritten("no stream was free before the deadline")))
                continue
            }
            open(headers: request.headers, body: request.body, deadline: request.deadline, completion: request.completion, context: context)
        }
    }

    // MARK: Deadlines

    /// Schedules the timer for `deadline` unless it already fires by then.
    private func arm(for deadline: NIODeadline, context: ChannelHandlerContext) {
        if let sweep, sweep.at <= deadline { return }
        sweep?.task.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(deadline: deadline) {
            let (session, context) = loopBound.value
            session.sweep = nil
            session.expire(context: context)
        }
        sweep = (task, deadline)
    }

    /// Fails every request whose deadline has passed, resets its stream, and re-arms the timer for the next one.
    private func expire(context: ChannelHandlerContext) {
        let (expired, next) = deadlines.expire(now: .now()) { exchanges[$0] != nil }
        for streamID in expired where complete(streamID, with: .failure(HTTP2TransportError.timeout(written: true))) {
            // The server may still answer, and nobody would read it.
            outbound.writeHTTP2ResetStream(streamID: streamID, code: HTTP2Wire.ErrorCode.cancel)
        }
        if !expired.isEmpty { scheduleFlush(context: context) }
        for request in waiting.removeExpired(now: .now()) {
            request.completion(.failure(HTTP2TransportError.notWritten("no stream was free before the deadline")))
        }
        if let next = [next, waiting.earliestDeadline].compactMap({ $0 }).min() { arm(for: next, context: context) }
    }
}
