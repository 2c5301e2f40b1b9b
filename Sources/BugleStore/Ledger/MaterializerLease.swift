import Logging
import PostgresNIO

/// The lease of the process reading a run's segment into its ledger: a row-level marker on `bugle.runs`
/// (`materializer`, `materializer_expires_at`), renewed while the segment is read and fencing every page written.
///
/// `bugle resume` of a run left `materializing` takes the lease over only when it has lapsed, or when its owner is a
/// process known to be gone (``holding(runID:owner:ttlSeconds:client:logger:ownerIsGone:_:)``'s `ownerIsGone`: the
/// CLI checks owners of this host by pid, as it does for workers' leases). The reader that lost its lease writes
/// nothing more: every page, the duplicate collapse and the final `ready` check the owner first (``Lost``).
///
/// A row, not a session advisory lock: behind a transaction-pooling connection pooler (PgBouncer) a session lock is
/// taken on whichever server session the statement lands on, so a live reader's lock could look free to a resume
/// served by that same session, and a dead reader's could stay held for as long as the pooler keeps the session.
public struct MaterializerLease: Sendable, Equatable {
    /// The run whose segment is being read.
    public let runID: Int64
    /// Who holds it: `host:pid:random`.
    public let owner: String

    /// The lease is held by another live reader: `bugle resume` refuses rather than read the segment twice.
    public struct Held: Error, CustomStringConvertible {
        public let runID: Int64
        public let owner: String?
        /// Seconds until it lapses unless renewed.
        public let expiresIn: Double
        public var description: String {
            "run \(runID) is still reading its segment in another process (\(owner ?? "unknown")); its lease lapses in "
                + "\(Int(max(0, expiresIn).rounded(.up))) s unless renewed"
        }
    }

    /// This reader's lease was taken over (it had lapsed, or its process looked gone): it stopped writing.
    public struct Lost: Error, CustomStringConvertible {
        public let runID: Int64
        public var description: String {
            "run \(runID): another process took over reading its segment (this one's lease had lapsed); this process wrote nothing more"
        }
    }

    /// The run is no longer `materializing` (cancelled, or materialized by another process meanwhile).
    public struct NotMaterializing: Error, CustomStringConvertible {
        public let runID: Int64
        public let status: String?
        public var description: String { "run \(runID) is \(status ?? "gone"), not reading its segment" }
    }

    public init(runID: Int64, owner: String) {
        self.runID = runID
        self.owner = owner
    }

    /// Takes run `runID`'s lease as `owner`, renews it every sixth of `ttlSeconds` while `body` runs, and gives it up
    /// when `body` ends (a `ready` run has already cleared it).
    /// - Parameters:
    ///   - ownerIsGone: Whether the current holder (its owner string) is known to be gone although its lease has not
    ///     lapsed yet.
    /// - Throws: ``Held`` when another reader holds an unlapsed lease, ``NotMaterializing``, or `body`'s error.
    public static func holding<R: Sendable>(
        runID: Int64, owner: String, ttlSeconds: Int, client: PostgresClient, logger: Logger,
        ownerIsGone: @Sendable (String) -> Bool = { _ in false },
        _ body: (MaterializerLease) async throws -> R
    ) async throws -> R {
        let lease = MaterializerLease(runID: runID, owner: owner)
        try await lease.take(ttlSeconds: ttlSeconds, client: client, logger: logger, ownerIsGone: ownerIsGone)
        let renewal = Task { await lease.renew(every: .milliseconds(max(500, ttlSeconds * 1000 / 6)), ttlSeconds: ttlSeconds, client: client, logger: logger) }
        let result: R
        do {
            result = try await body(lease)
        } catch {
            renewal.cancel()
            await renewal.value
            try? await lease.release(client: client, logger: logger)
            throw error
        }
        renewal.cancel()
        await renewal.value
        try await lease.release(client: client, logger: logger)
        return result
    }

    /// Takes the lease: the run must be `materializing` and its lease free, lapsed or held by a process that is gone.
    /// A compare-and-set on the holder seen, so two resumes never both take it.
    private func take(ttlSeconds: Int, client: PostgresClient, logger: Logger, ownerIsGone: (String) -> Bool) async throws {
        let rows = try await client.answeredQuery(
            """
            SELECT status, materializer, coalesce(extract(epoch FROM materializer_expires_at - now())::float8, 0)
              FROM bugle.runs WHERE id = \(runID)
            """,
            logger: logger
        )
        var seen: (status: String, holder: String?, expiresIn: Double)?
        for try await (status, holder, expiresIn) in rows.decode((String, String?, Double).self) { seen = (status, holder, expiresIn) }
        guard let seen, seen.status == "materializing" else { throw NotMaterializing(runID: runID, status: seen?.status) }
        if let holder = seen.holder, holder != owner, seen.expiresIn > 0, !ownerIsGone(holder) {
            throw Held(runID: runID, owner: holder, expiresIn: seen.expiresIn)
        }
        let taken = try await client.answeredQuery(
            """
            UPDATE bugle.runs SET materializer = \(owner), materializer_expires_at = now() + make_interval(secs => \(Double(ttlSeconds)))
             WHERE id = \(runID) AND status = 'materializing' AND materializer IS NOT DISTINCT FROM \(seen.holder)
            RETURNING 1
            """,
            logger: logger
        ).collect()
        // Another process changed the holder (or the status) between the read and the update: read it again.
        if taken.isEmpty { try await take(ttlSeconds: ttlSeconds, client: client, logger: logger, ownerIsGone: ownerIsGone) }
    }

    /// Extends the lease until cancelled or lost. A failed renewal is only logged: the lease is what decides, and a
    /// reader whose lease lapsed meanwhile is stopped by the fence on its next page.
    private func renew(every interval: Duration, ttlSeconds: Int, client: PostgresClient, logger: Logger) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
                let renewed = try await client.answeredQuery(
                    """
                    UPDATE bugle.runs SET materializer_expires_at = now() + make_interval(secs => \(Double(ttlSeconds)))
                     WHERE id = \(runID) AND materializer = \(owner) RETURNING 1
                    """,
                    logger: logger
                ).collect()
                if renewed.isEmpty { return }
            } catch is CancellationError {
                return
            } catch {
                logger.warning("renewing the segment reader's lease failed; retrying", metadata: ["run": "\(runID)", "error": "\(StoreError.safeDescription(of: error))"])
            }
        }
    }

    /// Gives the lease up, if still held.
    private func release(client: PostgresClient, logger: Logger) async throws {
        _ = try await client.answeredQuery(
            "UPDATE bugle.runs SET materializer = NULL, materializer_expires_at = NULL WHERE id = \(runID) AND materializer = \(owner)",
            logger: logger
        ).collect()
    }

    /// What a transaction of the reader found when it locked the run row.
    private enum Fence: Sendable {
        /// Still `materializing` under this lease (or with no lease to check): the database's `now()` as text.
        case open(now: String)
        /// No longer `materializing` (cancelled, or made ready by another reader): nothing to write.
        case closed
        /// Another process holds the lease now: this reader must stop.
        case lost
    }

    /// Runs `body` in one transaction once run `runID` was found still `materializing` under `lease` (any holder when
    /// nil: library callers and tests materialize without one), with the run row locked (`FOR SHARE`) until the
    /// transaction ends, so that neither a cancel nor a takeover lands halfway through what `body` writes. `body` gets
    /// the database's `now()` as text.
    /// - Returns: `body`'s result, or `closed` when the run is no longer `materializing` (cancelled, or ready).
    /// - Throws: ``Lost`` when another process holds the lease now (once the transaction ended, so the caller sees it
    ///   rather than postgres-nio's transaction error around it); `body`'s errors.
    static func inFencedTransaction<T: Sendable>(
        _ lease: MaterializerLease?, runID: Int64, client: PostgresClient, logger: Logger, closed: T,
        _ body: (PostgresConnection, String) async throws -> T
    ) async throws -> T {
        let result = try await client.withOpenTransaction(logger: logger) { connection -> T? in
            switch try await fence(lease, runID: runID, connection, logger: logger) {
            case .open(let now): return try await body(connection, now)
            case .closed: return closed
            case .lost: return nil
            }
        }
        guard let result else { throw Lost(runID: runID) }
        return result
    }

    private static func fence(_ lease: MaterializerLease?, runID: Int64, _ connection: PostgresConnection, logger: Logger) async throws -> Fence {
        let rows = try await connection.answeredQuery(
            "SELECT now()::text, status, materializer FROM bugle.runs WHERE id = \(runID) FOR SHARE",
            logger: logger
        )
        var seen: (now: String, status: String, holder: String?)?
        for try await (now, status, holder) in rows.decode((String, String, String?).self) { seen = (now, status, holder) }
        guard let seen, seen.status == "materializing" else { return .closed }
        if let lease, seen.holder != lease.owner { return .lost }
        return .open(now: seen.now)
    }
}
