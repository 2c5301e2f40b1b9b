@testable import BugleHTTP2
import BugleCore
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOTLS
import Testing

/// The client session's protocol handling frame by frame, on an in-memory channel: what it writes, and what it does
/// with each frame a server may send. (Interoperation with a real server, swift-nio-http2's, over TLS is covered by
/// the simulator suites.)
@Suite("HTTP/2 client session: frames, flow control, errors")
struct HTTP2ClientSessionTests {
    /// Collects what the session passes on about the connection.
    final class SignalRecorder: ChannelInboundHandler {
        typealias InboundIn = HTTP2ConnectionSignal
        var signals: [HTTP2ConnectionSignal] = []
        var errors: [any Error] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { signals.append(unwrapInboundIn(data)) }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
    }

    /// A session on an embedded channel, past the TLS handshake, with its preface and SETTINGS already read.
    struct Harness {
        let channel = EmbeddedChannel()
        let recorder = SignalRecorder()
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())

        init() throws {
            try channel.pipeline.syncOperations.addHandler(HTTP2ClientSession())
            try channel.pipeline.syncOperations.addHandler(recorder)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
            channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: "h2"))
            var bytes = try readOutbound()
            #expect(bytes.readBytes(length: HTTP2Wire.preface.count) == HTTP2Wire.preface)
            var reader = HTTP2FrameReader()
            reader.append(bytes)
            let settings = try reader.next()
            #expect(settings?.type == HTTP2Wire.FrameType.settings.rawValue)
        }

        var session: HTTP2ClientSession {
            get throws { try channel.pipeline.syncOperations.handler(type: HTTP2ClientSession.self) }
        }

        /// Everything written since the last call (after the pending end-of-tick flush ran).
        func readOutbound() throws -> ByteBuffer {
            channel.embeddedEventLoop.run()
            var all = ByteBuffer()
            while let part = try channel.readOutbound(as: ByteBuffer.self) {
                var part = part
                all.writeBuffer(&part)
            }
            return all
        }

        /// The frames written since the last call.
        func writtenFrames() throws -> [HTTP2RawFrame] {
            var reader = HTTP2FrameReader()
            reader.append(try readOutbound())
            var frames: [HTTP2RawFrame] = []
            while let frame = try reader.next() { frames.append(frame) }
            return frames
        }

        func request(
            body: String = "{}", deadline: NIODeadline = .now() + .seconds(60), indexed: [(String, String)] = []
        ) throws -> EventLoopFuture<HTTP2Response> {
            let promise = channel.eventLoop.makePromise(of: HTTP2Response.self)
            var headers = HTTP2HeaderBlock()
            headers.add(.methodPOST)
            headers.add(.path, value: "/3/device/", "abcd")
            for (name, value) in indexed { headers.addIndexed(name: name, value: value) }
            try session.send(headers: headers, body: ByteBuffer(string: body), deadline: deadline) { promise.completeWith($0) }
            return promise.futureResult
        }

        func receive(_ frames: ByteBuffer) throws {
            try channel.writeInbound(frames)
            channel.pipeline.fireChannelReadComplete()
        }

        mutating func responseHeaders(_ fields: [(String, String)]) throws -> ByteBuffer {
            var block = ByteBuffer()
            try encoder.encode(headers: HPACKHeaders(fields), to: &block)
            return block
        }
    }

    static func frame(_ type: HTTP2Wire.FrameType, flags: UInt8 = 0, stream: UInt32, _ payload: ByteBuffer = ByteBuffer()) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeHTTP2FrameHeader(length: payload.readableBytes, type: type, flags: flags, streamID: stream)
        buffer.writeImmutableBuffer(payload)
        return buffer
    }

    static func settings(_ values: [(UInt16, UInt32)]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeHTTP2Settings(values)
        return buffer
    }

    static func result(_ future: EventLoopFuture<HTTP2Response>) -> Result<HTTP2Response, any Error>? {
        let outcome = NIOLockedValueBox<Result<HTTP2Response, any Error>?>(nil)
        future.whenComplete { result in outcome.withLockedValue { $0 = result } }
        return outcome.withLockedValue { $0 }
    }

    @Test("a request is HEADERS then DATA on stream 1; HEADERS + DATA back complete it with status, headers and body")
    func requestAndAnswer() throws {
        var harness = try Harness()
        let answer = try harness.request(body: #"{"aps":{}}"#)
        let frames = try harness.writtenFrames()
        #expect(frames.map(\.type) == [HTTP2Wire.FrameType.headers.rawValue, HTTP2Wire.FrameType.data.rawValue])
        #expect(frames.allSatisfy { $0.streamID == 1 })
        #expect(frames[0].has(HTTP2Wire.Flag.endHeaders) && !frames[0].has(HTTP2Wire.Flag.endStream))
        #expect(frames[1].has(HTTP2Wire.Flag.endStream) && String(buffer: frames[1].payload) == #"{"aps":{}}"#)
        // The server kept the default table size, so the block starts with its first field (`:method: POST`, static 3).
        var block = frames[0].payload
        #expect(block.getInteger(at: block.readerIndex, as: UInt8.self) == 0x83)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let sent = try decoder.decodeHeaders(from: &block)
        #expect(sent.first(name: ":path") == "/3/device/abcd" && sent.first(name: ":method") == "POST")

        let headers = try harness.responseHeaders([(":status", "400"), ("apns-id", "id-1")])
        var bytes = Self.frame(.headers, flags: HTTP2Wire.Flag.endHeaders, stream: 1, headers)
        bytes.writeImmutableBuffer(Self.frame(.data, flags: HTTP2Wire.Flag.endStream, stream: 1, ByteBuffer(string: #"{"reason":"BadDeviceToken"}"#)))
        try harness.receive(bytes)
        let response = try #require(try Self.result(answer)?.get())
        #expect(response.status == 400)
        #expect(response.headers.first(name: "apns-id") == "id-1")
        #expect(!response.headers.contains(name: ":status"))
        #expect(response.body.map { String(buffer: $0) } == #"{"reason":"BadDeviceToken"}"#)
        // A second request uses stream 3 and no further size update.
        _ = try harness.request()
        let second = try harness.writtenFrames()
        #expect(second.first?.streamID == 3)
        #expect(second.first.flatMap { $0.payload.getInteger(at: $0.payload.readerIndex, as: UInt8.self) } != 0x20)
    }

    /// Decodes the HEADERS block of each request written since the last read, in order, with one decoder (as the
    /// server would), and returns each block's size and fields.
    static func decodeBlocks(_ harness: Harness, _ decoder: inout HPACKDecoder) throws -> [(size: Int, fields: HPACKHeaders)] {
        try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.headers.rawValue }.map { frame in
            var block = frame.payload
            let size = block.readableBytes
            return (size, try decoder.decodeHeaders(from: &block))
        }
    }

    @Test("repeating fields are literals with incremental indexing on a connection's first request, one byte each after")
    func indexedFields() throws {
        let harness = try Harness()
        let fields = [("apns-topic", "com.example.app"), ("apns-push-type", "alert"), ("content-type", "application/json")]
        _ = try harness.request(indexed: fields)
        _ = try harness.request(indexed: fields)
        _ = try harness.request(indexed: Array(fields.reversed()) + [("apns-priority", "5")])
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let blocks = try Self.decodeBlocks(harness, &decoder)
        try #require(blocks.count == 3)
        for (index, block) in blocks.enumerated() {
            #expect(block.fields.first(name: ":path") == "/3/device/abcd", "request \(index)")
            for (name, value) in fields { #expect(block.fields.first(name: name) == value, "request \(index): \(name)") }
        }
        #expect(blocks[2].fields.first(name: "apns-priority") == "5")
        // The first sends the three fields for indexing; the second refers to them, one byte each.
        #expect(blocks[0].fields.filter { $0.name.hasPrefix("apns-") || $0.name == "content-type" }.allSatisfy { $0.indexable == .indexable })
        #expect(blocks[0].fields.first { $0.name == ":path" }?.indexable == .nonIndexable)
        var fixed = HTTP2HeaderBlock()
        fixed.add(.methodPOST)
        fixed.add(.path, value: "/3/device/", "abcd")
        let fixedSize = fixed.bytes.readableBytes
        // apns-topic: 0x40, the name and the value, each behind its length (28 bytes); apns-push-type likewise (22);
        // content-type names static entry 31 in the first byte (18).
        #expect(blocks[0].size == fixedSize + 28 + 22 + 18)
        #expect(blocks[1].size == fixedSize + 3)
        // Three references in another order, then a new field's literal (17 bytes).
        #expect(blocks[2].size == fixedSize + 3 + 17)
    }

    @Test("SETTINGS_HEADER_TABLE_SIZE: 0 stops indexing with a size update; a small table evicts as the server's does")
    func headerTableSizeSetting() throws {
        let harness = try Harness()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        _ = try harness.request(indexed: [("apns-topic", "com.example.app")])
        _ = try Self.decodeBlocks(harness, &decoder)
        try harness.receive(Self.settings([(HTTP2Wire.Setting.headerTableSize, 0)]))
        _ = try harness.request(indexed: [("apns-topic", "com.example.app")])
        var frames = try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.headers.rawValue }
        var block = try #require(frames.first?.payload)
        #expect(block.getInteger(at: block.readerIndex, as: UInt8.self) == 0x20)
        var fields = try decoder.decodeHeaders(from: &block)
        #expect(fields.first(name: "apns-topic") == "com.example.app")
        #expect(fields.first { $0.name == "apns-topic" }?.indexable == .nonIndexable)

        // Room for one of these two 70-byte entries at a time: each request evicts the other's.
        try harness.receive(Self.settings([(HTTP2Wire.Setting.headerTableSize, 100)]))
        let one = ("x-one", String(repeating: "1", count: 33))
        let two = ("x-two", String(repeating: "2", count: 33))
        for round in 0..<6 {
            _ = try harness.request(indexed: round % 2 == 0 ? [one] : [two])
            _ = try harness.request(indexed: round % 2 == 0 ? [one] : [two])
        }
        frames = try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.headers.rawValue }
        #expect(frames.count == 12)
        for (index, frame) in frames.enumerated() {
            var block = frame.payload
            fields = try decoder.decodeHeaders(from: &block)
            let expected = (index / 2) % 2 == 0 ? one : two
            #expect(fields.first(name: expected.0) == expected.1, "request \(index)")
            // The first of each pair inserts the field, the second refers to it.
            #expect(fields.first { $0.name == expected.0 }?.indexable == .indexable, "request \(index)")
            #expect((index % 2 == 1) == (frame.payload.readableBytes < 40), "request \(index): \(frame.payload.readableBytes) bytes")
        }
    }

    @Test("SETTINGS are acknowledged and MAX_CONCURRENT_STREAMS passed on; a PING is answered with its data")
    func settingsAndPing() throws {
        let harness = try Harness()
        try harness.receive(Self.settings([(HTTP2Wire.Setting.maxConcurrentStreams, 10), (HTTP2Wire.Setting.headerTableSize, 0)]))
        var ping = ByteBuffer()
        ping.writeHTTP2Ping(0xDEAD_BEEF, ack: false)
        try harness.receive(ping)
        let frames = try harness.writtenFrames()
        #expect(frames.count == 2)
        #expect(frames[0].type == HTTP2Wire.FrameType.settings.rawValue && frames[0].has(HTTP2Wire.Flag.ack) && frames[0].payload.readableBytes == 0)
        #expect(frames[1].type == HTTP2Wire.FrameType.ping.rawValue && frames[1].has(HTTP2Wire.Flag.ack))
        #expect(frames[1].payload.getInteger(at: frames[1].payload.readerIndex, as: UInt64.self) == 0xDEAD_BEEF)
        guard case .maxConcurrentStreams(10) = harness.recorder.signals.first else {
            Issue.record("no MAX_CONCURRENT_STREAMS signal: \(harness.recorder.signals)")
            return
        }
        // A server that sets no limit gets the assumed one only on its first SETTINGS.
        try harness.receive(Self.settings([(HTTP2Wire.Setting.maxFrameSize, 20_000)]))
        #expect(harness.recorder.signals.count == 1)
    }

    @Test("a body larger than the server's windows waits for WINDOW_UPDATEs and goes out in order, never beyond them")
    func flowControl() throws {
        let harness = try Harness()
        try harness.receive(Self.settings([(HTTP2Wire.Setting.initialWindowSize, 10)]))
        _ = try harness.writtenFrames()  // the ACK
        let body = String(repeating: "x", count: 25)
        _ = try harness.request(body: body)
        var frames = try harness.writtenFrames()
        #expect(frames.map(\.type) == [HTTP2Wire.FrameType.headers.rawValue, HTTP2Wire.FrameType.data.rawValue])
        #expect(frames[1].payload.readableBytes == 10 && !frames[1].has(HTTP2Wire.Flag.endStream))

        var update = ByteBuffer()
        update.writeHTTP2WindowUpdate(streamID: 1, increment: 12)
        try harness.receive(update)
        frames = try harness.writtenFrames()
        #expect(frames.count == 1 && frames[0].payload.readableBytes == 12 && !frames[0].has(HTTP2Wire.Flag.endStream))

        // Raising the initial window applies to the open stream too.
        try harness.receive(Self.settings([(HTTP2Wire.Setting.initialWindowSize, 100)]))
        frames = try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.data.rawValue }
        #expect(frames.count == 1 && frames[0].payload.readableBytes == 3 && frames[0].has(HTTP2Wire.Flag.endStream))
    }

    @Test("the connection window is shared: a second stream's body waits until the connection gets window back")
    func connectionWindow() throws {
        let harness = try Harness()
        let big = String(repeating: "y", count: 40_000)
        _ = try harness.request(body: big)
        _ = try harness.request(body: big)
        let sent = try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.data.rawValue }
        #expect(sent.reduce(0) { $0 + $1.payload.readableBytes } == HTTP2Wire.defaultWindow)
        var update = ByteBuffer()
        update.writeHTTP2WindowUpdate(streamID: 0, increment: 80_000 - HTTP2Wire.defaultWindow)
        try harness.receive(update)
        let rest = try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.data.rawValue }
        #expect(rest.reduce(0) { $0 + $1.payload.readableBytes } == 80_000 - HTTP2Wire.defaultWindow)
        #expect(rest.last?.streamID == 3 && rest.last?.has(HTTP2Wire.Flag.endStream) == true)
    }

    @Test("REFUSED_STREAM and streams above a GOAWAY's last id fail as safe to retry, the GOAWAY's debug data kept printable; other resets and closes as lost")
    func refusalsAndLosses() throws {
        let harness = try Harness()
        let first = try harness.request()
        let second = try harness.request()
        let third = try harness.request()
        let fourth = try harness.request()
        _ = try harness.writtenFrames()
        var code = ByteBuffer()
        code.writeInteger(HTTP2Wire.ErrorCode.refusedStream)
        try harness.receive(Self.frame(.rstStream, stream: 1, code))
        code.clear()
        code.writeInteger(HTTP2Wire.ErrorCode.cancel)
        try harness.receive(Self.frame(.rstStream, stream: 3, code))
        // GOAWAY with APNs-style debug data, a newline and a control byte in it.
        var goAway = ByteBuffer()
        goAway.writeInteger(UInt32(5))
        goAway.writeInteger(HTTP2Wire.ErrorCode.noError)
        goAway.writeString("{\"reason\":\"Shutdown\"}\n\u{1}")
        try harness.receive(Self.frame(.goAway, stream: 0, goAway))
        let turnedAway = HTTP2TransportError.goingAway(code: 0, debugData: "{\"reason\":\"Shutdown\"}??", connectionAnswered: false)
        #expect(Self.failure(first) == .refused)
        #expect(Self.failure(second) == .lostAfterWrite("stream reset by the server (CANCEL)"))
        #expect(Self.failure(fourth) == turnedAway)
        #expect(turnedAway.outcome == .retry(.provider, code: "goaway_unanswered", after: nil), "nothing was ever answered on this connection")
        #expect(Self.result(third) == nil, "stream 5 is at the GOAWAY's last id: its answer may still come")
        // After GOAWAY no new stream opens.
        #expect(Self.failure(try harness.request()) == turnedAway)
        // The connection closes with stream 5 unanswered: lost after write (it may have been processed).
        try harness.channel.close().wait()
        #expect(Self.failure(third) == .lostAfterWrite("stream closed before an answer"))
    }

    @Test("a lowered MAX_CONCURRENT_STREAMS holds new requests back until streams close; GOAWAY fails the held ones unwritten")
    func loweredStreamLimit() throws {
        var harness = try Harness()
        let first = try harness.request()
        let second = try harness.request()
        _ = try harness.writtenFrames()
        // The server lowers its limit to 2 while both streams are open: the next two requests must wait.
        try harness.receive(Self.settings([(HTTP2Wire.Setting.maxConcurrentStreams, 2)]))
        let third = try harness.request()
        let fourth = try harness.request()
        let afterSettings = try harness.writtenFrames()
        #expect(afterSettings.map(\.type) == [HTTP2Wire.FrameType.settings.rawValue], "only the SETTINGS ACK is written")
        // Stream 1 answers: exactly one waiting request opens a stream (5), the other still waits.
        let headers = try harness.responseHeaders([(":status", "200")])
        try harness.receive(Self.frame(.headers, flags: HTTP2Wire.Flag.endHeaders | HTTP2Wire.Flag.endStream, stream: 1, headers))
        #expect(try Self.result(first)?.get().status == 200)
        let opened = try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.headers.rawValue }
        #expect(opened.map(\.streamID) == [5])
        #expect(Self.result(third) == nil && Self.result(fourth) == nil)
        // GOAWAY after stream 5: the request still waiting was never written, so it is safe to send elsewhere.
        var goAway = ByteBuffer()
        goAway.writeHTTP2GoAway(lastStreamID: 5, code: HTTP2Wire.ErrorCode.noError)
        try harness.receive(goAway)
        let drained = HTTP2TransportError.goingAway(code: 0, debugData: "", connectionAnswered: true)
        #expect(Self.failure(fourth) == drained)
        #expect(drained.outcome == .retry(.safe, code: "goaway", after: nil), "stream 1 was answered: a routine drain")
        #expect(Self.result(second) == nil && Self.result(third) == nil, "streams 3 and 5 may still be answered")
    }

    @Test("a request waiting for a stream fails unwritten at its deadline, and at close")
    func waitingRequestDeadline() throws {
        let harness = try Harness()
        try harness.receive(Self.settings([(HTTP2Wire.Setting.maxConcurrentStreams, 1)]))
        _ = try harness.request()
        // The session compares deadlines with the wall clock: one already past expires at the timer's next run.
        let late = try harness.request(deadline: .now() - .milliseconds(1))
        let held = try harness.request()
        _ = try harness.writtenFrames()
        harness.channel.embeddedEventLoop.advanceTime(to: .now())  // the embedded clock to the wall clock
        #expect(Self.failure(late) == .notWritten("no stream was free before the deadline"))
        #expect(Self.result(held) == nil)
        harness.channel.pipeline.fireChannelInactive()
        #expect(Self.failure(held) == .notWritten("connection closed"))
    }

    @Test("a request still in the tick's buffer when the connection closes was never written")
    func closedBeforeFlush() throws {
        let harness = try Harness()
        let answer = try harness.request()
        harness.channel.pipeline.fireChannelInactive()
        #expect(Self.failure(answer) == .notWritten("connection closed"))
    }

    @Test("padded HEADERS with a priority, continued in CONTINUATION frames, are decoded")
    func continuationAndPadding() throws {
        var harness = try Harness()
        let answer = try harness.request()
        _ = try harness.writtenFrames()
        var block = try harness.responseHeaders([(":status", "200"), ("apns-id", String(repeating: "a", count: 200))])
        let head = block.readSlice(length: 50) ?? ByteBuffer()
        var headers = ByteBuffer()
        headers.writeInteger(UInt8(3))  // pad length
        headers.writeBytes([0, 0, 0, 0, 16])  // priority: dependency and weight
        headers.writeImmutableBuffer(head)
        headers.writeBytes([0, 0, 0])
        var bytes = Self.frame(.headers, flags: HTTP2Wire.Flag.padded | HTTP2Wire.Flag.priority, stream: 1, headers)
        bytes.writeImmutableBuffer(Self.frame(.continuation, stream: 1, block.readSlice(length: 60) ?? ByteBuffer()))
        bytes.writeImmutableBuffer(Self.frame(.continuation, flags: HTTP2Wire.Flag.endHeaders, stream: 1, block))
        bytes.writeImmutableBuffer(Self.frame(.data, flags: HTTP2Wire.Flag.endStream, stream: 1))
        // Delivered a few bytes at a time: frames split across reads wait for the rest.
        while bytes.readableBytes > 0 {
            try harness.receive(bytes.readSlice(length: min(7, bytes.readableBytes)) ?? ByteBuffer())
        }
        let response = try #require(try Self.result(answer)?.get())
        #expect(response.status == 200 && response.headers.first(name: "apns-id")?.count == 200)
    }

    @Test("a protocol breach closes the connection with a GOAWAY naming it, and the open request fails")
    func protocolBreach() throws {
        let harness = try Harness()
        let answer = try harness.request()
        _ = try harness.writtenFrames()
        // HEADERS without END_HEADERS, then a DATA frame instead of its CONTINUATION.
        var bytes = Self.frame(.headers, stream: 1, ByteBuffer(bytes: [0x88]))
        bytes.writeImmutableBuffer(Self.frame(.data, stream: 1))
        try harness.receive(bytes)
        let frames = try harness.writtenFrames()
        #expect(frames.last?.type == HTTP2Wire.FrameType.goAway.rawValue)
        #expect(frames.last.flatMap { $0.payload.getInteger(at: $0.payload.readerIndex + 4, as: UInt32.self) } == HTTP2Wire.ErrorCode.protocolError)
        #expect(!harness.channel.isActive)
        #expect(Self.failure(answer) == .lostAfterWrite("stream closed before an answer"))
        #expect(harness.recorder.errors.count == 1)
    }

    @Test("a frame longer than the announced maximum is a FRAME_SIZE_ERROR")
    func oversizedFrame() throws {
        let harness = try Harness()
        try harness.receive(Self.frame(.data, stream: 1, ByteBuffer(repeating: 0, count: HTTP2Wire.defaultMaxFrameSize + 1)))
        let frames = try harness.writtenFrames()
        #expect(frames.last.flatMap { $0.payload.getInteger(at: $0.payload.readerIndex + 4, as: UInt32.self) } == HTTP2Wire.ErrorCode.frameSizeError)
        #expect(!harness.channel.isActive)
    }

    @Test("received DATA is given back: the connection window once half is used, whatever the stream")
    func receiveWindowIsReplenished() throws {
        let harness = try Harness()
        _ = try harness.request()
        _ = try harness.writtenFrames()
        let chunk = ByteBuffer(repeating: 1, count: 16_000)
        for _ in 0..<3 { try harness.receive(Self.frame(.data, stream: 1, chunk)) }
        let updates = try harness.writtenFrames().filter { $0.type == HTTP2Wire.FrameType.windowUpdate.rawValue }
        #expect(updates.count == 1 && updates[0].streamID == 0)
        #expect(updates.first.flatMap { $0.payload.getInteger(at: $0.payload.readerIndex, as: UInt32.self) } == 48_000)
    }

    static func failure(_ future: EventLoopFuture<HTTP2Response>) -> HTTP2TransportError? {
        guard case .failure(let error) = result(future) else { return nil }
        return error as? HTTP2TransportError
    }
}

@Suite("HTTP/2 header blocks")
struct HTTP2HeaderBlockTests {
    @Test("static entries, static names and literal names, short and long values, read back by NIOHPACK's decoder")
    func roundTrip() throws {
        var block = HTTP2HeaderBlock()
        block.add(.methodPOST)
        block.add(.schemeHTTPS)
        block.add(.authority, value: "api.push.apple.com")
        block.add(.path, value: "/3/device/", String(repeating: "f", count: 64))
        block.add(.authorization, value: "bearer ", String(repeating: "j", count: 300))
        block.add(name: "apns-topic", value: "com.example", ".voip")
        block.add(name: "apns-id", value: "")
        var bytes = block.bytes
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let headers = try decoder.decodeHeaders(from: &bytes)
        #expect(Array(headers.map(\.name)) == [":method", ":scheme", ":authority", ":path", "authorization", "apns-topic", "apns-id"])
        #expect(headers.first(name: ":method") == "POST" && headers.first(name: ":scheme") == "https")
        #expect(headers.first(name: ":path") == "/3/device/" + String(repeating: "f", count: 64))
        #expect(headers.first(name: "authorization") == "bearer " + String(repeating: "j", count: 300))
        #expect(headers.first(name: "apns-topic") == "com.example.voip")
        #expect(headers.first(name: "apns-id") == "")
        // Every literal is sent without indexing: nothing enters the server's table, so the block is valid on any
        // connection.
        #expect(headers.filter { !$0.name.hasPrefix(":m") && !$0.name.hasPrefix(":s") }.allSatisfy { $0.indexable == .nonIndexable })
    }

    @Test("generic headers convert field by field, in order")
    func fromHPACKHeaders() throws {
        let block = HTTP2HeaderBlock([":method": "GET", ":scheme": "https", ":path": "/token", "content-type": "application/json", "x-custom": "1"])
        var bytes = block.bytes
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let headers = try decoder.decodeHeaders(from: &bytes)
        #expect(Array(headers.map(\.value)) == ["GET", "https", "/token", "application/json", "1"])
    }
}

@Suite("The host name a server certificate must name")
struct CertificateNamesTests {
    @Test("a name matches itself or one wildcard label, case and a trailing dot aside; IP-only certificates cover no name")
    func matching() {
        let names = CertificateNames(dnsNames: ["api.push.apple.com", "*.example.net"], hasAlternativeNames: true)
        #expect(names.allows(hostname: "api.push.apple.com"))
        #expect(names.allows(hostname: "API.Push.Apple.com."))
        #expect(names.allows(hostname: "fcm.example.net"))
        #expect(!names.allows(hostname: "a.b.example.net"))
        #expect(!names.allows(hostname: "example.net"))
        #expect(!names.allows(hostname: "api.push.apple.com.evil.example"))
        #expect(!names.allows(hostname: "gateway.push.apple.com"))
        // Only an IP address: the name asked for is not among its names.
        #expect(!CertificateNames(dnsNames: [], hasAlternativeNames: true).allows(hostname: "api.push.apple.com"))
        // No alternative names at all: swift-nio-ssl judged the common name already.
        #expect(CertificateNames(dnsNames: [], hasAlternativeNames: false).allows(hostname: "api.push.apple.com"))
        #expect(IPAddressLiteral.isAddress("127.0.0.1") && IPAddressLiteral.isAddress("[::1]") && !IPAddressLiteral.isAddress("localhost"))
    }
}
