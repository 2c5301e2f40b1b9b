/// A campaign segment that cannot be read: a bad or writing statement, a missing column, a timeout, too many rows.
///
/// The message carries the server's primary error text (never row values from DETAIL) so a marketer can fix the SQL.
public struct SegmentError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The read failed because the database ended its session or its connection broke (a restart, a failover, a
    /// terminated backend): reading the segment again once the server answers will do, unlike for bad SQL.
    public var connectionLost = false
    public init(_ message: String, connectionLost: Bool = false) {
        self.message = message
        self.connectionLost = connectionLost
    }
    public var description: String { "segment: " + message }
}
