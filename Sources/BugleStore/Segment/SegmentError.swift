/// A campaign segment that cannot be read: a bad or writing statement, a missing column, a timeout, too many rows.
///
/// The message carries the server's primary error text (never row values from DETAIL) so a marketer can fix the SQL.
public struct SegmentError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "segment: " + message }
}
