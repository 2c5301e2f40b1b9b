/// What a connection's ``HTTP2ClientSession`` tells the handler after it (``HTTP2ConnectionHandler``) about the
/// connection itself.
enum HTTP2ConnectionSignal {
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` (decreases included).
    case maxConcurrentStreams(Int)
    /// The server is closing the connection; streams above `lastStreamID` were not processed.
    case goAway(lastStreamID: Int, code: UInt32)
    /// The server acknowledged the PING carrying this data.
    case pingAnswered(UInt64)
}
