import BugleCore
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Testing

@Suite("CSV report read in pages of arrays (real PostgreSQL)")
struct ReportExportTests {
    typealias Support = LedgerTestSupport

    /// Ledger rows written straight into `run_recipients` (the report reads nothing else): awkward text in every text
    /// column, NULLs, formula starts, and `finished_at` values that test the timestamp text's edges.
    static let insertAwkwardRows = """
        INSERT INTO bugle.run_recipients (run_id, seq, device_id, user_id, platform, provider, state, attempts,
                                          outcome_code, provider_message_id, locale, variant, finished_at)
        SELECT 4242, g * 3, CASE WHEN g % 11 = 0 THEN NULL ELSE g END,
               (ARRAY['plain', 'with,comma', 'with "quotes"', E'two\\nlines', '=SUM(A1)', '+1', '-2', '@x', E'\\ttab', E'cr\\r', 'ünïcödé', ''])[g % 12 + 1] || g,
               'ios', 'apns', (ARRAY['sent', 'invalid_token', 'pending', 'failed_permanent'])[g % 4 + 1], g % 5,
               CASE WHEN g % 7 = 0 THEN NULL ELSE '410:Unregistered,' || g END,
               CASE WHEN g % 2 = 0 THEN md5(g::text) END,
               CASE WHEN g % 3 = 0 THEN NULL ELSE 'de' END, CASE WHEN g % 4 = 0 THEN 'b' END,
               CASE g % 9
                 WHEN 0 THEN NULL
                 WHEN 1 THEN '1999-12-31 23:59:59.9999+00'::timestamptz
                 WHEN 2 THEN '2000-01-01 00:00:00+00'
                 WHEN 3 THEN '0999-05-05 12:00:00.001+00'
                 WHEN 4 THEN '2024-02-29 23:59:59.999999+00'
                 WHEN 5 THEN '1970-01-01 00:00:00.0005+00'
                 WHEN 6 THEN 'infinity'
                 WHEN 7 THEN '12345-06-07 08:09:10.011+00'
                 ELSE '2026-11-26 03:24:22.5179+00'::timestamptz + g * interval '1.0013 second'
               END
          FROM generate_series(1, 2500) g
        """

    /// The report as the exporter wrote it before pages: one row per recipient, every column as text, `finished_at`
    /// by the server's `to_char`.
    static func rowByRowReport(_ client: PostgresClient, runID: Int64) async throws -> [UInt8] {
        var out: [UInt8] = []
        CSVFormat.appendRecord(ReportExporter.header, to: &out)
        let rows = try await client.query(
            """
            SELECT run_id::text, device_id::text, user_id, platform, provider, state, outcome_code, provider_message_id,
                   attempts::text, locale, variant, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
              FROM bugle.run_recipients WHERE run_id = \(runID) ORDER BY seq
            """,
            logger: Support.logger
        )
        for try await row in rows {
            var leadingComma = false
            for cell in row {
                if let bytes = cell.bytes {
                    bytes.withUnsafeReadableBytes { CSVFormat.appendField(utf8: $0, leadingComma: leadingComma, to: &out) }
                } else if leadingComma {
                    out.append(UInt8(ascii: ","))
                }
                leadingComma = true
            }
            CSVFormat.endRecord(&out)
        }
        return out
    }

    @Test("pages of any size write the same bytes as reading row by row, in seq order, NULLs and awkward text included")
    func pagedReportMatchesRowByRow() async throws {
        try await Support.withFreshDatabase { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: Self.insertAwkwardRows), logger: Support.logger).collect()
            let expected = try await Self.rowByRowReport(client, runID: 4242)
            let directory = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-report-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            // One page; a full page then a page of one row; pages that end exactly at the last row (2,500 = 5 × 500); many short pages.
            for pageRows in [10_000, 2_499, 500, 7] {
                let path = directory.appendingPathComponent("report-\(pageRows).csv").path
                let rows = try await ReportExporter(client: client, logger: Support.logger, pageRows: pageRows).export(runID: 4242, to: path)
                #expect(rows == 2_500)
                let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                #expect(written == expected, "pages of \(pageRows)")
            }
            // The timestamp edges really are in the report (truncated milliseconds, a year before 1000, five digits).
            let text = String(decoding: expected, as: UTF8.self)
            for stamp in ["1999-12-31T23:59:59.999Z", "2000-01-01T00:00:00.000Z", "0999-05-05T12:00:00.001Z", "2024-02-29T23:59:59.999Z",
                          "1970-01-01T00:00:00.000Z", "12345-06-07T08:09:10.011Z"] {
                #expect(text.contains(stamp), "\(stamp)")
            }
        }
    }

    @Test("a run without rows gets the header alone; a failed export leaves no file and returns its connection")
    func emptyRunAndFailure() async throws {
        try await Support.withFreshDatabase { client in
            let directory = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-report-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let empty = directory.appendingPathComponent("empty.csv").path
            let rows = try await ReportExporter(client: client, logger: Support.logger).export(runID: 99, to: empty)
            #expect(rows == 0)
            let header = try String(contentsOfFile: empty, encoding: .utf8)
            #expect(header == CSVFormat.record(ReportExporter.header))

            // The ledger's table is gone for this session's statements: the first page fails.
            _ = try await client.query("ALTER TABLE bugle.run_recipients RENAME TO run_recipients_away", logger: Support.logger).collect()
            let failed = directory.appendingPathComponent("failed.csv").path
            await #expect(throws: (any Error).self) {
                try await ReportExporter(client: client, logger: Support.logger, pageRows: 3).export(runID: 99, to: failed)
            }
            #expect(!FileManager.default.fileExists(atPath: failed))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("failed") }
            #expect(leftovers.isEmpty)
            // The connection went back outside any transaction: a plain statement on the pool still works.
            _ = try await client.query("ALTER TABLE bugle.run_recipients_away RENAME TO run_recipients", logger: Support.logger).collect()
            let again = try await ReportExporter(client: client, logger: Support.logger).export(runID: 99, to: empty)
            #expect(again == 0)
        }
    }
}
