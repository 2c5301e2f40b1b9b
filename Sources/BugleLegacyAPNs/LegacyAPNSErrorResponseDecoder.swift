import NIOCore

/// Turns the gateway's inbound byte stream into ``LegacyAPNSErrorResponse`` values, however TCP and TLS
/// split it: bytes are accumulated until all 6 of a response are there.
public struct LegacyAPNSErrorResponseDecoder: ByteToMessageDecoder {
    public typealias InboundOut = LegacyAPNSErrorResponse

    /// Creates a decoder.
    public init() {}

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let response = try LegacyAPNSErrorResponse.decode(from: &buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(response))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A partial response at EOF is dropped: the connection is gone either way, and the silent-close path
        // treats the unconfirmed window as ambiguous.
        try decode(context: context, buffer: &buffer)
    }
}
