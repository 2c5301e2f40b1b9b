import NIOCore

/// One frame as read off the wire: its header fields and its payload (a slice of the received bytes).
struct HTTP2RawFrame {
    /// The frame type; unknown types are kept (and ignored by the session, as RFC 9113 §4.1 asks).
    var type: UInt8
    var flags: UInt8
    var streamID: UInt32
    var payload: ByteBuffer

    func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
}
