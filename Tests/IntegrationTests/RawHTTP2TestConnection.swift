import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// An HTTP/2 client connection at the frame level, over TLS with ALPN `h2`, for tests that need frames no ordinary
/// client writes together (a request and its RST_STREAM in one write). Header blocks are HPACK literals without
/// indexing; it sends nothing on its own (no SETTINGS ACK, no WINDOW_UPDATE). Test-only.
final class RawHTTP2TestConnection: Sendable {
    /// One frame read from the server.
    struct Frame: Sendable, Equatable {
        var type: UInt8
        var flags: UInt8
        var streamID: UInt32
        var payload: [UInt8]
    }

    struct ConnectionError: Error, CustomStringConvertible {
        var description: String
    }

    static let data: UInt8 = 0x0
    static let headers: UInt8 = 0x1
    static let rstStream: UInt8 = 0x3
    static let settings: UInt8 = 0x4
    static let goAway: UInt8 = 0x7

    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let received: NIOLockedValueBox<(bytes: [UInt8], closed: Bool)>

    /// Connects to 127.0.0.1:`port` and sends the connection preface and an empty SETTINGS frame.
    /// - Parameters:
    ///   - port: The server's port.
    ///   - caPEM: The CA that signed the server's certificate.
    /// - Throws: Connection or TLS errors, or ``ConnectionError`` when ALPN did not settle on `h2`.
    init(port: Int, caPEM: String) async throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let received = NIOLockedValueBox<(bytes: [UInt8], closed: Bool)>(([], false))
        let handshake = group.next().makePromise(of: String?.self)
        do {
            channel = try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                        try channel.pipeline.syncOperations.addHandler(Collector(received: received, handshake: handshake))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
            guard try await handshake.futureResult.get() == "h2" else {
                throw ConnectionError(description: "ALPN did not negotiate h2")
            }
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        self.group = group
        self.received = received
        var preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        preface += Self.frame(type: Self.settings, flags: 0, streamID: 0, payload: [])
        try await write(preface)
    }

    /// Writes `bytes` in one write and flush.
    func write(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    /// The bytes of one frame.
    static func frame(type: UInt8, flags: UInt8, streamID: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        var bytes: [UInt8] = [UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        bytes += [type, flags]
        bytes += withUnsafeBytes(of: (streamID & 0x7FFF_FFFF).bigEndian, Array.init)
        return bytes + payload
    }

    /// A request: HEADERS (END_HEADERS, its fields as HPACK literals without indexing, names and values under 127 bytes)
    /// and one DATA frame with END_STREAM.
    static func request(streamID: UInt32, fields: [(String, String)], body: [UInt8]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            precondition(name.utf8.count < 127 && value.utf8.count < 127)
            block += [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return frame(type: headers, flags: 0x4, streamID: streamID, payload: block)
            + frame(type: data, flags: 0x1, streamID: streamID, payload: body)
    }

    /// RST_STREAM with CANCEL, as a client sends when it stops waiting for an answer.
    static func cancel(streamID: UInt32) -> [UInt8] {
        frame(type: rstStream, flags: 0, streamID: streamID, payload: [0, 0, 0, 0x8])
    }

    /// The complete frames read so far, and whether the server closed the connection.
    func frames() -> (frames: [Frame], closed: Bool) {
        let (bytes, closed) = received.withLockedValue { $0 }
        var frames: [Frame] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            guard index + 9 + length <= bytes.count else { break }
            let streamID = bytes[(index + 5)..<(index + 9)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
            frames.append(Frame(type: bytes[index + 3], flags: bytes[index + 4], streamID: streamID, payload: Array(bytes[(index + 9)..<(index + 9 + length)])))
            index += 9 + length
        }
        return (frames, closed)
    }

    /// Waits until `done` holds for what was read (or the connection closed, or `timeout` passed).
    func wait(upTo timeout: Duration, until done: ([Frame]) -> Bool) async throws -> (frames: [Frame], closed: Bool) {
        let end = ContinuousClock.now + timeout
        while true {
            let state = frames()
            if done(state.frames) || state.closed || ContinuousClock.now >= end { return state }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Closes the connection and its event loop.
    func close() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        private let received: NIOLockedValueBox<(bytes: [UInt8], closed: Bool)>
        private let handshake: EventLoopPromise<String?>

        init(received: NIOLockedValueBox<(bytes: [UInt8], closed: Bool)>, handshake: EventLoopPromise<String?>) {
            self.received = received
            self.handshake = handshake
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            received.withLockedValue { $0.bytes += buffer.readableBytesView }
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted(let negotiated) = event { handshake.succeed(negotiated) }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            received.withLockedValue { $0.closed = true }
            handshake.fail(ConnectionError(description: "closed before the TLS handshake completed"))
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            handshake.fail(error)
            context.close(promise: nil)
        }
    }
}
