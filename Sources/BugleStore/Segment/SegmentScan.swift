/// What a segment scan saw, for the materialization record and the dry-run report.
public struct SegmentScan: Sendable, Equatable {
    /// Rows read (all pages).
    public var rowsRead: Int64 = 0
    /// Rows whose device_id is NULL (never paged; counted as `missing_device_id`).
    public var nullDeviceIDs: Int64 = 0
    /// The highest device_id at the start of the scan (the keyset upper bound); nil for an empty segment.
    public var upperDeviceID: Int64?
    /// Column names the segment returns.
    public var columns: [String] = []
    /// Pages fetched.
    public var pages: Int = 0
    /// Pages fetched a second time in the arrays form (a value holding U+001F, or device ids that repeat).
    public var arrayPages: Int = 0
    /// Rows sharing a (platform, token) with an earlier row, when the scan was asked to count them.
    public var duplicateTokens: Int64?

    public init() {}
}
