import BugleCore
import Foundation
import Logging
import NIOCore
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
        /// The run left `materializing` while its segment was read (`bugle cancel`): the reading stopped at the first
        /// page that found it so, nothing more was written, and the run was not made `ready`.
        public var closed = false
    }

    private let client: PostgresClient
    private let logger: Logger
    /// Pages written at once. The copy into the ledger, not the segment's read, bounds materialization.
    static let concurrentWrites = 2
    /// Longest wait for one page's write before the materialization fails (the run can be resumed): a connection the
    /// server ended under its transaction can leave postgres-nio waiting forever for an answer
    /// (``OperationDeadline``), which hung the materialization instead of failing it.
    static let pageWriteDeadline: Duration = .seconds(300)

    /// Every token written passes through a copy of it, to find the tokens written twice.
    private let sieve: RepeatedTokenSieve

    /// Told the number of pages written so far after each page is in the ledger (the crash tests' failpoint).
    private let pageWritten: @Sendable (Int) -> Void
    /// Asked before each page: true when the operator asked the command to stop (Ctrl-C, SIGTERM).
    private let stopRequested: @Sendable () -> Bool

    /// The operator stopped the command while the segment was read: the run stays `materializing`, for `bugle resume`
    /// to read it again from zero (nothing was sent from it).
    public struct Interrupted: Error, Sendable {}

    /// - Parameters:
    ///   - sieve: The duplicate-token sieve (tests give small ones, to see its false candidates and its overflow
    ///     handled).
    ///   - stopRequested: Asked before each page; true ends the read with ``Interrupted``.
    ///   - pageWritten: Called with the count of pages written, after each page is in the ledger.
    public init(
        client: PostgresClient, logger: Logger, sieve: RepeatedTokenSieve = RepeatedTokenSieve(),
        stopRequested: @escaping @Sendable () -> Bool = { false },
        pageWritten: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.client = client
        self.logger = logger
        self.sieve = sieve
        self.stopRequested = stopRequested
        self.pageWritten = pageWritten
    }

    /// Reads the segment into the run's ledger and marks the run `ready`.
    /// - Parameters:
    ///   - lease: The segment reader's lease this process holds (``MaterializerLease``): every page, the collapse and
    ///     the final `ready` are written only while it is still this process's. Nil writes without that check.
    ///   - now: when the run starts, for local-time delivery (injected in tests).
    /// - Throws: ``SegmentError`` (the run is marked `failed` with the reason, unless the connection was lost: then it
    ///   stays `materializing`, see ``StoreError/isConnectionLoss(_:)``); ``MaterializerLease/Lost`` when another
    ///   process took the lease over (nothing more is written, and the run is left to that process).
    public func materialize(
        runID: Int64, campaign: Campaign, reader: SegmentReader, lease: MaterializerLease? = nil,
        now: Instant = Instant(secondsSince1970: Date().timeIntervalSince1970)
    ) async throws -> Report {
        let planner = RecipientPlanner(campaign: campaign, now: now)
        var periods = RecipientPeriods(campaign: campaign, start: now)
        var nextSeq: Int64 = 1
        var inserted: Int64 = 0
        var skipped: [SkipReason: Int64] = [:]
        var writing: [Task<PageWrite, any Error>] = []
        // Every token written as a pending recipient passes through the sieve: a token written twice is one of its
        // candidates, so the collapse below reads only the candidates' rows, and none when there are none.
        var sieve = self.sieve
        var pages = 0
        // Set once a page found the run no longer `materializing`: nothing more is read or written.
        var closed = false
        var rowsHandled: Int64 = 0
        func count(_ write: PageWrite) {
            // Every row of the page is written (invalid ones as skipped), unless the run left `materializing`.
            guard let written = write.written else {
                closed = true
                return
            }
            inserted += written - Int64(write.rows - write.valid)
            pages += 1
            pageWritten(pages)
        }
        var scan: SegmentScan
        do {
            scan = try await reader.read { rows in
                if closed { throw RunClosed() }
                if stopRequested() { throw Interrupted() }
                rowsHandled += Int64(rows.count)
                var batch = LedgerCopyPage(runID: runID, capacity: rows.count)
                var tokens: [String] = []
                tokens.reserveCapacity(rows.count)
                let lastCopies = planner.rotates ? try await lastCopyIndexes(notificationType: campaign.notificationType, rows: rows) : [:]
                for row in rows {
                    let seq = nextSeq
                    nextSeq += 1
                    let reason: SkipReason
                    var placement: (locale: String, variant: String?) = ("", nil)
                    switch RecipientValidator.validate(row, iosTransport: campaign.iosTransport) {
                    case .success(let recipient):
                        switch planner.plan(recipient, lastCopyIndex: lastCopies[recipient.userID]) {
                        case .send(let plan):
                            let provider = campaign.provider(for: recipient.platform)
                            tokens.append(recipient.token)
                            batch.appendPending(
                                seq: seq, deviceID: recipient.deviceID, userID: recipient.userID, token: recipient.token,
                                platform: recipient.platform.rawValue, provider: provider.rawValue,
                                locale: plan.locale, timezone: recipient.timezone ?? "",
                                variables: Self.encodeVariables(recipient.variables), variant: plan.variant ?? "",
                                copyIndex: planner.rotates ? plan.copyIndex : nil, notBefore: plan.notBefore?.secondsSince1970 ?? 0,
                                periodKey: periods.key(notBefore: plan.notBefore)
                            )
                            continue
                        case .skip(let why):
                            reason = why
                            placement = planner.placement(recipient)
                        }
                    case .failure(let error):
                        reason = error.reason
                    }
                    skipped[reason, default: 0] += 1
                    let state: RecipientState = reason == .quietHours ? .skippedQuietHours : .skippedInvalid
                    batch.appendFinished(
                        seq: seq, deviceID: row.deviceID ?? 0, userID: row.userID ?? "",
                        platform: String((row.platform ?? "").prefix(32)), state: state.rawValue, code: reason.rawValue,
                        locale: placement.locale, variant: placement.variant ?? ""
                    )
                }
                sieve.add(tokens)
                // Pages are written while the next is read and validated, up to `concurrentWrites` at once (each on
                // its own connection): wait for the oldest write only when that many are under way.
                if writing.count >= Self.concurrentWrites { count(try await writing.removeFirst().value) }
                let page = batch
                writing.append(Task { [self] in
                    let written = try await OperationDeadline.run(within: Self.pageWriteDeadline) {
                        try await insert(runID: runID, page, lease: lease)
                    }
                    return PageWrite(rows: page.rows, valid: page.validCount, written: written)
                })
            }
            for write in writing { count(try await write.value) }
        } catch is RunClosed {
            for write in writing { count(try await write.value) }
            scan = SegmentScan()
            scan.rowsRead = rowsHandled
        } catch {
            for write in writing { write.cancel() }
            for write in writing { _ = try? await write.value }
            // A lost connection (a restart, a terminated backend) is no fault of the segment: the run stays
            // `materializing`, to be read again from zero once the server answers (`bugle resume`, or the command's own
            // outage recovery). It used to be marked failed, which no resume could undo.
            if !StoreError.isConnectionLoss(error) && !(error is Interrupted) {
                try? await markFailed(runID: runID, lease: lease, reason: StoreError.safeDescription(of: error))
            }
            throw error
        }
        if closed { return Report(runID: runID, scan: scan, recipients: inserted, skipped: skipped, closed: true) }
        if scan.nullDeviceIDs > 0 { skipped[.missingDeviceID, default: 0] += scan.nullDeviceIDs }
        // Fresh statistics: without them the planner takes a run's new rows for one row and picks nested loops
        // that make every claim scan the whole run (measured: 600 ms per claim at 10,000 recipients).
        _ = try await client.answeredQuery("ANALYZE bugle.run_recipients", logger: logger).collect()
        let duplicates: Int64
        do {
            duplicates = try await collapseDuplicateTokens(
                runID: runID, sieve: sieve, latestRegistered: scan.columns.contains(SegmentReader.registeredAtColumn), lease: lease
            )
        } catch {
            if !StoreError.isConnectionLoss(error) {
                try? await markFailed(runID: runID, lease: lease, reason: StoreError.safeDescription(of: error))
            }
            throw error
        }
        inserted -= duplicates
        if duplicates > 0 { skipped[.duplicateToken, default: 0] += duplicates }
        let ready = try await client.answeredQuery(
            """
            UPDATE bugle.runs SET status = 'ready', recipients_total = \(inserted), rows_scanned = \(scan.rowsRead + scan.nullDeviceIDs),
                   duplicates_collapsed = \(duplicates), upper_device_id = \(scan.upperDeviceID),
                   materializer = NULL, materializer_expires_at = NULL
             WHERE id = \(runID) AND status = 'materializing' AND (\(lease?.owner)::text IS NULL OR materializer = \(lease?.owner))
            RETURNING 1
            """,
            logger: logger
        ).collect()
        // Not made ready: cancelled meanwhile (left as it is), or taken over by another reader (Lost).
        if ready.isEmpty, lease != nil {
            try await MaterializerLease.inFencedTransaction(lease, runID: runID, client: client, logger: logger, closed: ()) { _, _ in }
        }
        return Report(runID: runID, scan: scan, recipients: inserted, skipped: skipped, closed: ready.isEmpty)
    }

    /// Writes one page, all of its rows, if the run is still `materializing`; returns the rows written, or nil when
    /// the run is no longer `materializing`.
    ///
    /// One transaction: it locks the run row against a concurrent cancel (the ledger has no foreign key to `runs`,
    /// whose per-row check was half the cost of an insert), then copies the page's rows in with `COPY`.
    private func insert(runID: Int64, _ page: LedgerCopyPage, lease: MaterializerLease?) async throws -> Int64? {
        try await MaterializerLease.inFencedTransaction(lease, runID: runID, client: client, logger: logger, closed: nil) { connection, now in
            // COPY quotes the table name whole, so the schema comes from the search path, for this transaction only;
            // and a reader frozen inside it is ended after 15 s, so its lock on the run row cannot stall a cancel or a
            // takeover (also when a connection pooler refused that setting at connection time).
            try await connection.answeredQuery(
                "SELECT set_config('search_path', 'bugle', true), set_config('idle_in_transaction_session_timeout', '\(unescaped: PostgresCampaignStore.idleInTransactionTimeout)', true)",
                logger: logger)
            try await connection.answeredCopy(table: "run_recipients", columns: LedgerCopyPage.columns, logger: logger) { writer in
                try await writer.write(page.pendingLines)
                if page.hasFinishedRows {
                    var finished = ByteBuffer()
                    page.appendFinishedRows(finishedAt: now, to: &finished)
                    try await writer.write(finished)
                }
            }
            return Int64(page.rows) as Int64?
        }
    }

    /// Collapses rows of the run that share a (platform, token) into one: with `latestRegistered` (the segment returns
    /// `registered_at`) the row registered latest, NULLs last; otherwise, and among equal times, the first listed
    /// (lowest seq). The others are deleted before the run becomes `ready`, so they are never sent. Returns how many
    /// were deleted.
    ///
    /// `sieve` saw every token written: with no candidate no token repeats, and nothing is read. With candidates,
    /// only the rows holding one are ranked (a hashed `= ANY` filter over the run's rows). When the sieve overflowed,
    /// one pass over all the run's rows groups 64-bit hashes of the keys (an integer sort: about 0.7 s at 1,000,000
    /// rows), and only rows whose hash repeats are compared by their keys. Equal keys have equal hashes, so nothing is
    /// missed; a hash shared by different tokens is only looked at more closely.
    private func collapseDuplicateTokens(runID: Int64, sieve: RepeatedTokenSieve, latestRegistered: Bool, lease: MaterializerLease?) async throws -> Int64 {
        if !sieve.overflowed, sieve.candidates.isEmpty { return 0 }
        let key = "hashtextextended(r.platform || E'\\n' || r.token, 0)"
        // The variables are read only when they rank the rows (their `registered_at`).
        let columns = latestRegistered ? "r.seq, r.platform, r.token, r.variables" : "r.seq, r.platform, r.token"
        var binds = PostgresBindings(capacity: 2)
        binds.append(runID)
        let repeated: String
        if sieve.overflowed {
            repeated = """
                SELECT \(columns) FROM bugle.run_recipients r
                 WHERE r.run_id = $1 AND r.token IS NOT NULL
                   AND \(key) IN (SELECT \(key) FROM bugle.run_recipients r WHERE r.run_id = $1 AND r.token IS NOT NULL
                                   GROUP BY 1 HAVING count(*) > 1)
                """
        } else {
            binds.append(Array(sieve.candidates))
            repeated = "SELECT \(columns) FROM bugle.run_recipients r WHERE r.run_id = $1 AND r.token = ANY($2::text[])"
        }
        let registered = SegmentReader.registeredAtColumn
        let order = latestRegistered ? "(c.variables->>'\(registered)')::timestamptz DESC NULLS LAST, c.seq" : "c.seq"
        let sql = """
            WITH later AS (
              SELECT seq FROM (
                SELECT c.seq, row_number() OVER (PARTITION BY c.platform, c.token ORDER BY \(order)) AS n FROM (\(repeated)) c) ranked
               WHERE n > 1),
            deleted AS (
              DELETE FROM bugle.run_recipients r USING later WHERE r.run_id = $1 AND r.seq = later.seq RETURNING 1)
            SELECT count(*)::bigint FROM deleted
            """
        // Hash or merge joins only: a nested loop over the repeated hashes would cost rows × repeated hashes when a
        // segment lists every device twice.
        return try await MaterializerLease.inFencedTransaction(lease, runID: runID, client: client, logger: logger, closed: 0) { connection, _ in
            try await connection.answeredQuery("SET LOCAL enable_nestloop = off", logger: logger)
            let rows = try await connection.answeredQuery(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
            var count: Int64 = 0
            for try await (deleted,) in rows.decode((Int64,).self) { count = deleted }
            return count
        }
    }

    /// The copy index each of the page's users got last for this notification type (copy rotation).
    private func lastCopyIndexes(notificationType: String, rows: [SegmentRow]) async throws -> [String: Int] {
        let users = Array(Set(rows.compactMap(\.userID)))
        guard !users.isEmpty else { return [:] }
        let result = try await client.answeredQuery(
            "SELECT user_id, last_index FROM bugle.copy_rotation WHERE notification_type = \(notificationType) AND user_id = ANY(\(users)::text[])",
            logger: logger
        )
        var last: [String: Int] = [:]
        for try await (user, index) in result.decode((String, Int).self) { last[user] = index }
        return last
    }

    /// Marks the run failed, unless another reader holds its lease now (one that lost it changes nothing).
    private func markFailed(runID: Int64, lease: MaterializerLease?, reason: String) async throws {
        _ = try await client.answeredQuery(
            """
            UPDATE bugle.runs SET status = 'failed', failure_reason = \(reason), finished_at = now(), materializer = NULL, materializer_expires_at = NULL
             WHERE id = \(runID) AND (\(lease?.owner)::text IS NULL OR materializer = \(lease?.owner))
            """,
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

/// What writing one page did: rows handed over, how many of them were valid recipients, and how many rows were
/// written (all of them, unless the run had left `materializing`).
private struct PageWrite: Sendable {
    var rows: Int
    var valid: Int
    /// Nil when the run was no longer `materializing`: nothing written.
    var written: Int64?
}

/// Ends the segment's read once a page found the run no longer `materializing`.
private struct RunClosed: Error {}
