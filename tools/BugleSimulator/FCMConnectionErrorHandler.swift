import Logging
import NIOCore
import NIOHTTP2

/// Last handler of an FCM simulator HTTP/2 connection: swallows stream-level errors (NIOHTTP2 has already
/// reset the stream) and closes the connection, a moment later, on connection-level errors.
final class FCMConnectionErrorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Root-stream frames (SETTINGS, PING, GOAWAY) end here; nothing to do.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is NIOHTTP2Errors.StreamError || error is NIOHTTP2Errors.StreamClosed
            || error is NIOHTTP2Errors.RaisedGoawayLastStreamID || error is NIOHTTP2Errors.IOOnClosedConnection
        {
            return
        }
        // Said, so a client that sees the connection closed under it can be told why.
        logger.notice("closing a connection after a connection error", metadata: ["error": "\(error)"])
        // NIOHTTP2 has written GOAWAY for a connection error; closing at once with unread client data would make
        // the kernel send a TCP RST that can destroy that GOAWAY in flight.
        let channel = context.channel
        context.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }
}
