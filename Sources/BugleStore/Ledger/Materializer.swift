import BugleCore
import Foundation
import Logging
import PostgresNIO

/// Freezes a campaign's audience into the ledger before anything is sent (RELIABILITY.md §3.6).
///
/// Valid rows become `pending` recipients; invalid ones are recorded as `skipped_invalid` with their reason so
/// the CSV and the summary show them; a token seen twice collapses into one recipient. The run goes from
/// `materializing` to `ready` only when every page is written, so a partial audience is never sent.
public struct Materializer: Sendable {
    /// What materialization produced.
    public struct Report: Sendable, Equatable {
        public var runID: Int64
        public var scan: SegmentScan
        public var recipients: Int64
        public var skipped: [SkipReason: Int64]
    }

    private let client: PostgresClient
    private let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Reads the segment into the run's ledger and marks the run `ready`.
    /// - Parameter now: when the run starts, for local-time delivery (injected in tests).
    /// - Throws: ``SegmentError`` (the run is marked `failed` with the reason).
    public func materialize(runID: Int64, campaign: Campaign, reader: SegmentReader, now: Instant = Instant(secondsSince1970: Date().timeIntervalSince1970)) async throws -> Report {
        let planner = RecipientPlanner(campaign: campaign, now: now)
        // Token rows left by materializations that were killed and later cancelled (or failed) are cleared here.
        _ = try await client.query(
            """
            DELETE FROM bugle.run_tokens t
             WHERE NOT EXISTS (SELECT 1 FROM bugle.runs r WHERE r.id = t.run_id AND r.status = 'materializing')
            """,
            logger: logger
        ).collect()
        var nextSeq: Int64 = 1
        var inserted: Int64 = 0
        var skipped: [SkipReason: Int64] = [:]
        var writing: Task<PageWrite, any Error>?
        func count(_ write: PageWrite) {
            inserted += write.written - Int64(write.rows - write.valid)
            if write.written < Int64(write.rows) {
                skipped[.duplicateToken, default: 0] += Int64(write.rows) - write.written
            }
        }
        let scan: SegmentScan
        do {
            scan = try await reader.read { rows in
                var batch = PageBatch(capacity: rows.count)
                let lastCopies = planner.rotates ? try await lastCopyIndexes(notificationType: campaign.notificationType, rows: rows) : [:]
                for row in rows {
                    let seq = nextSeq
                    nextSeq += 1
                    let reason: SkipReason
                    switch RecipientValidator.validate(row, iosTransport: campaign.iosTransport) {
                    case .success(let recipient):
                        switch planner.plan(recipient, lastCopyIndex: lastCopies[recipient.userID]) {
                        case .send(let plan):
                            let provider = campaign.provider(for: recipient.platform)
                            batch.append(
                                seq: seq, deviceID: recipient.deviceID, userID: recipient.userID, token: recipient.token,
                                platform: recipient.platform.rawValue, provider: provider.rawValue,
                                locale: plan.locale, timezone: recipient.timezone ?? "",
                                variables: Self.encodeVariables(recipient.variables), state: RecipientState.pending.rawValue, code: "",
                                variant: plan.variant ?? "", copyIndex: planner.rotates ? plan.copyIndex : -1,
                                notBefore: plan.notBefore?.secondsSince1970 ?? 0
                            )
                            continue
                        case .skip(let why):
                            reason = why
                        }
                    case .failure(let error):
                        reason = error.reason
                    }
                    skipped[reason, default: 0] += 1
                    let state: RecipientState = reason == .quietHours ? .skippedQuietHours : .skippedInvalid
                    batch.append(
                        seq: seq, deviceID: row.deviceID ?? 0, userID: row.userID ?? "", token: "",
                        platform: String((row.platform ?? "").prefix(32)), provider: ProviderKind.none.rawValue,
                        locale: "", timezone: "", variables: "", state: state.rawValue, code: reason.rawValue,
                        variant: "", copyIndex: -1, notBefore: 0
                    )
                }
                // One page is written while the next is read and validated (two connections): wait for the
                // previous page's insert only now, then hand this page over.
                if let previous = writing { count(try await previous.value) }
                let page = batch
                writing = Task { [self] in PageWrite(rows: page.seqs.count, valid: page.validCount, written: try await insert(runID: runID, page)) }
            }
            if let last = writing { count(try await last.value) }
        } catch {
            writing?.cancel()
            _ = try? await writing?.value
            try? await markFailed(runID: runID, reason: String(describing: error))
            throw error
        }
        if scan.nullDeviceIDs > 0 { skipped[.missingDeviceID, default: 0] += scan.nullDeviceIDs }
        let duplicates = skipped[.duplicateToken] ?? 0
        _ = try await client.query(
            """
            UPDATE bugle.runs SET status = 'ready', recipients_total = \(inserted), rows_scanned = \(scan.rowsRead + scan.nullDeviceIDs),
                   duplicates_collapsed = \(duplicates), upper_device_id = \(scan.upperDeviceID)
             WHERE id = \(runID) AND status = 'materializing'
            """,
            logger: logger
        ).collect()
        try await dropTokens(runID: runID)
        // Fresh statistics: without them the planner takes a run's new rows for one row and picks nested loops
        // that make every claim scan the whole run (measured: 600 ms per claim at 10,000 recipients).
        _ = try await client.query("ANALYZE bugle.run_recipients", logger: logger).collect()
        return Report(runID: runID, scan: scan, recipients: inserted, skipped: skipped)
    }

    /// Inserts one page. A (platform, token) already in the run is collapsed: `bugle.run_tokens` (unlogged, emptied
    /// when the run is ready) holds the run's tokens while it is materialized, so the ledger itself needs no unique
    /// index on tokens — such an index would be updated on every claim and outcome of the send path.
    private func insert(runID: Int64, _ batch: PageBatch) async throws -> Int64 {
        let rows = try await client.query(
            """
            WITH v AS (
              SELECT * FROM unnest(\(batch.seqs)::bigint[], \(batch.deviceIDs)::bigint[], \(batch.userIDs)::text[], \(batch.tokens)::text[],
                                   \(batch.platforms)::text[], \(batch.providers)::text[], \(batch.locales)::text[], \(batch.timezones)::text[],
                                   \(batch.variables)::text[], \(batch.states)::text[], \(batch.codes)::text[],
                                   \(batch.variants)::text[], \(batch.copyIndexes)::int[], \(batch.dues)::float8[])
                   AS v(seq, device_id, user_id, token, platform, provider, locale, timezone, vars, state, code, variant, copy_index, due)),
            first AS (
              -- The first row of each token wins, within the page as across pages.
              INSERT INTO bugle.run_tokens (run_id, platform, token, seq)
              SELECT \(runID), v.platform, v.token, v.seq FROM v WHERE v.token <> '' ORDER BY v.seq
              ON CONFLICT DO NOTHING
              RETURNING seq)
            INSERT INTO bugle.run_recipients
                   (run_id, seq, device_id, user_id, token, platform, provider, locale, timezone, variables, state, outcome_code, finished_at,
                    variant, copy_index, next_attempt_at)
            SELECT \(runID), v.seq, v.device_id, NULLIF(v.user_id, ''), NULLIF(v.token, ''), v.platform, v.provider,
                   NULLIF(v.locale, ''), NULLIF(v.timezone, ''), NULLIF(v.vars, '')::jsonb, v.state, NULLIF(v.code, ''),
                   CASE WHEN v.state = 'pending' THEN NULL ELSE now() END,
                   NULLIF(v.variant, ''), NULLIF(v.copy_index, -1),
                   CASE WHEN v.due = 0 THEN '-infinity'::timestamptz ELSE to_timestamp(v.due) END
              FROM v
             WHERE v.token = '' OR v.seq IN (SELECT seq FROM first)
            RETURNING seq
            """,
            logger: logger
        )
        var count: Int64 = 0
        for try await _ in rows { count += 1 }
        return count
    }

    /// The copy index each of the page's users got last for this notification type (copy rotation).
    private func lastCopyIndexes(notificationType: String, rows: [SegmentRow]) async throws -> [String: Int] {
        let users = Array(Set(rows.compactMap(\.userID)))
        guard !users.isEmpty else { return [:] }
        let result = try await client.query(
            "SELECT user_id, last_index FROM bugle.copy_rotation WHERE notification_type = \(notificationType) AND user_id = ANY(\(users)::text[])",
            logger: logger
        )
        var last: [String: Int] = [:]
        for try await (user, index) in result.decode((String, Int).self) { last[user] = index }
        return last
    }

    /// Empties the run's rows of `bugle.run_tokens` (only materialization uses them).
    private func dropTokens(runID: Int64) async throws {
        _ = try await client.query("DELETE FROM bugle.run_tokens WHERE run_id = \(runID)", logger: logger).collect()
    }

    private func markFailed(runID: Int64, reason: String) async throws {
        try? await dropTokens(runID: runID)
        _ = try await client.query(
            "UPDATE bugle.runs SET status = 'failed', failure_reason = \(reason), finished_at = now() WHERE id = \(runID)",
            logger: logger
        ).collect()
    }

    static func encodeVariables(_ variables: [String: String?]) -> String {
        guard !variables.isEmpty else { return "" }
        var json = JSONWriter(capacity: 64)
        json.beginObject()
        for (key, value) in variables.sorted(by: { $0.key < $1.key }) {
            if let value { json.field(key, value) }
        }
        json.endObject()
        return String(decoding: json.bytes, as: UTF8.self)
    }
}

/// What writing one page did: rows handed over, how many of them were valid, rows actually inserted (the rest
/// collapsed into an earlier recipient with the same token).
private struct PageWrite: Sendable {
    var rows: Int
    var valid: Int
    var written: Int64
}

/// Column arrays of one page, bound as `unnest` arrays (one statement per page).
private struct PageBatch: Sendable {
    var seqs: [Int64] = []
    var deviceIDs: [Int64] = []
    var userIDs: [String] = []
    var tokens: [String] = []
    var platforms: [String] = []
    var providers: [String] = []
    var locales: [String] = []
    var timezones: [String] = []
    var variables: [String] = []
    var states: [String] = []
    var codes: [String] = []
    var variants: [String] = []
    /// -1: NULL (no rotation).
    var copyIndexes: [Int] = []
    /// UNIX seconds of the earliest send; 0: at once.
    var dues: [Double] = []
    var validCount = 0

    init(capacity: Int) {
        seqs.reserveCapacity(capacity)
        deviceIDs.reserveCapacity(capacity)
        userIDs.reserveCapacity(capacity)
        tokens.reserveCapacity(capacity)
    }

    mutating func append(seq: Int64, deviceID: Int64, userID: String, token: String, platform: String, provider: String, locale: String, timezone: String, variables: String, state: String, code: String, variant: String, copyIndex: Int, notBefore: Double) {
        seqs.append(seq)
        deviceIDs.append(deviceID)
        userIDs.append(userID)
        tokens.append(token)
        platforms.append(platform)
        providers.append(provider)
        locales.append(locale)
        timezones.append(timezone)
        self.variables.append(variables)
        states.append(state)
        codes.append(code)
        variants.append(variant)
        copyIndexes.append(copyIndex)
        dues.append(notBefore)
        if state == RecipientState.pending.rawValue { validCount += 1 }
    }
}
