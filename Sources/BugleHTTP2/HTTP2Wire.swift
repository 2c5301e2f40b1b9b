import NIOCore

/// The HTTP/2 wire constants a client needs (RFC 9113), and the writing of frames into a buffer.
enum HTTP2Wire {
    /// The client connection preface (RFC 9113 §3.4), sent before the first SETTINGS frame.
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// Length of every frame header.
    static let frameHeaderLength = 9
    /// The protocol's initial flow-control window, for the connection and every stream.
    static let defaultWindow = 65_535
    /// The largest flow-control window.
    static let maxWindow = Int(Int32.max)
    /// The frame payload size every peer accepts until it announces another.
    static let defaultMaxFrameSize = 16_384

    /// Frame types (RFC 9113 §6).
    enum FrameType: UInt8 {
        case data = 0x0
        case headers = 0x1
        case priority = 0x2
        case rstStream = 0x3
        case settings = 0x4
        case pushPromise = 0x5
        case ping = 0x6
        case goAway = 0x7
        case windowUpdate = 0x8
        case continuation = 0x9
    }

    /// Frame flags.
    enum Flag {
        static let endStream: UInt8 = 0x1
        static let ack: UInt8 = 0x1
        static let endHeaders: UInt8 = 0x4
        static let padded: UInt8 = 0x8
        static let priority: UInt8 = 0x20
    }

    /// SETTINGS parameters.
    enum Setting {
        static let headerTableSize: UInt16 = 0x1
        static let enablePush: UInt16 = 0x2
        static let maxConcurrentStreams: UInt16 = 0x3
        static let initialWindowSize: UInt16 = 0x4
        static let maxFrameSize: UInt16 = 0x5
        static let maxHeaderListSize: UInt16 = 0x6
    }

    /// Error codes (RFC 9113 §7).
    enum ErrorCode {
        static let noError: UInt32 = 0x0
        static let protocolError: UInt32 = 0x1
        static let flowControlError: UInt32 = 0x3
        static let frameSizeError: UInt32 = 0x6
        static let refusedStream: UInt32 = 0x7
        static let cancel: UInt32 = 0x8
        static let compressionError: UInt32 = 0x9

        /// The code's name, for errors and logs.
        static func name(_ code: UInt32) -> String {
            let names = [
                "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
                "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
                "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
            ]
            return code < names.count ? names[Int(code)] : "error 0x\(String(code, radix: 16))"
        }
    }
}

extension ByteBuffer {
    /// Writes a frame header: 24-bit length, type, flags, 31-bit stream id.
    mutating func writeHTTP2FrameHeader(length: Int, type: HTTP2Wire.FrameType, flags: UInt8 = 0, streamID: UInt32) {
        writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        writeInteger(UInt16(truncatingIfNeeded: length))
        writeInteger(type.rawValue)
        writeInteger(flags)
        writeInteger(streamID & 0x7FFF_FFFF)
    }

    /// Writes a SETTINGS frame with the given parameters.
    mutating func writeHTTP2Settings(_ settings: [(UInt16, UInt32)]) {
        writeHTTP2FrameHeader(length: settings.count * 6, type: .settings, streamID: 0)
        for (identifier, value) in settings {
            writeInteger(identifier)
            writeInteger(value)
        }
    }

    /// Writes a PING frame (or its acknowledgement) carrying eight bytes of opaque data.
    mutating func writeHTTP2Ping(_ data: UInt64, ack: Bool) {
        writeHTTP2FrameHeader(length: 8, type: .ping, flags: ack ? HTTP2Wire.Flag.ack : 0, streamID: 0)
        writeInteger(data)
    }

    /// Writes a WINDOW_UPDATE frame.
    mutating func writeHTTP2WindowUpdate(streamID: UInt32, increment: Int) {
        writeHTTP2FrameHeader(length: 4, type: .windowUpdate, streamID: streamID)
        writeInteger(UInt32(increment) & 0x7FFF_FFFF)
    }

    /// Writes a RST_STREAM frame.
    mutating func writeHTTP2ResetStream(streamID: UInt32, code: UInt32) {
        writeHTTP2FrameHeader(length: 4, type: .rstStream, streamID: streamID)
        writeInteger(code)
    }

    /// Writes a GOAWAY frame without debug data.
    mutating func writeHTTP2GoAway(lastStreamID: UInt32, code: UInt32) {
        writeHTTP2FrameHeader(length: 8, type: .goAway, streamID: 0)
        writeInteger(lastStreamID & 0x7FFF_FFFF)
        writeInteger(code)
    }
}
