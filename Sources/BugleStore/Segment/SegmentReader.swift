import BugleCore
import Foundation
import Logging
import PostgresNIO

/// Streams a campaign segment out of PostgreSQL in keyset pages on `device_id`, never holding more than a page.
///
/// Safety layers (RELIABILITY.md §1.12): the SQL runs inside a `REPEATABLE READ READ ONLY` transaction (one
/// snapshot for every page) with a per-statement `statement_timeout`, as the `bugle_segment_reader` role when the
/// server has it (read-only privileges), through the extended protocol (one statement only: `SELECT 1; DROP …`
/// is refused by the server), and wrapped as a subquery (a data-modifying `WITH` or a bare `DELETE` is a syntax
/// error there). The upper bound is fixed at the start, so devices added during the run are not picked up.
public struct SegmentReader: Sendable {
    static let required = ["device_id", "user_id", "token", "platform"]
    static let known: Set<String> = ["device_id", "user_id", "token", "platform", "locale", "timezone"]

    private let client: PostgresClient
    private let segment: Segment
    private let logger: Logger
    private let useReaderRole: Bool

    /// - Parameters:
    ///   - useReaderRole: run as `bugle_segment_reader` (see ``Migrator``) when available.
    public init(client: PostgresClient, segment: Segment, useReaderRole: Bool, logger: Logger) {
        self.client = client
        self.segment = segment
        self.useReaderRole = useReaderRole
        self.logger = logger
    }

    /// Reads every page and hands it to `onPage` (which may write elsewhere; it runs between FETCHes).
    /// - Throws: ``SegmentError`` for bad SQL, missing columns, timeouts and over-cap segments.
    public func read(
        isolation: isolated (any Actor)? = #isolation,
        _ onPage: ([SegmentRow]) async throws -> Void
    ) async throws -> SegmentScan {
        try await client.withConnection(isolation: isolation) { connection in
            try await run(on: connection, isolation: isolation, onPage)
        }
    }

    private func run(on connection: PostgresConnection, isolation: isolated (any Actor)?, _ onPage: ([SegmentRow]) async throws -> Void) async throws -> SegmentScan {
        try await inReadOnlyTransaction(connection, isolation: isolation) { connection in
            try await scanInTransaction(connection, isolation: isolation, onPage)
        }
    }

    /// Runs `body` inside the segment's `REPEATABLE READ READ ONLY` transaction with its timeout and role, always
    /// rolled back; server errors become ``SegmentError``.
    private func inReadOnlyTransaction<T: Sendable>(
        _ connection: PostgresConnection,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await exec(connection, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do {
            try await restrict(connection)
            let result = try await body(connection)
            try await exec(connection, "ROLLBACK")
            return result
        } catch {
            try? await exec(connection, "ROLLBACK")
            if error is PSQLError { throw SegmentError(Self.serverMessage(error)) }
            throw error
        }
    }

    private func scanInTransaction(_ connection: PostgresConnection, isolation: isolated (any Actor)?, _ onPage: ([SegmentRow]) async throws -> Void) async throws -> SegmentScan {
        let body = Self.wrap(segment.sql)
        var scan = SegmentScan()

        // Columns, from the first row (an empty segment has nothing to page).
        let probe = PostgresQuery(unsafeSQL: "SELECT to_jsonb(s)::text FROM \(body) LIMIT $1", binds: binds(1))
        var firstRow: String?
        for try await (json,) in try await userQuery(connection, probe).decode((String?,).self) { firstRow = json }
        guard let firstRow else { return scan }
        let columns = try Self.columns(ofJSONRow: firstRow)
        scan.columns = columns
        for name in Self.required where !columns.contains(name) {
            throw SegmentError("the segment must return a column named \(name) (it returns: \(columns.joined(separator: ", ")))")
        }

        let boundsQuery = PostgresQuery(
            unsafeSQL: "SELECT max(s.device_id)::bigint, count(*) FILTER (WHERE s.device_id IS NULL)::bigint, count(*)::bigint FROM \(body) WHERE $1::int = 1",
            binds: binds(1)
        )
        var total: Int64 = 0
        for try await (upper, nulls, count) in try await userQuery(connection, boundsQuery).decode((Int64?, Int64, Int64).self) {
            scan.upperDeviceID = upper
            scan.nullDeviceIDs = nulls
            total = count
        }
        guard total <= Int64(segment.maxRows) else {
            throw SegmentError("the segment returns \(total) rows, over segment.max_rows (\(segment.maxRows))")
        }
        guard let upper = scan.upperDeviceID else { return scan }

        let hasLocale = columns.contains("locale")
        let hasTimezone = columns.contains("timezone")
        let extra = columns.filter { !Self.known.contains($0) }
        // A page is one row of arrays, aggregated over the keyset page in `device_id` order: decoding 5,000 rows
        // from as many DataRow messages was a third of a dry run's CPU (postgres-nio's per-row message handling and
        // cell iteration); one message of arrays is read in a tight loop.
        let select = [
            "s.device_id::bigint AS device_id", "s.user_id::text AS user_id", "s.token::text AS token", "s.platform::text AS platform",
            hasLocale ? "s.locale::text AS locale" : nil,
            hasTimezone ? "s.timezone::text AS timezone" : nil,
            extra.isEmpty ? nil : "to_jsonb(s)::text AS variables",
        ].compactMap { $0 }.joined(separator: ", ")
        let aggregates = [
            "array_agg(p.device_id)", "array_agg(p.user_id)", "array_agg(p.token)", "array_agg(p.platform)",
            hasLocale ? "array_agg(p.locale)" : "NULL::text[]",
            hasTimezone ? "array_agg(p.timezone)" : "NULL::text[]",
            extra.isEmpty ? "NULL::text[]" : "array_agg(p.variables)",
        ].joined(separator: ", ")
        let pageSQL = """
            SELECT \(aggregates) FROM (SELECT \(select) FROM \(body) \
            WHERE s.device_id > $1 AND s.device_id <= $2 ORDER BY s.device_id LIMIT $3) AS p
            """
        let pager = Pager(sql: pageSQL, upper: upper, size: segment.pageSize, extra: extra, logger: logger)

        // The next page is fetched while `onPage` handles this one: PostgreSQL produces rows while Bugle renders or
        // writes, instead of each waiting for the other (one query at a time on the connection still).
        var page = try await pager.page(after: Int64.min, connection)
        // Every paged row has a device_id (the keyset condition excludes NULLs).
        while let last = page.last?.deviceID {
            let full = page.count == segment.pageSize
            async let next = full ? pager.page(after: last, connection) : []
            scan.pages += 1
            scan.rowsRead += Int64(page.count)
            do {
                try await onPage(page)
            } catch {
                _ = try? await next
                throw error
            }
            page = try await next
        }
        return scan
    }

    /// One keyset page query of the segment.
    private struct Pager: Sendable {
        var sql: String
        var upper: Int64
        var size: Int
        /// Template-variable columns (read from the row's JSON).
        var extra: [String]
        var logger: Logger

        func page(after last: Int64, _ connection: PostgresConnection) async throws -> [SegmentRow] {
            var binds = PostgresBindings(capacity: 3)
            binds.append(last)
            binds.append(upper)
            binds.append(Int64(size))
            let rows: PostgresRowSequence
            do {
                rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
            } catch {
                throw SegmentError(SegmentReader.serverMessage(error))
            }
            var page: [SegmentRow] = []
            for try await row in rows {
                page = try rowsOfArrays(row)
            }
            return page
        }

        /// The page's rows from its one row of column arrays, in `device_id` order.
        private func rowsOfArrays(_ row: PostgresRow) throws -> [SegmentRow] {
            var cells = row.makeIterator()
            func next() throws -> PostgresBinaryArray? {
                guard let cell = cells.next() else { return nil }
                return try PostgresBinaryArray(cell)
            }
            guard let ids = try next()?.integers() else { return [] }
            let userIDs = try next()?.texts()
            let tokens = try next()?.texts()
            let platforms = try next()?.texts()
            let locales = try next()?.texts()
            let timezones = try next()?.texts()
            let json = try next()?.texts()
            for column in [userIDs, tokens, platforms, locales, timezones, json] {
                guard column.map({ $0.count == ids.count }) ?? true else {
                    throw SegmentError("the server sent a segment page whose columns differ in length")
                }
            }
            var page: [SegmentRow] = []
            page.reserveCapacity(ids.count)
            for index in ids.indices {
                let variables = try json?[index].map { try SegmentReader.variables(ofJSONRow: $0, names: extra) } ?? [:]
                page.append(
                    SegmentRow(
                        deviceID: ids[index], userID: userIDs?[index], token: tokens?[index], platform: platforms?[index],
                        locale: locales?[index], timezone: timezones?[index], variables: variables
                    )
                )
            }
            // array_agg takes its input in the subquery's order, so this holds; the keyset needs the last row to be
            // the largest device_id, so it is checked rather than assumed (one comparison per row).
            if !zip(page, page.dropFirst()).allSatisfy({ ($0.deviceID ?? .min) < ($1.deviceID ?? .min) }) {
                page.sort { ($0.deviceID ?? .min) < ($1.deviceID ?? .min) }
            }
            return page
        }
    }

    /// Per-statement timeout and, when available, the read-only role, for the current transaction.
    private func restrict(_ connection: PostgresConnection) async throws {
        let timeout = "\(segment.statementTimeoutSeconds)s"
        _ = try await connection.query("SELECT set_config('statement_timeout', \(timeout), true)", logger: logger).collect()
        if useReaderRole {
            try await exec(connection, "SET LOCAL ROLE bugle_segment_reader")
        }
    }

    /// `(<user sql>\n) AS s` — the newline ends a trailing `--` comment inside the user's SQL.
    static func wrap(_ sql: String) -> String {
        var trimmed = sql.trimmingCharacters(in: .whitespacesAndNewlines)
        while trimmed.hasSuffix(";") { trimmed = String(trimmed.dropLast()).trimmingCharacters(in: .whitespacesAndNewlines) }
        return "(\n" + trimmed + "\n) AS s"
    }

    private func binds(_ value: Int) -> PostgresBindings {
        var binds = PostgresBindings(capacity: 1)
        binds.append(value)
        return binds
    }

    private func exec(_ connection: PostgresConnection, _ sql: String) async throws {
        _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
    }

    private func userQuery(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> PostgresRowSequence {
        do {
            return try await connection.query(query, logger: logger)
        } catch {
            throw SegmentError(Self.serverMessage(error))
        }
    }

    static func serverMessage(_ error: any Error) -> String {
        if let psql = error as? PSQLError, let message = psql.serverInfo?[.message] {
            let state = psql.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + state
        }
        return "the statement failed: \(type(of: error))"
    }

    static func columns(ofJSONRow json: String) throws -> [String] {
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            throw SegmentError("the segment's rows are not records")
        }
        return object.keys.sorted()
    }

    static func variables(ofJSONRow json: String, names: [String]) throws -> [String: String?] {
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return [:] }
        var result: [String: String?] = [:]
        for name in names {
            switch object[name] {
            case nil, is NSNull: result[name] = .some(nil)
            case let value as String: result[name] = value
            case let value as NSNumber: result[name] = value.stringValue
            case let value?:
                let data = try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys])
                result[name] = String(decoding: data, as: UTF8.self)
            }
        }
        return result
    }
}

extension SegmentReader {
    /// The segment's result columns, from preparing it (no row is read): `SELECT * FROM (<sql>) s LIMIT 0` in the
    /// same read-only transaction, role and timeout as a real read.
    /// - Throws: ``SegmentError`` for SQL the server refuses.
    public func columnNames() async throws -> [String] {
        try await client.withConnection { connection in
            try await inReadOnlyTransaction(connection) { connection in
                let rows = try await userQuery(connection, PostgresQuery(unsafeSQL: "SELECT * FROM \(Self.wrap(segment.sql)) LIMIT 0"))
                let names = rows.columns.map(\.name)
                for try await _ in rows {}
                return names
            }
        }
    }

    /// Rows sharing a (platform, token) with an earlier row — what a real run collapses — counted by the
    /// database in its own read-only transaction (used by the dry run, which keeps no token set in memory).
    public func duplicateTokenCount() async throws -> Int64 {
        try await client.withConnection { connection in
            try await inReadOnlyTransaction(connection) { connection in
                // One key per row: platform, a newline (no valid platform holds one), token. First the distinct 64-bit
                // hashes of the keys, an integer sort (0.7 s at 1,000,000 rows against 1.3 s for the keys themselves).
                // Equal keys have equal hashes, so no repeated hash means no duplicate: the usual answer, exact. Only
                // when a hash repeats are the keys themselves counted, sorted under "C", a byte comparison (the
                // database's collation sorted the pair of columns 3.4 times slower still).
                let key = "lower(s.platform::text) || E'\\n' || s.token::text"
                let rows = "FROM \(Self.wrap(segment.sql)) WHERE s.token IS NOT NULL AND s.platform IS NOT NULL AND s.device_id IS NOT NULL AND $1::int = 1"
                let hashed = try await count(connection, "SELECT (count(*) - count(DISTINCT hashtextextended(\(key), 0)))::bigint \(rows)")
                guard hashed > 0 else { return 0 }
                return try await count(connection, "SELECT (count(*) - count(DISTINCT (\(key)) COLLATE \"C\"))::bigint \(rows)")
            }
        }
    }

    private func count(_ connection: PostgresConnection, _ sql: String) async throws -> Int64 {
        var count: Int64 = 0
        for try await (value,) in try await userQuery(connection, PostgresQuery(unsafeSQL: sql, binds: binds(1))).decode((Int64,).self) {
            count = value
        }
        return count
    }
}
