import NIOCore
import NIOTLS

/// One feedback connection of the legacy simulator: once the client's certificate was accepted, writes
/// every queued `(time, token length, token)` tuple, empties the list, and closes. Input is ignored.
final class LegacyAPNsFeedbackHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let ledger: LegacyAPNsSimulatorLedger

    init(ledger: LegacyAPNsSimulatorLedger) {
        self.ledger = ledger
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            let tuples = ledger.takeFeedback()
            var buffer = context.channel.allocator.buffer(capacity: tuples.reduce(0) { $0 + 6 + $1.token.count })
            for tuple in tuples {
                buffer.writeInteger(tuple.time)
                buffer.writeInteger(UInt16(tuple.token.count))
                buffer.writeBytes(tuple.token)
            }
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in
                channel.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
