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
        ]
    )
    func writingSegmentsAreRefused(sql: String) async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 50)
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

    @Test("extra columns arrive as template variables, NULL as nil")
    func extraColumnsAreVariables() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 2)
            let sql = "SELECT d.id AS device_id, d.user_id, d.token, d.platform, 'Ana' AS first_name, NULL::text AS nickname, 42 AS points FROM bugle.devices d"
            let reader = SegmentReader(client: client, segment: LedgerTestSupport.campaign(sql: sql).segment, useReaderRole: false, logger: LedgerTestSupport.logger)
            var rows: [SegmentRow] = []
            _ = try await reader.read { rows.append(contentsOf: $0) }
            #expect(rows.count == 2)
            #expect(rows.first?.variables["first_name"] == .some("Ana"))
            #expect(rows.first?.variables["nickname"] == .some(nil))
            #expect(rows.first?.variables["points"] == .some("42"))
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
}
