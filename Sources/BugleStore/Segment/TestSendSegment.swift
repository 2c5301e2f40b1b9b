import Foundation
import BugleCore

/// The segment of a test send (`bugle send-test`): the active devices of the seed users and tokens, with the
/// campaign's template variables taken from the campaign's own segment row of each device when it has one
/// (NULL otherwise, so defaults apply), and its locale and time zone too when that row has those columns (the
/// device's own otherwise): a segment that chooses the locale (`'de' AS locale`) was tested in the device's.
public enum TestSendSegment {
    /// - Parameters:
    ///   - campaign: the campaign whose copy is tested.
    ///   - users: seed user ids.
    ///   - tokens: seed device tokens.
    /// - Returns: SQL for ``SegmentReader`` (the seeds are quoted literals: `'` doubled, NUL refused).
    public static func sql(for campaign: Campaign, users: [String], tokens: [String]) throws -> String {
        let variables = campaign.templateVariables
        // Whether the segment has the column is read from its row as JSON: naming `s.locale` fails when it has none
        // (`s.*`: a segment column named `s` would stand for the row).
        let fromSegment = { (column: String) in
            "CASE WHEN to_jsonb(s.*) ? '\(column)' THEN to_jsonb(s.*) ->> '\(column)' ELSE d.\(column) END AS \(column)"
        }
        var select = ["d.id AS device_id", "d.user_id", "d.token", "d.platform", fromSegment("locale"), fromSegment("timezone")]
        select += variables.map { "s.\(quoteIdentifier($0)) AS \(quoteIdentifier($0))" }
        var seeds: [String] = []
        if !users.isEmpty { seeds.append("d.user_id IN (\(try users.map(literal).joined(separator: ", ")))") }
        if !tokens.isEmpty {
            seeds.append("d.token IN (\(try tokens.map(literal).joined(separator: ", ")))")
            // iOS device tokens are stored lowercase (as `register` and `import` store them): a seed given in capitals
            // matched none.
            let lowered = Set(tokens.map { $0.lowercased() }).subtracting(tokens)
            if !lowered.isEmpty { seeds.append("(d.platform = 'ios' AND d.token IN (\(try lowered.sorted().map(literal).joined(separator: ", "))))") }
        }
        let segment = SegmentReader.wrap(campaign.segment.sql)
        var sql = "SELECT \(select.joined(separator: ", ")) FROM bugle.devices d"
        sql += " LEFT JOIN LATERAL (SELECT * FROM \(segment) WHERE s.device_id = d.id LIMIT 1) AS s ON true"
        sql += " WHERE d.is_active AND (\(seeds.isEmpty ? "false" : seeds.joined(separator: " OR ")))"
        return sql
    }

    static func literal(_ value: String) throws -> String {
        guard !value.utf8.contains(0) else { throw SegmentError("a seed user or token contains a NUL character") }
        return "'" + value.replacingOccurrences(of: "'", with: "''") + "'"
    }

    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
