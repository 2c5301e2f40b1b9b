import BugleCore
import BugleLegacyAPNs
import NIOCore
import NIOEmbedded
import Testing

@Suite("Legacy APNs: command-2 frame encoding")
struct LegacyAPNSFrameTests {
    @Test("a frame is byte for byte PROTOCOLS.md §3.2: command 2, frame length, items 1-5 big-endian")
    func frameBytes() {
        let token = (0..<32).map { UInt8($0) }
        let payload = Array(#"{"aps":{}}"#.utf8)
        let notification = LegacyAPNSNotification(
            token: token, payload: payload, identifier: 0x0102_0304, expiry: 0x5F5E_0FF0, priority: 10
        )
        let expected: [UInt8] =
            [0x02, 0x00, 0x00, 0x00, 0x42]  // command 2, frame_len 66
            + [0x01, 0x00, 0x20] + token  // item 1: device token, 32 bytes
            + [0x02, 0x00, 0x0A] + payload  // item 2: payload, 10 bytes
            + [0x03, 0x00, 0x04, 0x01, 0x02, 0x03, 0x04]  // item 3: identifier
            + [0x04, 0x00, 0x04, 0x5F, 0x5E, 0x0F, 0xF0]  // item 4: expiration
            + [0x05, 0x00, 0x01, 0x0A]  // item 5: priority 10
        #expect(notification.encoded() == expected)
        #expect(notification.encodedLength == 71)
        #expect(notification.frameDataLength == 66)
    }

    @Test("priority 5 and a 2048-byte payload: the payload length is a big-endian u16, frame length u32")
    func largePayload() {
        let payload = [UInt8](repeating: UInt8(ascii: "x"), count: 2048)
        let bytes = LegacyAPNSNotification(token: [UInt8](repeating: 0xAB, count: 32), payload: payload, identifier: 7, expiry: 0, priority: 5).encoded()
        #expect(Array(bytes[0..<5]) == [0x02, 0x00, 0x00, 0x08, 0x38])  // 56 + 2048 = 2104 = 0x0838
        #expect(Array(bytes[40..<43]) == [0x02, 0x08, 0x00])
        #expect(bytes.last == 5)
        #expect(bytes.count == 5 + 2104)
    }

    @Test("hex tokens: decode either case, refuse odd length and non-hex, encode lowercase")
    func hex() {
        #expect(LegacyAPNSHex.decode("00ff10Ab") == [0x00, 0xFF, 0x10, 0xAB])
        #expect(LegacyAPNSHex.decode("abc") == nil)
        #expect(LegacyAPNSHex.decode("zz") == nil)
        #expect(LegacyAPNSHex.encode([0x00, 0xFF, 0xAB]) == "00ffab")
    }
}

@Suite("Legacy APNs: error-response decoding")
struct LegacyAPNSErrorResponseTests {
    static let wire: [UInt8] = [0x08, 0x08, 0xDE, 0xAD, 0xBE, 0xEF]

    @Test("6 bytes: command 8, status, identifier")
    func whole() throws {
        var buffer = ByteBuffer(bytes: Self.wire)
        let response = try LegacyAPNSErrorResponse.decode(from: &buffer)
        #expect(response == LegacyAPNSErrorResponse(status: .invalidToken, identifier: 0xDEAD_BEEF))
        #expect(buffer.readableBytes == 0)
        #expect(response?.encoded() == Self.wire)
    }

    @Test("fewer than 6 bytes consume nothing; a wrong command byte is an error")
    func partialAndWrong() throws {
        for length in 0..<6 {
            var buffer = ByteBuffer(bytes: Self.wire.prefix(length))
            #expect(try LegacyAPNSErrorResponse.decode(from: &buffer) == nil)
            #expect(buffer.readableBytes == length)
        }
        var wrong = ByteBuffer(bytes: [0x02, 0, 0, 0, 0, 0])
        #expect(throws: LegacyAPNSErrorResponse.UnexpectedCommand(command: 2)) { try LegacyAPNSErrorResponse.decode(from: &wrong) }
    }

    @Test("through the channel decoder: every split of the 6 bytes, and byte by byte, yields exactly one response")
    func splitReads() throws {
        for split in 1..<6 {
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyAPNSErrorResponseDecoder()))
            try channel.writeInbound(ByteBuffer(bytes: Self.wire[0..<split]))
            #expect(try channel.readInbound(as: LegacyAPNSErrorResponse.self) == nil)
            try channel.writeInbound(ByteBuffer(bytes: Self.wire[split...]))
            #expect(try channel.readInbound(as: LegacyAPNSErrorResponse.self) == LegacyAPNSErrorResponse(status: .invalidToken, identifier: 0xDEAD_BEEF))
            #expect(try channel.readInbound(as: LegacyAPNSErrorResponse.self) == nil)
            #expect(try channel.finish().isClean)
        }
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LegacyAPNSErrorResponseDecoder()))
        let shutdown: [UInt8] = [0x08, 0x0A, 0x00, 0x00, 0x01, 0x00]
        for byte in Self.wire + shutdown {
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
        }
        #expect(try channel.readInbound(as: LegacyAPNSErrorResponse.self)?.status == .invalidToken)
        #expect(try channel.readInbound(as: LegacyAPNSErrorResponse.self) == LegacyAPNSErrorResponse(status: .shutdown, identifier: 256))
        #expect(try channel.finish().isClean)
    }

    @Test("the status table: 8 deactivates, payload/token faults reject, topic/protocol faults halt, the rest retry")
    func classifier() {
        #expect(LegacyAPNSErrorClassifier.classify(.invalidToken) == .invalidToken(code: "InvalidToken", invalidSince: nil))
        for status in [LegacyAPNSStatus.missingDeviceToken, .missingPayload, .invalidTokenSize, .invalidPayloadSize] {
            #expect(LegacyAPNSErrorClassifier.classify(status) == .rejected(code: status.name))
        }
        for status in [LegacyAPNSStatus.missingTopic, .invalidTopicSize, .protocolError] {
            guard case .halt(let code, _) = LegacyAPNSErrorClassifier.classify(status) else {
                Issue.record("\(status) should halt")
                continue
            }
            #expect(code == status.name)
        }
        #expect(LegacyAPNSErrorClassifier.classify(.processingError) == .retry(.recipient, code: "ProcessingError", after: nil))
        #expect(LegacyAPNSErrorClassifier.classify(.unknown) == .retry(.recipient, code: "Unknown", after: nil))
        #expect(LegacyAPNSErrorClassifier.classify(LegacyAPNSStatus(rawValue: 42)) == .retry(.recipient, code: "Status42", after: nil))
    }
}

@Suite("Legacy APNs: resend buffer state machine")
struct LegacyAPNSResendBufferTests {
    /// A buffer holding identifiers 1...n, all written at time 0.
    static func written(_ n: Int) -> LegacyAPNSResendBuffer<UInt32> {
        var buffer = LegacyAPNSResendBuffer<UInt32>()
        var last = -1
        for identifier in 1...UInt32(n) { last = buffer.append(identifier: identifier, element: identifier) }
        buffer.markWritten(through: last, at: .uptimeNanoseconds(0))
        return buffer
    }

    @Test("error at k: before k delivered, k failed, after k resent once; nothing at or before k resent", arguments: [1, 5, 10])
    func errorAtK(k: Int) {
        var buffer = Self.written(10)
        let resolution = buffer.errorResponse(LegacyAPNSErrorResponse(status: .invalidToken, identifier: UInt32(k)))
        #expect(resolution.delivered == Array(1..<UInt32(k)))
        #expect(resolution.failed == UInt32(k))
        #expect(resolution.resend == Array(UInt32(k + 1)..<11))
        #expect(Set(resolution.resend).count == resolution.resend.count)
        #expect(resolution.resend.allSatisfy { $0 > UInt32(k) })
        #expect(!resolution.identifierUnknown)
        #expect(buffer.isEmpty)
        // The connection is over: nothing is left to resend or resolve twice.
        #expect(buffer.connectionClosed().isEmpty)
    }

    @Test("status 10 (shutdown) names the last processed notification: it is delivered, only what follows is resent")
    func shutdown() {
        var buffer = Self.written(6)
        let resolution = buffer.errorResponse(LegacyAPNSErrorResponse(status: .shutdown, identifier: 4))
        #expect(resolution.delivered == [1, 2, 3, 4])
        #expect(resolution.failed == nil)
        #expect(resolution.resend == [5, 6])
    }

    @Test("resent entries on the next connection: a second error resends only what followed it there")
    func secondError() {
        var first = Self.written(8)
        let resend = first.errorResponse(LegacyAPNSErrorResponse(status: .invalidToken, identifier: 3)).resend
        #expect(resend == [4, 5, 6, 7, 8])
        var second = LegacyAPNSResendBuffer<UInt32>()
        for identifier in resend { second.append(identifier: identifier, element: identifier) }
        let again = second.errorResponse(LegacyAPNSErrorResponse(status: .invalidToken, identifier: 6))
        #expect(again.delivered == [4, 5])
        #expect(again.failed == 6)
        #expect(again.resend == [7, 8])
    }

    @Test("an identifier not in the buffer: everything buffered was discarded and is resent")
    func unknownIdentifier() {
        var buffer = Self.written(3)
        let resolution = buffer.errorResponse(LegacyAPNSErrorResponse(status: .invalidToken, identifier: 99))
        #expect(resolution.identifierUnknown)
        #expect(resolution.delivered.isEmpty && resolution.failed == nil)
        #expect(resolution.resend == [1, 2, 3])
    }

    @Test("quiet period: only entries written at least that long ago are confirmed; unwritten ones never")
    func quietPeriod() {
        var buffer = LegacyAPNSResendBuffer<UInt32>()
        let a = buffer.append(identifier: 1, element: 1)
        buffer.append(identifier: 2, element: 2)
        buffer.markWritten(through: a, at: .uptimeNanoseconds(1_000_000_000))
        let c = buffer.append(identifier: 3, element: 3)
        #expect(buffer.confirm(now: .uptimeNanoseconds(1_400_000_000), quietPeriod: .milliseconds(500)).isEmpty)
        #expect(buffer.confirm(now: .uptimeNanoseconds(1_500_000_000), quietPeriod: .milliseconds(500)) == [1])
        // 2 and 3 have not reached the socket yet.
        #expect(buffer.confirm(now: .uptimeNanoseconds(9_000_000_000), quietPeriod: .milliseconds(500)).isEmpty)
        buffer.markWritten(through: c, at: .uptimeNanoseconds(9_000_000_000))
        #expect(buffer.oldestWrite == .uptimeNanoseconds(9_000_000_000))
        #expect(buffer.confirm(now: .uptimeNanoseconds(9_500_000_000), quietPeriod: .milliseconds(500)) == [2, 3])
        #expect(buffer.isEmpty)
    }

    @Test("a silent close leaves every unconfirmed entry (and only those) for the ambiguous policy")
    func silentClose() {
        var buffer = Self.written(5)
        #expect(buffer.confirm(now: .uptimeNanoseconds(500_000_000), quietPeriod: .milliseconds(500)) == [1, 2, 3, 4, 5])
        let late = buffer.append(identifier: 6, element: 6)
        buffer.append(identifier: 7, element: 7)
        buffer.markWritten(through: late, at: .uptimeNanoseconds(600_000_000))
        #expect(buffer.connectionClosed() == [6, 7])
        #expect(buffer.isEmpty)
    }
}

@Suite("Legacy APNs: feedback tuples")
struct LegacyAPNSFeedbackTupleTests {
    @Test("tuples decode in order; a trailing partial tuple stays buffered")
    func decode() {
        let first = LegacyAPNSFeedbackTuple(time: 1_700_000_000, token: [UInt8](repeating: 0xDE, count: 32))
        let second = LegacyAPNSFeedbackTuple(time: 1_700_000_100, token: [0x01, 0x02])
        var buffer = ByteBuffer()
        first.encode(into: &buffer)
        second.encode(into: &buffer)
        #expect(Array(buffer.readableBytesView.prefix(6)) == [0x65, 0x53, 0xF1, 0x00, 0x00, 0x20])
        buffer.writeBytes([0x00, 0x00])
        #expect(LegacyAPNSFeedbackTuple.decodeAll(from: &buffer) == [first, second])
        #expect(buffer.readableBytes == 2)
        #expect(first.tokenHex == String(repeating: "de", count: 32))
        #expect(first.since == Instant(secondsSince1970: 1_700_000_000))
    }
}

@Suite("Legacy APNs: providers file section")
struct LegacyAPNSSettingsTests {
    @Test("legacy_apns: payload_limit defaults to 2048, quiet_period to 0.5 s and takes durations; out of range is refused")
    func quietPeriod() throws {
        let base = "legacy_apns: { host: 127.0.0.1, cert_file: c.pem, key_file: c.key"
        let defaults = try #require(try ProviderSettingsLoader.load(yaml: base + " }", path: "/tmp/p.yaml").legacyAPNs)
        #expect(defaults.payloadLimit == 2048)
        #expect(defaults.quietPeriodSeconds == 0.5)
        #expect(defaults.enabled && defaults.port == 2195 && defaults.feedbackPort == 2196)
        let set = try ProviderSettingsLoader.load(yaml: base + ", quiet_period: 200ms, payload_limit: 256 }", path: "/tmp/p.yaml").legacyAPNs
        #expect(set?.quietPeriodSeconds == 0.2)
        #expect(set?.payloadLimit == 256)
        #expect(throws: ConfigurationError.self) {
            try ProviderSettingsLoader.load(yaml: base + ", quiet_period: 0 }", path: "/tmp/p.yaml")
        }
    }
}
