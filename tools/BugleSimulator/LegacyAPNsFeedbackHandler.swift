import NIOCore
import NIOTLS

/// One feedback connection of the legacy simulator: once the client's certificate was accepted, writes
/// every queued `(time, token length, token)` tuple, empties the list, and closes. Input is ignored. A
/// ``LegacyAPNsSimulatorConfiguration/FeedbackCut`` ends the stream early: mid-tuple with a close, or by stalling.
final class LegacyAPNsFeedbackHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let ledger: LegacyAPNsSimulatorLedger
    private let cut: LegacyAPNsSimulatorConfiguration.FeedbackCut?

    init(ledger: LegacyAPNsSimulatorLedger, cut: LegacyAPNsSimulatorConfiguration.FeedbackCut? = nil) {
        self.ledger = ledger
        self.cut = cut
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            let tuples = ledger.takeFeedback()
            var buffer = context.channel.allocator.buffer(capacity: tuples.reduce(0) { $0 + 6 + $1.token.count })
            let whole: Int
            switch cut {
            case .none: whole = tuples.count
            case .midTuple(let after), .stall(let after): whole = min(after, tuples.count)
            }
            for tuple in tuples.prefix(whole) {
                Self.write(tuple, into: &buffer)
            }
            if case .midTuple = cut {
                var next = context.channel.allocator.buffer(capacity: 38)
                if whole < tuples.count {
                    Self.write(tuples[whole], into: &next)
                } else {
                    next.writeInteger(UInt32(0))
                }
                buffer.writeBytes(next.readableBytesView.prefix(next.readableBytes / 2))
            }
            let channel = context.channel
            let close = cut.map { if case .stall = $0 { false } else { true } } ?? true
            context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in
                if close { channel.close(promise: nil) }
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    private static func write(_ tuple: (time: UInt32, token: [UInt8]), into buffer: inout ByteBuffer) {
        buffer.writeInteger(tuple.time)
        buffer.writeInteger(UInt16(tuple.token.count))
        buffer.writeBytes(tuple.token)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
