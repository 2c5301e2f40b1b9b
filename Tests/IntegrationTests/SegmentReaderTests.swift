import BugleCore
import BugleStore
import BugleTesting
import PostgresNIO
import Testing

@Suite("Segment streaming (real PostgreSQL)")
struct SegmentReaderTests {
    @Test("100,000 devices in pages of 1,000 cover every device exactly once")
    func coversEveryDeviceOnce() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 100_000)
            let campaign = LedgerTestSupport.campaign(pageSize: 1000)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: LedgerTestSupport.logger)
            var seen = [UInt8](repeating: 0, count: 100_001)
            var largestPage = 0
            let scan = try await reader.read { rows in
                largestPage = max(largestPage, rows.count)
                for row in rows {
                    let id = Int(row.deviceID ?? 0)
                    seen[id] &+= 1
                }
            }
            #expect(scan.rowsRead == 100_000)
            #expect(scan.pages == 100)
            #expect(largestPage == 1000)
            #expect(scan.upperDeviceID == 100_000)
            #expect(seen[0] == 0)
            #expect(seen.dropFirst().allSatisfy { $0 == 1 })
            // No repeated token: the hashed count answers alone (RunLedgerTests covers the counted-keys path).
            #expect(try await reader.duplicateTokenCount() == 0)
        }
    }

    /// Bugle's sessions end a transaction idle for 15 s. The segment's read-only transaction waits between pages while
    /// the pages fetched ahead wait to be handled: a handler slower than that (the ledger's writes on a starved
    /// machine) had the server end the reader's connection, and postgres-nio then waited forever for the next page
    /// (a CI run hung so, its run left `materializing` with every row written). Bounded here, so a regression fails.
    @Test("a page handler slower than the sessions' 15 s idle-in-transaction limit: the reader still reads every page")
    func slowHandlerOutlastsIdleLimit() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 3000)
            let segment = LedgerTestSupport.campaign(pageSize: 1000).segment
            let scan = try await OperationDeadline.run(within: .seconds(60)) {
                let reader = SegmentReader(client: client, segment: segment, useReaderRole: true, logger: LedgerTestSupport.logger)
                var pages = 0
                return try await reader.read { _ in
                    pages += 1
                    // Meanwhile the next pages are fetched and the transaction waits, idle, for this one.
                    if pages == 1 { try await Task.sleep(for: .seconds(17)) }
                }
            }
            #expect(scan.rowsRead == 3000)
            #expect(scan.pages == 3)
        }
    }

    @Test("devices added after the scan starts are not included (upper bound fixed at start)")
    func upperBoundIsFixed() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 3000)
            let campaign = LedgerTestSupport.campaign(pageSize: 1000)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var pages = 0
            let scan = try await reader.read { _ in
                pages += 1
                if pages == 1 {
                    _ = try await client.query(
                        "INSERT INTO bugle.devices (id, user_id, token, platform) VALUES (5000000, 'late', 'fcm-late', 'android')",
                        logger: LedgerTestSupport.logger
                    ).collect()
                }
            }
            #expect(scan.rowsRead == 3000)
        }
    }

    @Test(
        "a segment statement that tries to write is refused and every table is unchanged",
        arguments: [
            "DELETE FROM bugle.devices RETURNING id AS device_id, user_id, token, platform",
            "WITH d AS (DELETE FROM bugle.devices RETURNING *) SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM d",
            "SELECT 1 AS device_id, 'u' AS user_id, 't' AS token, 'ios' AS platform; DROP TABLE bugle.devices",
            "UPDATE bugle.devices SET is_active = false RETURNING id AS device_id, user_id, token, platform",
            "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d FOR UPDATE",
            "SELECT nextval('bugle.devices_id_seq') AS device_id, 'u' AS user_id, 't' AS token, 'ios' AS platform",
            "SELECT 1 AS device_id, 'u' AS user_id, 't' AS token, 'ios' AS platform FROM bugle.devices) s; DELETE FROM bugle.devices; SELECT * FROM (SELECT 1",
            // RELIABILITY.md #32's escapes: read-write mode switched back on, a privileged function that writes.
            "SELECT d.id AS device_id, d.user_id, d.token, d.platform, set_config('transaction_read_only', 'off', false) AS x FROM bugle.devices d",
            "SELECT d.id AS device_id, d.user_id, d.token, d.platform, public.bugle_test_purge() AS x FROM bugle.devices d",
        ]
    )
    func writingSegmentsAreRefused(sql: String) async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 50)
            // A function that deletes every device, owned by the database's owner and run with its rights.
            _ = try await client.query(
                """
                CREATE FUNCTION public.bugle_test_purge() RETURNS bigint LANGUAGE sql SECURITY DEFINER
                AS $$ WITH gone AS (DELETE FROM bugle.devices RETURNING 1) SELECT count(*) FROM gone $$
                """,
                logger: LedgerTestSupport.logger
            ).collect()
            let before = try await LedgerTestSupport.checksum(client)
            let campaign = LedgerTestSupport.campaign(sql: sql)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: LedgerTestSupport.logger)
            await #expect(throws: SegmentError.self) {
                _ = try await reader.read { _ in }
            }
            let after = try await LedgerTestSupport.checksum(client)
            #expect(before == after)
            let count = try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices WHERE is_active", as: Int64.self)
            #expect(count == 50)
        }
    }

    /// PostgreSQL checks a role change against the login, not the current role: a segment can leave
    /// `bugle_segment_reader` with `set_config('role', …)` and act as the login (here a superuser) for the rest of its
    /// transaction. What still holds is the READ ONLY transaction: even then, nothing can be written (the README says
    /// so and why Bugle's login should not be a superuser).
    @Test("a segment that takes the login's role back still writes nothing: the READ ONLY transaction holds")
    func roleEscapeStillReadOnly() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 50)
            let before = try await LedgerTestSupport.checksum(client)
            let superuser = "(SELECT rolname FROM pg_roles WHERE rolsuper ORDER BY oid LIMIT 1)"
            // Without the escape the segment runs as the reader role.
            let plain = LedgerTestSupport.campaign(sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, current_user AS now FROM bugle.devices d")
            var plainRows: [SegmentRow] = []
            _ = try await SegmentReader(client: client, segment: plain.segment, useReaderRole: true, logger: LedgerTestSupport.logger).read { plainRows += $0 }
            #expect(plainRows.count == 50 && plainRows.allSatisfy { $0.variables["now"] == .some(Migrator.segmentReaderRole) })
            let escaped = LedgerTestSupport.campaign(
                sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, set_config('role', \(superuser), false) AS was, current_user AS now FROM bugle.devices d")
            var rows: [SegmentRow] = []
            _ = try await SegmentReader(client: client, segment: escaped.segment, useReaderRole: true, logger: LedgerTestSupport.logger).read { rows += $0 }
            // The escape itself works (this is PostgreSQL's rule, not a Bugle bug)…
            #expect(rows.count == 50)
            #expect(rows.allSatisfy { $0.variables["now"] != .some(Migrator.segmentReaderRole) })
            // …but a write after it is still refused, and nothing changed.
            let writing = LedgerTestSupport.campaign(
                sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, set_config('role', \(superuser), false) AS was, public.bugle_test_purge() AS gone FROM bugle.devices d")
            _ = try await client.query(
                """
                CREATE FUNCTION public.bugle_test_purge() RETURNS bigint LANGUAGE sql
                AS $$ WITH gone AS (DELETE FROM bugle.devices RETURNING 1) SELECT count(*) FROM gone $$
                """,
                logger: LedgerTestSupport.logger
            ).collect()
            await #expect(throws: SegmentError.self) {
                _ = try await SegmentReader(client: client, segment: writing.segment, useReaderRole: true, logger: LedgerTestSupport.logger).read { _ in }
            }
            #expect(try await LedgerTestSupport.checksum(client) == before)
        }
    }

    /// Read through a login of the reader role itself (what the embedded cluster and `BUGLE_SEGMENT_DATABASE_URL` give),
    /// the session has no other role: taking the login's role back is refused, and the segment reads as the reader.
    @Test("through the reader role's own login a segment cannot take another role: set_config('role', …) is refused; plain reads work")
    func readerLoginHasNoRoleToTake() async throws {
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: LedgerTestSupport.logger) { client in
            try await LedgerTestSupport.seed(client, count: 50)
            guard try await Migrator(client: client, logger: LedgerTestSupport.logger).allowSegmentReaderLogin() else {
                Issue.record("the test server's login cannot let bugle_segment_reader log in")
                return
            }
            var login = configuration
            login.username = Migrator.segmentReaderRole
            let access = SegmentAccess(client: client, readerLogin: login)
            let plain = LedgerTestSupport.campaign(sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, session_user AS login FROM bugle.devices d")
            var rows: [SegmentRow] = []
            _ = try await access.reader(for: plain.segment, logger: LedgerTestSupport.logger).read { rows += $0 }
            #expect(rows.count == 50 && rows.allSatisfy { $0.variables["login"] == .some(Migrator.segmentReaderRole) })
            let superuser = "(SELECT rolname FROM pg_roles WHERE rolsuper ORDER BY oid LIMIT 1)"
            let escape = LedgerTestSupport.campaign(
                sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform, set_config('role', \(superuser), false) AS was FROM bugle.devices d")
            let error = await #expect(throws: SegmentError.self) {
                _ = try await access.reader(for: escape.segment, logger: LedgerTestSupport.logger).read { _ in }
            }
            #expect(error.map { String(describing: $0).contains("permission denied to set role") } == true, "\(String(describing: error))")
            // The dry run's column check goes the same way.
            #expect(try await access.reader(for: plain.segment, logger: LedgerTestSupport.logger).columnNames().contains("login"))
        }
    }

    @Test("a missing required column is a clear error")
    func missingColumn() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 5)
            let campaign = LedgerTestSupport.campaign(sql: "SELECT d.id AS device_id, d.user_id, d.token FROM bugle.devices d")
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            do {
                _ = try await reader.read { _ in }
                Issue.record("expected an error")
            } catch let error as SegmentError {
                #expect(error.description.contains("platform"))
            }
        }
    }

    @Test("extra columns arrive as template variables, NULL as nil; booleans and numbers as PostgreSQL writes them")
    func extraColumnsAreVariables() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 2)
            let sql = """
                SELECT d.id AS device_id, d.user_id, d.token, d.platform, 'Ana' AS first_name, NULL::text AS nickname, 42 AS points,
                       false AS vip, 19.90::numeric AS price, '{"a": [1]}'::jsonb AS extra
                  FROM bugle.devices d
                """
            let reader = SegmentReader(client: client, segment: LedgerTestSupport.campaign(sql: sql).segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var rows: [SegmentRow] = []
            _ = try await reader.read { rows.append(contentsOf: $0) }
            #expect(rows.count == 2)
            #expect(rows.first?.variables["first_name"] == .some("Ana"))
            #expect(rows.first?.variables["nickname"] == .some(nil))
            #expect(rows.first?.variables["points"] == .some("42"))
            // They used to come out as `0` and `19.9` (JSON decoded in Bugle).
            #expect(rows.first?.variables["vip"] == .some("false"))
            #expect(rows.first?.variables["price"] == .some("19.90"))
            #expect(rows.first?.variables["extra"] == .some(#"{"a": [1]}"#))
        }
    }

    /// The segment is read wrapped as `(…) AS s`; `to_jsonb(s)` took a column named `s` for the row, so its text
    /// failed to parse as a row, and a NULL `s` in the first row read as an empty segment: a run of 0 recipients.
    @Test("a segment column named like the reader's alias (s) is read as a variable, NULL or not, and the rows are all there", arguments: ["'x'", "NULL::text"])
    func columnNamedLikeTheAlias(_ value: String) async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 3)
            let sql = "SELECT d.id AS device_id, d.user_id, d.token, d.platform, \(value) AS s, 'y' AS e, 'z' AS p FROM bugle.devices d"
            let reader = SegmentReader(client: client, segment: LedgerTestSupport.campaign(sql: sql).segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var rows: [SegmentRow] = []
            _ = try await reader.read { rows.append(contentsOf: $0) }
            #expect(rows.count == 3)
            #expect(rows.first?.variables["s"] == .some(value == "'x'" ? "x" : nil))
            #expect(rows.first?.variables["e"] == .some("y") && rows.first?.variables["p"] == .some("z"))
        }
    }

    @Test("NULLs, empty strings and awkward text in every column survive a page's arrays, rows in device order")
    func pageArraysKeepEveryValue() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            // Rows listed out of order, pages of 2: the reader must return them by device_id whatever the input order.
            let sql = """
                SELECT * FROM (VALUES
                  (5::bigint, NULL::text, 'tok,5'::text, 'ios'::text, NULL::text, 'Europe/Berlin'::text, 'x'::text),
                  (1, 'u"1', NULL, 'android', 'pt-BR', NULL, NULL),
                  (3, '', '', NULL, 'ünï{}', '', '{"a": [1, 2]}'),
                  (2, 'user\\2', 'tok 2', 'web', 'en', 'UTC', 'ça, "va"')
                ) AS v(device_id, user_id, token, platform, locale, timezone, note)
                """
            let campaign = LedgerTestSupport.campaign(sql: sql, pageSize: 2)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var pages: [[SegmentRow]] = []
            let scan = try await reader.read { pages.append($0) }
            #expect(scan.rowsRead == 4)
            #expect(scan.arrayPages == 0, "NULLs and empty text need no second fetch")
            #expect(pages.map { $0.map(\.deviceID) } == [[1, 2], [3, 5]])
            let rows = pages.flatMap { $0 }
            #expect(rows.map(\.userID) == ["u\"1", "user\\2", "", nil])
            #expect(rows.map(\.token) == [nil, "tok 2", "", "tok,5"])
            #expect(rows.map(\.platform) == ["android", "web", nil, "ios"])
            #expect(rows.map(\.locale) == ["pt-BR", "en", "ünï{}", nil])
            #expect(rows.map(\.timezone) == [nil, "UTC", "", "Europe/Berlin"])
            #expect(rows.map { $0.variables["note"] } == [.some(nil), .some("ça, \"va\""), .some("{\"a\": [1, 2]}"), .some("x")])
        }
    }

    /// Sieves that find no candidate, some, many false ones, and too many.
    static let sieves: [(String, RepeatedTokenSieve)] = [
        ("default", RepeatedTokenSieve()),
        ("4,096 bits: mostly false candidates", RepeatedTokenSieve(log2Bits: 12)),
        ("overflowing: the full count", RepeatedTokenSieve(candidateLimit: 3)),
    ]

    @Test("the scan's duplicate count agrees with the database's full count", arguments: 0..<3)
    func duplicateCountInTheScan(_ sieve: Int) async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            // 1 + 2 repeats by hand (platform compared lowercased; NULL platform, token or device_id never counted), then
            // 300 fillers listed again about six pages later.
            let sql = """
                SELECT * FROM (VALUES
                  (1::bigint, 'u1'::text, 'tokA'::text, 'ios'::text), (2, 'u2', 'tokA', 'IOS'), (3, 'u3', 'tokA', 'android'),
                  (4, 'u4', 'tokB', 'android'), (5, 'u5', 'tokB', 'android'), (6, 'u6', 'tokB', 'android'),
                  (7, 'u7', 'tokC', NULL), (8, 'u8', 'tokC', NULL), (9, 'u9', NULL, 'web'), (10, 'u10', NULL, 'web'),
                  (NULL, 'u11', 'tokD', 'web'), (12, 'u12', 'tokD', 'web')
                ) AS v(device_id, user_id, token, platform)
                UNION ALL SELECT 100 + g, 'f', 'fill' || g, 'android' FROM generate_series(1, 3000) g
                UNION ALL SELECT 10000 + g, 'f', 'fill' || g, 'ANDROID' FROM generate_series(1, 3000, 10) g
                """
            let campaign = LedgerTestSupport.campaign(sql: sql, pageSize: 500)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: true, logger: LedgerTestSupport.logger)
            var rows = 0
            let scan = try await reader.read(duplicateSieve: Self.sieves[sieve].1) { rows += $0.count }
            #expect(rows == 3311)
            #expect(scan.duplicateTokens == 303, "\(Self.sieves[sieve].0)")
            #expect(try await reader.duplicateTokenCount() == 303)
            // Without a sieve nothing is counted.
            #expect(try await reader.read { _ in }.duplicateTokens == nil)
        }
    }

    @Test("a page with a value holding U+001F, or with a device id twice, is read again as arrays, values intact")
    func separatorInAValue() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            // Page 1: the separator only inside a template variable (its JSON escapes it): packed. Page 2: inside a token
            // and a locale: arrays. Page 3: clean again. Page 4: device id 9 twice: arrays. Page 5: device 10, packed.
            let sql = """
                SELECT * FROM (VALUES
                  (1::bigint, 'u1'::text, 't1'::text, 'ios'::text, 'en'::text, 'a' || chr(31) || 'b'),
                  (2, 'u2', 't2', 'web', NULL, NULL),
                  (3, 'u3', 't' || chr(31) || '3', 'android', 'pt' || chr(31), 'c'),
                  (4, NULL, 't4', 'ios', 'de', 'd'),
                  (5, 'u5', 't5', 'ios', '', 'e'), (6, 'u6', NULL, 'web', 'fr', 'f'),
                  (9, 'u9a', 't9', 'ios', 'en', 'g'), (9, 'u9b', 't9', 'ios', 'en', 'g'), (10, 'u10', 't10', 'ios', 'en', 'h')
                ) AS v(device_id, user_id, token, platform, locale, note)
                """
            let campaign = LedgerTestSupport.campaign(sql: sql, pageSize: 2)
            let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var rows: [SegmentRow] = []
            let scan = try await reader.read { rows.append(contentsOf: $0) }
            #expect(scan.arrayPages == 2)
            #expect(scan.pages == 5)
            #expect(rows.map(\.deviceID) == [1, 2, 3, 4, 5, 6, 9, 9, 10])
            #expect(rows.prefix(6).map(\.token) == ["t1", "t2", "t\u{1F}3", "t4", "t5", nil])
            #expect(rows.prefix(6).map(\.locale) == ["en", nil, "pt\u{1F}", "de", "", "fr"])
            #expect(rows.prefix(6).map(\.userID) == ["u1", "u2", "u3", nil, "u5", "u6"])
            #expect(rows.first?.variables["note"] == .some("a\u{1F}b"))

            let repeated = LedgerTestSupport.campaign(sql: sql + " WHERE v.device_id >= 9", pageSize: 3)
            let again = SegmentReader(client: client, segment: repeated.segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var repeatedRows: [SegmentRow] = []
            let repeatedScan = try await again.read { repeatedRows.append(contentsOf: $0) }
            #expect(repeatedScan.arrayPages == 1)
            #expect(repeatedRows.compactMap(\.userID).sorted() == ["u10", "u9a", "u9b"])
            #expect(repeatedRows.map(\.deviceID) == [9, 9, 10])
        }
    }

    /// A reader of `sql` through the main login.
    static func reader(_ client: PostgresClient, _ sql: String, pageSize: Int = 1000, useReaderRole: Bool = false) -> SegmentReader {
        SegmentReader(
            client: client, segment: LedgerTestSupport.campaign(sql: sql, pageSize: pageSize).segment, useReaderRole: useReaderRole,
            logger: LedgerTestSupport.logger)
    }

    /// The description of the segment error a whole read of `reader` ends with; nil, recorded as an issue, when the read
    /// succeeds.
    static func readError(_ reader: SegmentReader) async throws -> String? {
        do {
            _ = try await reader.read { _ in }
        } catch let error as SegmentError {
            return error.description
        }
        Issue.record("expected a segment error")
        return nil
    }

    /// A device id on rows of different tokens used to lose rows silently where a page ended (the keyset reads on
    /// after the last id), and to keep them all inside a page.
    @Test("a device id on rows with different tokens is refused, inside a page or across its end; a device a join lists twice is read", arguments: [500, 2])
    func repeatedDeviceIDs(_ pageSize: Int) async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 10)
            let clashing = "SELECT CASE WHEN d.id = 3 THEN 2 ELSE d.id END AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d"
            let error = try await Self.readError(Self.reader(client, clashing, pageSize: pageSize))
            #expect(error?.contains("device_id 2 is on rows with different tokens") == true, "\(error ?? "")")
            // Every device twice (a join that repeats rows): each device is read, once or twice, and nothing is refused.
            let fanOut = "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d CROSS JOIN generate_series(1, 2)"
            let twice = Self.reader(client, fanOut, pageSize: pageSize + 1)
            var ids: [Int64] = []
            _ = try await twice.read { ids += $0.compactMap(\.deviceID) }
            #expect(Set(ids) == Set(1...10))
        }
    }

    /// Each page runs the segment's SQL again. Here every run of it returns 5 rows fewer (a counter in a setting
    /// stands in for random(), deterministically): the pages would silently hold another audience than the count.
    @Test("a segment that returns other rows each time it runs is refused, saying why and what to write instead")
    func unrepeatableSegment() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 100)
            let sql = """
                SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d
                 WHERE d.id <= (SELECT 100 - 5 * set_config('bugle_test.runs',
                                  (coalesce(nullif(current_setting('bugle_test.runs', true), ''), '0')::int + 1)::text, true)::int)
                """
            let error = try await Self.readError(Self.reader(client, sql, pageSize: 10, useReaderRole: true))
            #expect(error?.contains("returned 95 row(s) when counted and 60 when read page by page") == true, "\(error ?? "")")
            #expect(error?.contains("ORDER BY md5(") == true)
        }
    }

    @Test("a segment with two columns of one name is refused when prepared and when read")
    func repeatedColumnName() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 5)
            let reader = Self.reader(client, "SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.user_id AS token FROM bugle.devices d")
            await #expect { _ = try await reader.columnNames() } throws: { "\($0)".contains("more than one column named token") }
            await #expect { _ = try await reader.read { _ in } } throws: { "\($0)".contains("more than one column named token") }
        }
    }

    @Test("a segment with a bind parameter ($1) is refused when prepared and when read, saying a segment takes no parameters")
    func bindParameter() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 5)
            let reader = Self.reader(client, "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d WHERE d.locale = $1")
            var prepared = ""
            do { _ = try await reader.columnNames() } catch { prepared = "\(error)" }
            let read = try await Self.readError(reader) ?? ""
            // It said "bind message supplies 0 parameters, but prepared statement \"\" requires 1 (SQLSTATE 08P01)".
            for message in [prepared, read] {
                #expect(message.contains("the SQL has bind parameters ($1) that nothing fills: a segment is one complete SELECT"), "\(message)")
            }
        }
    }

    @Test("a row's value the server quotes in a data error is withheld from the segment error")
    func dataErrorWithholdsTheValue() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 5)
            let sql = "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d WHERE d.token::numeric > 0"
            let error = try await Self.readError(Self.reader(client, sql))
            #expect(error?.contains(#"invalid input syntax for type numeric: "(a row's value)" (SQLSTATE 22P02)"#) == true, "\(error ?? "")")
            #expect(error?.contains("abcd") == false && error?.contains("fcm-") == false)
        }
    }

    @Test("a read for a campaign keeps only the columns its templates use, and registered_at")
    func keepsOnlyUsedVariables() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 3)
            let sql = """
                SELECT d.id AS device_id, d.user_id, d.token, d.platform, 'Ana' AS first_name, 'sk_live_x' AS api_key,
                       now() AS registered_at, NULL::text AS "it's"
                  FROM bugle.devices d
                """
            let segment = LedgerTestSupport.campaign(sql: sql).segment
            for (kept, expected) in [(Set(["first_name", "it's"]), ["first_name", "it's", "registered_at"]), (Set<String>(), ["registered_at"])] {
                let reader = SegmentReader(client: client, segment: segment, useReaderRole: false, variables: kept, logger: LedgerTestSupport.logger)
                var rows: [SegmentRow] = []
                _ = try await reader.read { rows += $0 }
                #expect(rows.count == 3)
                #expect(rows.allSatisfy { $0.variables.keys.sorted() == expected }, "\(rows.first?.variables ?? [:])")
                #expect(rows.first?.variables["it's"] == (kept.isEmpty ? nil : .some(nil)))
            }
        }
    }

    @Test("a page handler that fails stops the scan with its error, and the connection serves the next read")
    func handlerErrorStopsTheScan() async throws {
        struct Stop: Error {}
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 20_000)
            let reader = SegmentReader(
                client: client, segment: LedgerTestSupport.campaign(pageSize: 500).segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var pages = 0
            await #expect(throws: Stop.self) {
                _ = try await reader.read { _ in
                    pages += 1
                    if pages == 3 { throw Stop() }
                }
            }
            #expect(pages == 3)
            var rows = 0
            let scan = try await reader.read { rows += $0.count }
            #expect(rows == 20_000 && scan.pages == 40)
        }
    }

    /// RELIABILITY.md §2.4 #33: hostile or slow segment SQL ends in a segment error, soon, and leaves nothing running.
    @Test("a segment that sleeps is stopped by its statement timeout; one of 10^12 rows is refused at max_rows + 1 (not by the 60 s timeout), as more than max_rows; the server is left idle")
    func hostileSegments() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 1_000)
            var sleeping = LedgerTestSupport.campaign(
                sql: "SELECT d.id AS device_id, d.user_id, d.token, d.platform FROM bugle.devices d WHERE pg_sleep(3600) IS NOT NULL").segment
            sleeping.statementTimeoutSeconds = 1
            // 1,000⁴ rows: counting them all would take far longer than the 60 s timeout this segment keeps.
            var huge = LedgerTestSupport.campaign(
                sql: "SELECT a.id AS device_id, a.user_id, a.token, a.platform FROM bugle.devices a CROSS JOIN bugle.devices b CROSS JOIN bugle.devices c CROSS JOIN bugle.devices d").segment
            huge.maxRows = 100_000
            // 1,000 rows over a cap of 5: the count stops at 6, which it used to give as the segment's size.
            var capped = LedgerTestSupport.campaign().segment
            capped.maxRows = 5
            for (segment, expected) in [
                (sleeping, "statement timeout"),
                (huge, "the segment returns more than 100000 rows, over its cap (segment.max_rows: 100000)"),
                (capped, "the segment returns more than 5 rows, over its cap (segment.max_rows: 5)"),
            ] {
                let reader = SegmentReader(client: client, segment: segment, useReaderRole: true, logger: LedgerTestSupport.logger)
                do {
                    _ = try await reader.read { _ in Issue.record("a page of a refused segment was handed on") }
                    Issue.record("expected an error for \(expected)")
                } catch let error as SegmentError {
                    #expect(error.description.contains(expected), "\(error.description)")
                }
            }
            let running = try await LedgerTestSupport.scalar(
                client,
                "SELECT count(*)::bigint FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()",
                as: Int64.self)
            #expect(running == 0)
        }
    }

    @Test("a statement that fails part-way through the segment is a segment error, not a hang")
    func failingPageIsAnError() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 5_000)
            let sql = "SELECT d.id AS device_id, d.user_id, d.token, d.platform, 10 / (d.id - 3210) AS boom FROM bugle.devices d"
            let reader = SegmentReader(
                client: client, segment: LedgerTestSupport.campaign(sql: sql, pageSize: 1000).segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var rows = 0
            do {
                _ = try await reader.read { rows += $0.count }
                Issue.record("expected an error")
            } catch let error as SegmentError {
                #expect(error.description.contains("division by zero"))
            }
            #expect(rows <= 3000)
        }
    }
}
