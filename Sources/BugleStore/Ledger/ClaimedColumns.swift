import BugleCore
import PostgresNIO

/// A claim's rows, decoded from the single row of arrays its statement returns.
///
/// The claim aggregates what its `UPDATE … RETURNING` produced into one array per column, in the order the rows were
/// updated, so a claim of 500 recipients is one message for postgres-nio to decode rather than 500 (each with 13
/// cells). NULLs stay in place in every array, so the columns line up by position.
struct ClaimedColumns {
    /// The claimed recipients, in claim order.
    var recipients: [ClaimedRecipient] = []
    /// Per provider: the smallest `seq` among the picks due at once (`next_attempt_at = '-infinity'`); a provider
    /// whose picks hold none is absent. ``ClaimFloors`` raises each lane's floor to it.
    var firstImmediate: [String: Int64] = [:]

    /// The aggregate select list over the claim's `claimed` CTE, in the order ``init(_:)`` reads it.
    static let selectList = """
        array_agg(seq), array_agg(device_id), array_agg(user_id), array_agg(token), array_agg(platform),
        array_agg(locale), array_agg(timezone), array_agg(variables), array_agg(attempts::int8), array_agg(variant),
        array_agg(copy_index::int8), array_agg(provider), array_agg(immediate)
        """

    /// The arrays in ``selectList``.
    static let columnCount = 13

    /// - Parameter row: the claim's one row; every cell NULL when nothing was claimed.
    /// - Throws: for cells that are not one-dimensional binary arrays, or not ``columnCount`` arrays of one length.
    init(_ row: PostgresRow) throws {
        guard let columns = try PostgresBinaryArray.columns(of: row, count: Self.columnCount, malformed: Self.malformed),
              let first = columns[0]
        else { return }
        func integers(_ index: Int) throws -> [Int64?] { try columns[index]?.integers() ?? [] }
        func texts(_ index: Int) throws -> [String?] { try columns[index]?.texts() ?? [] }
        let seqs = try integers(0), deviceIDs = try integers(1), userIDs = try texts(2), tokens = try texts(3)
        let platforms = try texts(4), locales = try texts(5), timezones = try texts(6), variables = try texts(7)
        let attempts = try integers(8), variants = try texts(9), copyIndexes = try integers(10)
        let providers = try texts(11), immediates = try integers(12)
        recipients.reserveCapacity(first.count)
        for index in 0..<first.count {
            if let provider = providers[index], let immediate = immediates[index] {
                firstImmediate[provider] = min(firstImmediate[provider] ?? .max, immediate)
            }
            guard let seq = seqs[index], let deviceID = deviceIDs[index], let userID = userIDs[index],
                  let token = tokens[index], let platform = platforms[index].flatMap(Platform.init(rawValue:))
            else { continue }
            recipients.append(
                ClaimedRecipient(
                    seq: seq, deviceID: deviceID, userID: userID, token: token, platform: platform,
                    locale: locales[index], timezone: timezones[index],
                    variables: PostgresCampaignStore.decodeVariables(variables[index]),
                    variant: variants[index], copyIndex: Int(copyIndexes[index] ?? 0), attempts: Int(attempts[index] ?? 0)
                )
            )
        }
    }

    static let malformed = "the server sent a claim whose columns differ in number or length"
}
