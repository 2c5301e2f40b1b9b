/// The result of ``DeviceStore/importCSV(path:)``.
///
/// `rowsRead == inserted + updated + skipped + duplicatesInBatch` always holds.
public struct DeviceImportReport: Sendable, Hashable, CustomStringConvertible {
    /// One rejected row.
    public struct Issue: Sendable, Hashable, CustomStringConvertible {
        /// The physical line the record starts on.
        public var line: Int
        /// The column at fault, when one is.
        public var column: String?
        /// Why the row was skipped; never contains the token.
        public var reason: String

        /// `"line N: column X: reason"` (or `"line N: reason"`).
        public var description: String {
            if let column {
                return "line \(self.line): column \(column): \(self.reason)"
            }
            return "line \(self.line): \(self.reason)"
        }
    }

    /// Data records read (the header and blank lines excluded).
    public var rowsRead = 0
    /// Devices that did not exist before.
    public var inserted = 0
    /// Existing devices (same platform and token) that were updated and reactivated.
    public var updated = 0
    /// Rows rejected; see ``issues``.
    public var skipped = 0
    /// Rows superseded by a later row with the same platform and token in the same batch (the later row wins).
    /// Repeats further apart count as updates.
    public var duplicatesInBatch = 0
    /// The line from which the rest of the file could not be read (a quote opened there is never closed); nil when the
    /// whole file was read.
    public var unreadFrom: Int?
    /// The first ``maximumListedIssues`` rejected rows.
    public var issues: [Issue] = []
    /// Rejected rows beyond those listed.
    public var unlistedIssueCount = 0

    /// How many issues are listed at most.
    public static let maximumListedIssues = 100

    /// Creates an empty report.
    public init() {}

    mutating func record(_ issue: Issue) {
        self.skipped += 1
        if self.issues.count < Self.maximumListedIssues {
            self.issues.append(issue)
        } else {
            self.unlistedIssueCount += 1
        }
    }

    /// A multi-line summary followed by the listed issues.
    public var description: String {
        var lines = [
            "rows read: \(self.rowsRead), inserted: \(self.inserted), updated: \(self.updated), "
                + "skipped: \(self.skipped), duplicates collapsed: \(self.duplicatesInBatch)"
        ]
        lines += self.issues.map(\.description)
        if self.unlistedIssueCount > 0 {
            lines.append("… and \(self.unlistedIssueCount) more rejected rows")
        }
        return lines.joined(separator: "\n")
    }
}
