import Logging
import NIOCore
import NIOHTTP2

/// Last handler of a simulator connection: counts `MAX_CONCURRENT_STREAMS` violations (NIOHTTP2 answers
/// them with GOAWAY PROTOCOL_ERROR) and closes the connection on connection-level errors.
final class APNsConnectionErrorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let ledger: APNsSimulatorLedger
    private let logger: Logger

    init(ledger: APNsSimulatorLedger, logger: Logger) {
        self.ledger = ledger
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Root-stream frames (SETTINGS, PING, GOAWAY) end here; nothing to do.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Stream errors (NIOHTTP2 already sent RST_STREAM) and GOAWAY bookkeeping errors must not take the
        // other streams down.
        if error is NIOHTTP2Errors.StreamError || error is NIOHTTP2Errors.StreamClosed
            || error is NIOHTTP2Errors.RaisedGoawayLastStreamID || error is NIOHTTP2Errors.IOOnClosedConnection
        {
            return
        }
        if error is NIOHTTP2Errors.MaxStreamsViolation {
            ledger.updateCounters { $0.maxConcurrentStreamsViolations += 1 }
        }
        // Said, so a client that sees the connection closed under it can be told why.
        logger.notice("closing a connection after a connection error", metadata: ["error": "\(error)"])
        // NIOHTTP2 has written GOAWAY for a connection error. Close a moment later rather than at once: closing
        // with unread client data makes the kernel send a TCP RST, which can destroy that GOAWAY in flight.
        let channel = context.channel
        context.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }
}
