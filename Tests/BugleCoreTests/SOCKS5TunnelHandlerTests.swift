@testable import BugleHTTP2
import BugleCore
import NIOCore
import NIOEmbedded
import Testing

/// The SOCKS5 client handshake byte by byte (RFC 1928, RFC 1929) on an in-memory channel: what Bugle writes, how it
/// reads answers that arrive in pieces, and what each refusal becomes.
@Suite("SOCKS5 tunnel handshake")
struct SOCKS5TunnelHandlerTests {
    /// Records what the handlers behind the tunnel handler see.
    final class Behind: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var active = false
        var reads: [[UInt8]] = []
        var errors: [any Error] = []
        func channelActive(context: ChannelHandlerContext) { active = true }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { reads.append(Array(buffer: unwrapInboundIn(data))) }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
    }

    static func channel(credentials: String?) throws -> (EmbeddedChannel, Behind) {
        let behind = Behind()
        let channel = EmbeddedChannel()
        let proxy = HTTPProxy.socks5(host: "127.0.0.1", port: 1080, credentials: credentials)
        try channel.pipeline.syncOperations.addHandler(SOCKS5TunnelHandler(proxy: proxy, host: "api.push.apple.com", port: 443, timeout: .seconds(5)))
        try channel.pipeline.syncOperations.addHandler(behind)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1080)).wait()
        return (channel, behind)
    }

    static func written(_ channel: EmbeddedChannel) throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += Array(buffer: buffer) }
        return bytes
    }

    static let connectRequest: [UInt8] = [5, 1, 0, 3, 18] + Array("api.push.apple.com".utf8) + [0x01, 0xBB]

    @Test("with credentials: offers both methods, sends them when chosen, asks for the provider by name; replies read in pieces; the rest passes on")
    func withCredentials() throws {
        let (channel, behind) = try Self.channel(credentials: "bob:s3cret")
        #expect(try Self.written(channel) == [5, 2, 0, 2])
        #expect(!behind.active)
        try channel.writeInbound(ByteBuffer(bytes: [5]))
        #expect(try Self.written(channel).isEmpty)
        try channel.writeInbound(ByteBuffer(bytes: [2]))
        #expect(try Self.written(channel) == [1, 3] + Array("bob".utf8) + [6] + Array("s3cret".utf8))
        try channel.writeInbound(ByteBuffer(bytes: [1, 0]))
        #expect(try Self.written(channel) == Self.connectRequest)
        // A reply bound to a domain name, split mid-address, with the first bytes of TLS right behind it.
        try channel.writeInbound(ByteBuffer(bytes: [5, 0, 0, 3, 4] + Array("ab".utf8)))
        #expect(!behind.active)
        try channel.writeInbound(ByteBuffer(bytes: Array("cd".utf8) + [0x01, 0xBB, 0x16, 0x03]))
        #expect(behind.active && behind.reads == [[0x16, 0x03]] && behind.errors.isEmpty)
        #expect(throws: (any Error).self) { try channel.pipeline.syncOperations.handler(type: SOCKS5TunnelHandler.self) }
        _ = try channel.finish()
    }

    @Test("without credentials: offers only no-authentication and connects at once; an IPv4-bound reply in one piece")
    func withoutCredentials() throws {
        let (channel, behind) = try Self.channel(credentials: nil)
        #expect(try Self.written(channel) == [5, 1, 0])
        try channel.writeInbound(ByteBuffer(bytes: [5, 0]))
        #expect(try Self.written(channel) == Self.connectRequest)
        try channel.writeInbound(ByteBuffer(bytes: [5, 0, 0, 1, 10, 0, 0, 1, 0x30, 0x39]))
        #expect(behind.active && behind.reads.isEmpty)
        _ = try channel.finish()
    }

    static func failure(credentials: String?, answers: [[UInt8]]) throws -> HTTPProxyError? {
        let (channel, behind) = try Self.channel(credentials: credentials)
        for answer in answers where channel.isActive { try channel.writeInbound(ByteBuffer(bytes: answer)) }
        #expect(!behind.active)
        return behind.errors.first as? HTTPProxyError
    }

    @Test("refusals: credentials asked for or rejected and a ruleset refusal are configuration; a refused or unreachable host is an outage")
    func refusals() throws {
        let asks = try #require(try Self.failure(credentials: nil, answers: [[5, 0xFF]]))
        #expect(asks.isConfiguration && asks.description.contains("asks for credentials: set proxy_credentials_env"), "\(asks)")
        let rejected = try #require(try Self.failure(credentials: "bob:wrong", answers: [[5, 2], [1, 1]]))
        #expect(rejected.isConfiguration && rejected.description.contains("rejected the user name and password"), "\(rejected)")
        #expect(!rejected.description.contains("wrong") && rejected.description.hasPrefix("the proxy socks5h://127.0.0.1:1080 (with credentials)"))
        let ruleset = try #require(try Self.failure(credentials: nil, answers: [[5, 0], [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]]))
        #expect(ruleset.isConfiguration && ruleset.description.contains("connection not allowed by ruleset (tunnel to api.push.apple.com:443)"), "\(ruleset)")
        let refused = try #require(try Self.failure(credentials: nil, answers: [[5, 0], [5, 5, 0, 1, 0, 0, 0, 0, 0, 0]]))
        #expect(!refused.isConfiguration && refused.description.contains("refused the connection: connection refused"), "\(refused)")
        let notSOCKS = try #require(try Self.failure(credentials: nil, answers: [Array("HTTP/1.1 400 Bad Request\r\n".utf8)]))
        #expect(notSOCKS.kind == .malformedAnswer && notSOCKS.description.contains("did not answer as a SOCKS5 proxy"), "\(notSOCKS)")
    }
}
