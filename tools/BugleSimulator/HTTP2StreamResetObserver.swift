import NIOCore
import NIOHTTP2

/// First handler of an FCM simulator HTTP/2 stream: passes every frame on, and tells the handlers after it when the
/// client resets the stream (RST_STREAM), which NIOHTTP2's HTTP/1 codec drops without a word.
///
/// The stream's handler needs to know: a request read together with its cancel is handed over as the RST_STREAM
/// closes the stream, and its answer must then not be flushed (see ``FCMHTTPHandler``).
final class HTTP2StreamResetObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload

    /// The user event fired when the client resets the stream.
    struct Reset: Sendable {}

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .rstStream = unwrapInboundIn(data) {
            context.fireUserInboundEventTriggered(Reset())
        }
        context.fireChannelRead(data)
    }
}
