import NIOCore
import NIOSSL

/// One gateway connection of the legacy simulator: parses packets as they arrive, accepts the good ones
/// silently, and on the first bad one (or an injected fault) answers the 6-byte error response and stops
/// reading — everything after it on the connection is discarded, as the real gateway does.
final class LegacyAPNsGatewayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase {
        case reading
        /// An error response was written; input is discarded until the client closes or the linger ends.
        case lingering
        case closed
    }

    private let connectionID: Int
    private let parser: LegacyAPNsFrameParser
    private let ledger: LegacyAPNsSimulatorLedger
    private let linger: TimeAmount
    private var received: ByteBuffer?
    private var phase = Phase.reading

    init(connectionID: Int, parser: LegacyAPNsFrameParser, ledger: LegacyAPNsSimulatorLedger, linger: TimeAmount) {
        self.connectionID = connectionID
        self.parser = parser
        self.ledger = ledger
        self.linger = linger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .reading = phase else { return }
        var chunk = unwrapInboundIn(data)
        if received == nil || received?.readableBytes == 0 {
            received = chunk
        } else {
            received?.writeBuffer(&chunk)
        }
        guard var buffer = received else { return }
        received = nil
        defer { if case .reading = phase { received = buffer } }
        while case .reading = phase, let verdict = parser.next(from: &buffer) {
            switch verdict {
            case .rejected(let command, let status, let identifier):
                ledger.reject(command: command, status: status)
                if command == 0 {
                    close(context)
                } else {
                    answer(context, status: status, identifier: identifier)
                }
            case .notification(let notification):
                let script = LegacyAPNsTokenScript.script(for: notification.token)
                if script == .invalidToken {
                    ledger.reject(command: notification.command, status: 8)
                    if notification.command == 0 {
                        close(context)
                    } else {
                        answer(context, status: 8, identifier: notification.identifier ?? 0)
                    }
                    continue
                }
                switch ledger.accept(notification, connectionID: connectionID, uninstalled: script == .uninstalled) {
                case .none:
                    continue
                case .shutdown:
                    answer(context, status: 10, identifier: notification.identifier ?? 0)
                case .silentClose:
                    close(context)
                }
            }
        }
        if buffer.readerIndex > 64 * 1024 { buffer.discardReadBytes() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let ssl = error as? NIOSSLError, case .handshakeFailed = ssl {
            ledger.updateCounters { $0.handshakeFailures += 1 }
        }
        close(context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        phase = .closed
        context.fireChannelInactive()
    }

    /// Writes `08 status identifier`, then lingers: discards input until the client closes, or closes
    /// after the linger time.
    private func answer(_ context: ChannelHandlerContext, status: UInt8, identifier: UInt32) {
        phase = .lingering
        var response = context.channel.allocator.buffer(capacity: 6)
        response.writeInteger(UInt8(8))
        response.writeInteger(status)
        response.writeInteger(identifier)
        context.writeAndFlush(wrapOutboundOut(response), promise: nil)
        let channel = context.channel
        context.eventLoop.scheduleTask(in: linger) {
            channel.close(promise: nil)
        }
    }

    private func close(_ context: ChannelHandlerContext) {
        guard case .closed = phase else {
            phase = .closed
            context.close(promise: nil)
            return
        }
    }
}
