/// What a connection's ``HTTP2ClientSession`` tells the handler after it (``HTTP2ConnectionHandler``) about the
/// connection itself.
enum HTTP2ConnectionSignal {
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` (decreases included).
    case maxConcurrentStreams(Int)
    /// The server is closing the connection; streams above `lastStreamID` were not processed. `debugData`: the
    /// frame's debug data, printable ASCII (see ``HTTP2TransportError/goingAway(code:debugData:connectionAnswered:)``).
    case goAway(lastStreamID: Int, code: UInt32, debugData: String)
    /// The connection's first answer arrived (sent once per connection).
    case answered
    /// The server acknowledged the PING carrying this data.
    case pingAnswered(UInt64)
    /// The connection closed with this many requests written and not answered (each fails as lost after its write:
    /// maybe delivered), sent once, as it closes.
    case closedUnanswered(Int)
}
