import NIOCore

/// Cuts the decrypted byte stream of a connection into frames. Bytes arrive in arbitrary pieces; a frame split
/// across reads waits for the rest.
struct HTTP2FrameReader {
    /// The largest payload accepted: what this client announced as `SETTINGS_MAX_FRAME_SIZE`.
    let maxFrameSize: Int
    private var buffer = ByteBuffer()

    init(maxFrameSize: Int = HTTP2Wire.defaultMaxFrameSize) {
        self.maxFrameSize = maxFrameSize
    }

    /// Adds received bytes.
    mutating func append(_ bytes: ByteBuffer) {
        if buffer.readableBytes == 0 {
            buffer = bytes
        } else {
            if buffer.readerIndex > 16_384 { buffer.discardReadBytes() }
            buffer.writeImmutableBuffer(bytes)
        }
    }

    /// The next complete frame, or nil until more bytes arrive.
    /// - Throws: ``HTTP2ProtocolViolation`` (FRAME_SIZE_ERROR) for a frame longer than ``maxFrameSize``.
    mutating func next() throws(HTTP2ProtocolViolation) -> HTTP2RawFrame? {
        let start = buffer.readerIndex
        guard buffer.readableBytes >= HTTP2Wire.frameHeaderLength,
            let high = buffer.getInteger(at: start, as: UInt8.self),
            let low = buffer.getInteger(at: start + 1, as: UInt16.self),
            let type = buffer.getInteger(at: start + 3, as: UInt8.self),
            let flags = buffer.getInteger(at: start + 4, as: UInt8.self),
            let streamID = buffer.getInteger(at: start + 5, as: UInt32.self)
        else { return nil }
        let length = Int(high) << 16 | Int(low)
        guard length <= maxFrameSize else {
            throw HTTP2ProtocolViolation(code: HTTP2Wire.ErrorCode.frameSizeError, message: "a frame of \(length) bytes exceeds \(maxFrameSize)")
        }
        guard buffer.readableBytes >= HTTP2Wire.frameHeaderLength + length else { return nil }
        buffer.moveReaderIndex(forwardBy: HTTP2Wire.frameHeaderLength)
        guard let payload = buffer.readSlice(length: length) else { return nil }
        return HTTP2RawFrame(type: type, flags: flags, streamID: streamID & 0x7FFF_FFFF, payload: payload)
    }
}
