import BugleCore
import Foundation
import Logging
import PostgresNIO
import Synchronization

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
    /// The optional column that decides which of several rows listing one token is kept: the latest registered
    /// (RELIABILITY.md #35: a shared token belongs to its latest-registered owner). Like any other extra column it is
    /// also a template variable.
    public static let registeredAtColumn = "registered_at"
    /// The types ``registeredAtColumn`` may have.
    static let registeredAtTypes: Set<PostgresDataType> = [.timestamptz, .timestamp, .date]

    /// Refuses a ``registeredAtColumn`` among the segment's result `columns` that is not a timestamp or a date.
    /// Throws when the segment's `device_id` is not an integer (bigint, int, smallint or numeric): the contract's
    /// bigint. A text id would be cast row by row and fail the run halfway through reading the segment.
    static func checkDeviceID(_ columns: PostgresColumns) throws {
        let integers: Set<PostgresDataType> = [.int2, .int4, .int8, .numeric]
        guard let column = columns.first(where: { $0.name == "device_id" }), !integers.contains(column.dataType) else { return }
        let type = column.dataType.knownSQLName?.lowercased() ?? "oid \(column.dataType.rawValue)"
        throw SegmentError("the segment's device_id column is of type \(type); it must be an integer (bigint), the device's unique id")
    }

    static func checkRegisteredAt(_ columns: PostgresColumns) throws {
        guard let column = columns.first(where: { $0.name == registeredAtColumn }), !registeredAtTypes.contains(column.dataType) else { return }
        let type = column.dataType.knownSQLName?.lowercased() ?? "oid \(column.dataType.rawValue)"
        throw SegmentError(
            "the segment's \(registeredAtColumn) column is of type \(type); it must be timestamptz, timestamp or date "
                + "(of several rows listing one token, the one registered latest is kept)"
        )
    }

    private let client: PostgresClient
    private let segment: Segment
    private let logger: Logger
    private let useReaderRole: Bool
    private let readerLogin: DatabaseConfiguration?
    private let options: SessionOptions
    /// The extra columns a read keeps as each row's variables (with ``registeredAtColumn``); nil keeps every one.
    private let variables: Set<String>?

    /// - Parameters:
    ///   - useReaderRole: run as `bugle_segment_reader` (see ``Migrator``) when available, through `SET LOCAL ROLE`
    ///     on a connection of `client`. PostgreSQL checks role changes against the login, so a segment could take
    ///     the login's role back (`set_config('role', …)`); ``readerLogin`` closes that.
    ///   - readerLogin: When given, every read runs on its own connection logged in with it (the reader role itself):
    ///     the session has no other role to take.
    ///   - options: Server settings (libpq's `options`) for the transactions that run the segment's SQL.
    ///   - variables: The columns the campaign's templates use: of the other columns, a read keeps only these (and
    ///     ``registeredAtColumn``), so a `SELECT u.*` does not copy every column of a users table into the ledger. Nil
    ///     keeps every column.
    public init(
        client: PostgresClient, segment: Segment, useReaderRole: Bool, readerLogin: DatabaseConfiguration? = nil, options: SessionOptions = SessionOptions(),
        variables: Set<String>? = nil, logger: Logger
    ) {
        self.variables = variables
        self.client = client
        self.segment = segment
        self.useReaderRole = useReaderRole
        self.readerLogin = readerLogin
        self.options = options
        self.logger = logger
    }

    /// Runs `body` on a connection for the segment: a fresh one logged in as ``readerLogin`` when given (closed
    /// afterwards), else one of `client`'s.
    private func withSegmentConnection<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        guard let readerLogin else {
            return try await client.withConnection(isolation: isolation) { connection in try await body(connection) }
        }
        let connection: PostgresConnection
        do {
            connection = try await Database.connect(readerLogin, logger: logger).0
        } catch {
            throw SegmentError(
                "cannot log in as \(readerLogin.username) to read the segment: " + Self.serverMessage(error) + readerLogin.refusedLoginNote(error))
        }
        do {
            let result = try await body(connection)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Reads every page and hands it to `onPage`, in `device_id` order (it may write elsewhere; the next pages are
    /// fetched and decoded meanwhile).
    /// - Parameter duplicateSieve: given, also count the rows that share a (platform, token) with an earlier row
    ///   (``SegmentScan/duplicateTokens``), in the scan's own snapshot: the sieve watches the pages as they arrive,
    ///   and PostgreSQL counts exactly among the rows of its candidate tokens at the end.
    /// - Throws: ``SegmentError`` for bad SQL, missing columns, timeouts and over-cap segments.
    public func read(
        duplicateSieve: RepeatedTokenSieve? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ onPage: ([SegmentRow]) async throws -> Void
    ) async throws -> SegmentScan {
        try await withSegmentConnection(isolation: isolation) { connection in
            try await inReadOnlyTransaction(connection, isolation: isolation) { connection in
                let sieve = duplicateSieve.map(SieveBox.init)
                var scan = try await scanInTransaction(connection, sieve: sieve, isolation: isolation, onPage)
                if let sieve {
                    scan.duplicateTokens = try await duplicateTokens(sieve.sieve.withLock { $0 }, connection)
                }
                return scan
            }
        }
    }

    /// The sieve of one scan, fed by its page decodes one after another (the lock only makes that checkable).
    private final class SieveBox: Sendable {
        let sieve: Mutex<RepeatedTokenSieve>

        init(_ sieve: RepeatedTokenSieve) { self.sieve = Mutex(sieve) }

        func add(_ page: [SegmentRow]) {
            let tokens = page.compactMap { $0.platform == nil ? nil : $0.token }
            sieve.withLock { $0.add(tokens) }
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
            try? await connection.rollBack(after: error, logger: logger)
            if error is PSQLError || StoreError.isConnectionLoss(error) { throw Self.wrapped(error) }
            throw error
        }
    }

    private func scanInTransaction(
        _ connection: PostgresConnection, sieve: SieveBox?, isolation: isolated (any Actor)?, _ onPage: ([SegmentRow]) async throws -> Void
    ) async throws -> SegmentScan {
        let body = Self.wrap(segment.sql)
        var scan = SegmentScan()

        // Columns, from preparing the statement (no row is read), checked as `columnNames()` checks them.
        let columns = try await describedColumns(connection, body: body)
        scan.columns = columns

        // Read at most max_rows + 1 rows: a segment over the cap (a cross join of 10^12 rows) is refused as soon as the
        // cap is passed, not after the statement timeout. Within the cap the LIMIT changes nothing.
        let boundsQuery = PostgresQuery(
            unsafeSQL: """
                SELECT max(c.device_id)::bigint, count(*) FILTER (WHERE c.device_id IS NULL)::bigint, count(*)::bigint
                  FROM (SELECT s.device_id FROM \(body) LIMIT $1) c
                """,
            binds: binds(segment.maxRows + 1)
        )
        var total: Int64 = 0
        for try await (upper, nulls, count) in try await userQuery(connection, boundsQuery).decode((Int64?, Int64, Int64).self) {
            scan.upperDeviceID = upper
            scan.nullDeviceIDs = nulls
            total = count
        }
        guard total <= Int64(segment.maxRows) else {
            // The count stops at max_rows + 1: how many more there are is not known.
            throw SegmentError("the segment returns more than \(segment.maxRows) rows, over its cap (segment.max_rows: \(segment.maxRows))")
        }
        guard let upper = scan.upperDeviceID else { return scan }

        let hasLocale = columns.contains("locale")
        let hasTimezone = columns.contains("timezone")
        let unknown = columns.filter { !Self.known.contains($0) }
        let extra = variables.map { kept in unknown.filter { kept.contains($0) || $0 == Self.registeredAtColumn } } ?? unknown
        let keptOnly = extra.count == unknown.count
            ? "" : " WHERE e.key IN (\(extra.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }.joined(separator: ", ")))"
        // A page is one row, aggregated over the keyset page in `device_id` order: decoding 5,000 rows from as many
        // DataRow messages was a third of a dry run's CPU (postgres-nio's per-row message handling and cell iteration);
        // one message is read in a tight loop. See ``SegmentPageColumns`` for its two forms.
        let select = [
            "s.device_id::bigint AS device_id", "s.user_id::text AS user_id", "s.token::text AS token", "s.platform::text AS platform",
            hasLocale ? "s.locale::text AS locale" : nil,
            hasTimezone ? "s.timezone::text AS timezone" : nil,
            // Each value as PostgreSQL writes it in JSON (`false`, `19.90`, `2026-11-27T10:00:00+00:00`), as text: JSON
            // numbers and booleans decoded in Bugle came out as `0`/`1` and `19.9`.
            extra.isEmpty ? nil : "(SELECT jsonb_object_agg(e.key, e.value #>> '{}') FROM jsonb_each(to_jsonb(s.*)) e\(keptOnly))::text AS variables",
        ].compactMap { $0 }.joined(separator: ", ")
        let textColumns: [String?] = [
            "user_id", "token", "platform", hasLocale ? "locale" : nil, hasTimezone ? "timezone" : nil, extra.isEmpty ? nil : "variables",
        ]
        let packed = ["array_agg(p.device_id)"] + textColumns.map { column in
            guard let column else { return "NULL::text, NULL::bigint[]" }
            return "string_agg(coalesce(p.\(column), ''), E'\\x1f'), array_agg(p.device_id) FILTER (WHERE p.\(column) IS NULL)"
        }
        let arrays = ["array_agg(p.device_id)"] + textColumns.map { $0.map { "array_agg(p.\($0))" } ?? "NULL::text[]" }
        let source = "FROM (SELECT \(select) FROM \(body) WHERE s.device_id > $1 AND s.device_id <= $2 ORDER BY s.device_id LIMIT $3) AS p"
        let pager = Pager(
            packedSQL: "SELECT \(packed.joined(separator: ", ")) \(source)", arraysSQL: "SELECT \(arrays.joined(separator: ", ")) \(source)",
            upper: upper, size: segment.pageSize, extra: extra, logger: logger
        )

        // Three stages overlap: PostgreSQL builds the next pages (a producer task that asks for page i + 1 as soon as
        // page i arrives: its keyset needs only page i's last id, read first), Bugle decodes page i, and `onPage`
        // handles page i - 1 (which may write elsewhere). Asking for the next page only once all three stages were
        // done left PostgreSQL idle for the slowest of the others on every page. At most two fetched pages wait, so
        // memory stays bounded. One query at a time runs on the connection still: postgres-nio queues the rare second
        // fetch of a page in the arrays form behind the producer's.
        let fetched = PageHandoff<Pager.RawPage>(capacity: 2)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask(executorPreference: Self.producerExecutor) {
                do {
                    var after = Int64.min
                    while let raw = try await pager.fetch(after: after, connection) {
                        try await fetched.send(raw)
                        guard raw.full else { break }
                        after = raw.last
                    }
                    fetched.finish()
                } catch {
                    fetched.finish(throwing: error)
                }
            }
            do {
                var raw = try await fetched.next()
                var handled: [SegmentRow]?
                while raw != nil || handled != nil {
                    let current = raw
                    async let decoded = pager.decode(current, connection, sieve: sieve)
                    if let page = handled {
                        do {
                            try await onPage(page)
                        } catch {
                            _ = try? await decoded
                            throw error
                        }
                    }
                    handled = nil
                    if let (rows, again) = try await decoded {
                        scan.pages += 1
                        scan.rowsRead += Int64(rows.count)
                        if again { scan.arrayPages += 1 }
                        handled = rows
                    }
                    raw = current == nil ? nil : try await fetched.next()
                }
            } catch {
                // Let the producer's query in flight finish before the transaction ends.
                fetched.cancel()
                try? await group.waitForAll()
                throw error
            }
            try await group.waitForAll()
            // Every row but those without a device id was paged, unless the SQL returned other rows for the pages than
            // for the count (random(), a sample) or device ids repeat across a page boundary (the keyset skips them).
            if scan.rowsRead + scan.nullDeviceIDs != total {
                try await explainShortfall(connection, body: body, counted: total, paged: scan.rowsRead + scan.nullDeviceIDs)
            }
            return scan
        }
    }

    /// The segment's column names from its row description, refused unless every required column is there once,
    /// `device_id` is an integer and `registered_at`, if any, a timestamp.
    private func describedColumns(_ connection: PostgresConnection, body: String) async throws -> [String] {
        let rows = try await userQuery(connection, PostgresQuery(unsafeSQL: "SELECT * FROM \(body) LIMIT 0"))
        let columns = rows.columns
        for try await _ in rows {}
        let names = columns.map(\.name)
        try Self.requireColumns(names)
        try Self.requireDistinct(names)
        try Self.checkDeviceID(columns)
        try Self.checkRegisteredAt(columns)
        return names
    }

    /// Why the pages held another number of rows than the count. A device id listed again with the same token (a
    /// join that repeats a device) is harmless: the keyset skipped copies of a row already read. A device id on rows
    /// of different tokens is refused (the keyset skipped devices), and so is SQL that does not return the same rows
    /// each time it runs.
    private func explainShortfall(_ connection: PostgresConnection, body: String, counted: Int64, paged: Int64) async throws {
        let repeated = PostgresQuery(
            unsafeSQL: """
                SELECT s.device_id::bigint, count(DISTINCT (s.platform::text, s.token::text)) > 1
                  FROM \(body) WHERE s.device_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1 ORDER BY 2 DESC LIMIT 1
                """)
        for try await (id, conflicting) in try await userQuery(connection, repeated).decode((Int64, Bool).self) {
            if conflicting { throw Self.repeatedDeviceID(id) }
            return
        }
        throw SegmentError(
            "the segment returned \(counted) row(s) when counted and \(paged) when read page by page: its SQL does not return the same "
                + "rows each time it runs (random(), TABLESAMPLE without REPEATABLE, a LIMIT whose ORDER BY leaves ties), and Bugle "
                + "runs it once per page of segment.page_size rows. For a random sample, order by a hash of a seed: "
                + "ORDER BY md5(d.id::text || 'spring-sale') LIMIT n"
        )
    }

    /// A `device_id` found on rows of different tokens: the contract's id is the device's own.
    static func repeatedDeviceID(_ id: Int64) -> SegmentError {
        SegmentError(
            "device_id \(id) is on rows with different tokens; each device needs its own device_id (the segment is read in pages "
                + "ordered by it, and a dead token is deactivated by it)"
        )
    }

    /// Where page producers run (see ``DedicatedTaskExecutor``).
    private static let producerExecutor = DedicatedTaskExecutor(label: "bugle.segment-pages")

    /// One keyset page query of the segment.
    private struct Pager: Sendable {
        /// The page in ``SegmentPageColumns``' packed form, and in its arrays form.
        var packedSQL: String
        var arraysSQL: String
        var upper: Int64
        var size: Int
        /// Template-variable columns (read from the row's JSON).
        var extra: [String]
        var logger: Logger

        /// A page as it arrived (packed form), with what the next page's keyset needs.
        struct RawPage: Sendable {
            /// The keyset lower bound it was fetched with.
            var after: Int64
            var row: PostgresRow
            var ids: [Int64?]
            /// The largest device id (every paged row has one).
            var last: Int64
            /// A full page: more may follow.
            var full: Bool
        }

        /// The page after device id `last`, undecoded but for its ids; nil when it has no rows.
        func fetch(after last: Int64, _ connection: PostgresConnection) async throws -> RawPage? {
            guard let row = try await query(packedSQL, after: last, connection), let ids = try SegmentPageColumns.ids(row) else { return nil }
            let largest = ids.reduce(Int64.min) { max($0, $1 ?? .min) }
            return RawPage(after: last, row: row, ids: ids, last: largest, full: ids.count >= size)
        }

        /// The page's rows in `device_id` order, and whether it was fetched again in the arrays form.
        /// - Parameter sieve: sees the page's tokens.
        func decode(_ raw: RawPage?, _ connection: PostgresConnection, sieve: SieveBox?) async throws -> (rows: [SegmentRow], again: Bool)? {
            guard let raw else { return nil }
            let page: [SegmentRow]
            let again: Bool
            if let columns = try SegmentPageColumns(packed: raw.row, ids: raw.ids) {
                (page, again) = (try rows(of: columns), false)
            } else {
                let row = try await query(arraysSQL, after: raw.after, connection)
                (page, again) = (try row.map { try rows(of: SegmentPageColumns(arrays: $0)) } ?? [], true)
            }
            sieve?.add(page)
            return (page, again)
        }

        /// The page query's one row.
        private func query(_ sql: String, after last: Int64, _ connection: PostgresConnection) async throws -> PostgresRow? {
            var binds = PostgresBindings(capacity: 3)
            binds.append(last)
            binds.append(upper)
            binds.append(Int64(size))
            let rows: PostgresRowSequence
            // Between pages the server may have ended the session (a restart): `answeredQuery` fails such a page
            // instead of waiting for an answer that never comes.
            do {
                rows = try await connection.answeredQuery(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
            } catch {
                throw SegmentReader.wrapped(error)
            }
            var result: PostgresRow?
            for try await row in rows { result = row }
            return result
        }

        /// The page's rows, in `device_id` order.
        private func rows(of columns: SegmentPageColumns) throws -> [SegmentRow] {
            let ids = columns.ids
            func column(_ index: Int) -> [String?]? { columns.texts[index] }
            let (userIDs, tokens, platforms, locales, timezones, json) = (column(0), column(1), column(2), column(3), column(4), column(5))
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
                let clash = zip(page, page.dropFirst()).first { $0.deviceID == $1.deviceID && ($0.platform != $1.platform || $0.token != $1.token) }
                if let id = clash?.0.deviceID { throw SegmentReader.repeatedDeviceID(id) }
            }
            return page
        }
    }

    /// The login's `options`, the per-statement timeout and, when available, the read-only role, for the current
    /// transaction (the campaign's timeout and the role after the options, so that neither can be undone by them).
    private func restrict(_ connection: PostgresConnection) async throws {
        for setting in options.settings {
            do {
                _ = try await connection.answeredQuery("SELECT set_config(\(setting.name), \(setting.value), true)", logger: logger).collect()
            } catch {
                throw SegmentError("the database URL's options set \(setting.name), which the server refused: " + Self.serverMessage(error))
            }
        }
        let timeout = "\(segment.statementTimeoutSeconds)s"
        // The transaction waits between pages by design (the next pages are fetched only while at most two wait to be
        // handled, and handling one waits for the ledger's writes): Bugle's sessions end a transaction idle for 15 s
        // (a frozen worker's row locks), which here killed the reader of a slow materialization, and postgres-nio then
        // waited forever for its next page. This transaction holds no lock of Bugle's, only its snapshot.
        _ = try await connection.answeredQuery(
            "SELECT set_config('statement_timeout', \(timeout), true), set_config('idle_in_transaction_session_timeout', '0', true)",
            logger: logger
        ).collect()
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
        _ = try await connection.answeredQuery(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
    }

    private func userQuery(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> PostgresRowSequence {
        do {
            return try await connection.answeredQuery(query, logger: logger)
        } catch {
            throw Self.wrapped(error)
        }
    }

    /// A server or connection error as a segment error, marked when the connection was lost.
    static func wrapped(_ error: any Error) -> SegmentError {
        if let segment = error as? SegmentError { return segment }
        return SegmentError(serverMessage(error), connectionLost: StoreError.isConnectionLoss(error))
    }

    /// The server's primary message and SQLSTATE. A data exception's (class 22) quotes the value that failed, which
    /// is a row's (a token, an address): it is withheld.
    static func serverMessage(_ error: any Error) -> String {
        if let psql = error as? PSQLError, let message = psql.serverInfo?[.message] {
            let state = psql.serverInfo?[.sqlState]
            if state == "08P01", let required = message.range(of: "requires "), message.contains("bind message supplies 0 parameters") {
                // `$1` in the SQL: the server's words are about the protocol ("bind message supplies 0 parameters, but
                // prepared statement \"\" requires 1"), not the file.
                let count = Int(message[required.upperBound...].prefix { $0.isNumber }) ?? 1
                let named = count == 1 ? "$1" : "$1 … $\(count)"
                return "the SQL has bind parameters (\(named)) that nothing fills: a segment is one complete SELECT; write the values into it"
            }
            let shown = state?.hasPrefix("22") == true ? withholdingQuotedValues(message) : message
            return shown + (state.map { " (SQLSTATE \($0))" } ?? "")
        }
        if let store = error as? StoreError { return store.message }
        return "the statement failed: \(type(of: error))"
    }

    /// `message` with each double-quoted part (PostgreSQL quotes a value as `"…"`, doubling none) replaced by
    /// `"(a row's value)"`.
    static func withholdingQuotedValues(_ message: String) -> String {
        var result = ""
        var quoted = false
        for character in message {
            if character == "\"" {
                result += quoted ? "(a row's value)\"" : "\""
                quoted.toggle()
            } else if !quoted {
                result.append(character)
            }
        }
        return quoted ? result + "(a row's value)" : result
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
    /// Throws unless `columns` holds every column a segment must return (DESIGN.md's contract).
    static func requireColumns(_ columns: [String]) throws {
        for name in required where !columns.contains(name) {
            throw SegmentError("the segment must return a column named \(name) (it returns: \(columns.joined(separator: ", ")))")
        }
    }

    /// Throws when two of the segment's columns share a name: the page query could not tell them apart.
    static func requireDistinct(_ columns: [String]) throws {
        var seen: Set<String> = []
        for name in columns where !seen.insert(name).inserted {
            throw SegmentError("the segment returns more than one column named \(name); give each column its own name (… AS other_name)")
        }
    }

    /// The segment's result columns, from preparing it (no row is read): `SELECT * FROM (<sql>) s LIMIT 0` in the
    /// same read-only transaction, role and timeout as a real read.
    /// - Throws: ``SegmentError`` for SQL the server refuses, a required column missing (``requireColumns(_:)``), or a
    ///   ``registeredAtColumn`` that is not a timestamp.
    public func columnNames() async throws -> [String] {
        try await withSegmentConnection { connection in
            try await inReadOnlyTransaction(connection) { connection in
                try await describedColumns(connection, body: Self.wrap(segment.sql))
            }
        }
    }

    /// Rows sharing a (platform, token) with an earlier row — what a real run collapses — counted by the
    /// database alone, in its own read-only transaction. ``read(duplicateSieve:isolation:_:)`` counts the
    /// same inside the scan, mostly without this pass.
    public func duplicateTokenCount() async throws -> Int64 {
        try await withSegmentConnection { connection in
            try await inReadOnlyTransaction(connection) { connection in
                try await countAllDuplicateTokens(connection)
            }
        }
    }

    /// One key per row: platform, a newline (no valid platform holds one), token.
    private static let duplicateKey = "lower(s.platform::text) || E'\\n' || s.token::text"

    /// The scan's duplicate count from its sieve, in the scan's transaction. No candidate: none (every repeat is a
    /// candidate). Candidates: PostgreSQL counts distinct keys among the rows holding a candidate token only (every row
    /// of a repeated key holds one), a hashed `= ANY` filter over one pass instead of sorting every row's key. Too many
    /// candidates: the full count.
    private func duplicateTokens(_ sieve: RepeatedTokenSieve, _ connection: PostgresConnection) async throws -> Int64 {
        if sieve.overflowed { return try await countAllDuplicateTokens(connection) }
        guard !sieve.candidates.isEmpty else { return 0 }
        var binds = PostgresBindings(capacity: 1)
        binds.append(Array(sieve.candidates))
        let sql = """
            SELECT (count(*) - count(DISTINCT (\(Self.duplicateKey)) COLLATE "C"))::bigint FROM \(Self.wrap(segment.sql)) \
            WHERE s.token::text COLLATE "C" = ANY($1::text[]) AND s.platform IS NOT NULL AND s.device_id IS NOT NULL
            """
        return try await count(connection, PostgresQuery(unsafeSQL: sql, binds: binds))
    }

    /// Every row's key counted by PostgreSQL. First the distinct 64-bit hashes of the keys, an integer sort (0.7 s at
    /// 1,000,000 rows against 1.3 s for the keys themselves). Equal keys have equal hashes, so no repeated hash means
    /// no duplicate, exactly. Only when a hash repeats are the keys themselves counted, sorted under "C", a byte
    /// comparison (the database's collation sorted the pair of columns 3.4 times slower still).
    private func countAllDuplicateTokens(_ connection: PostgresConnection) async throws -> Int64 {
        let rows = "FROM \(Self.wrap(segment.sql)) WHERE s.token IS NOT NULL AND s.platform IS NOT NULL AND s.device_id IS NOT NULL AND $1::int = 1"
        let hashed = try await count(connection, PostgresQuery(unsafeSQL: "SELECT (count(*) - count(DISTINCT hashtextextended(\(Self.duplicateKey), 0)))::bigint \(rows)", binds: binds(1)))
        guard hashed > 0 else { return 0 }
        return try await count(connection, PostgresQuery(unsafeSQL: "SELECT (count(*) - count(DISTINCT (\(Self.duplicateKey)) COLLATE \"C\"))::bigint \(rows)", binds: binds(1)))
    }

    private func count(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> Int64 {
        var count: Int64 = 0
        for try await (value,) in try await userQuery(connection, query).decode((Int64,).self) {
            count = value
        }
        return count
    }
}
