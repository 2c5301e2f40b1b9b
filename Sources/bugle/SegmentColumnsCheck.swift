import BugleCore
import BugleStore
import Logging
import PostgresNIO

/// Checks, before anything is written, that the segment's columns are usable: every template variable of the
/// campaign is one of them, and a `registered_at` column is a timestamp (the segment is prepared, not read).
enum SegmentColumnsCheck {
    /// - Throws: ``UsageError`` naming the file, the key path where the variable is used, and the segment's columns;
    ///   a segment the server refuses, or whose `registered_at` is not a timestamp, is a usage error too.
    static func verify(_ campaign: Campaign, segments: SegmentAccess, logger: Logger) async throws {
        let columns: [String]
        do {
            columns = try await segments.reader(for: campaign.segment, logger: logger).columnNames()
        } catch let error as SegmentError {
            throw UsageError("\(campaign.sourcePath ?? campaign.name): segment.sql: \(error)")
        }
        let missing = campaign.templateVariablesMissing(from: columns)
        guard let first = missing.first else { return }
        let uses = campaign.templateVariableUses
        let file = campaign.sourcePath ?? campaign.name
        let list = missing.map { "{{\($0)}} (\(uses[$0] ?? "message"))" }.joined(separator: ", ")
        throw UsageError(
            "\(file): \(uses[first] ?? "message"): template variable\(missing.count > 1 ? "s" : "") \(list) "
                + "not returned by segment.sql (its columns: \(columns.joined(separator: ", ")))")
    }
}
