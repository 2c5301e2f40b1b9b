import BugleCore
import Foundation
import Logging
import PostgresNIO

/// Writes a run's per-recipient CSV report from the ledger (RFC 4180, formula-neutralised), a page of rows at a time
/// so memory stays flat, through a ``ReportFileWriter``: a regular file is written under a temporary name, fsync'd
/// and renamed, so a failure never leaves a truncated report there.
///
/// Pages are read in one `REPEATABLE READ READ ONLY` transaction, so the report is one snapshot of the ledger, as a
/// single statement would be. Each page is one row of arrays (``ReportPage``), and the next page is asked for as soon
/// as one arrives, so PostgreSQL builds it while Bugle writes this one.
public struct ReportExporter: Sendable {
    /// The CSV header, in column order.
    public static let header = [
        "run_id", "device_id", "user_id", "platform", "provider", "status", "reason", "provider_message_id",
        "attempts", "locale", "variant", "finished_at",
    ]

    private let client: PostgresClient
    private let logger: Logger
    private let pageRows: Int

    /// - Parameter pageRows: Ledger rows per page read (tests use small pages to cross many page boundaries).
    public init(client: PostgresClient, logger: Logger, pageRows: Int = 10_000) {
        self.client = client
        self.logger = logger
        self.pageRows = max(1, pageRows)
    }

    /// Writes the report of `runID` to the file at `path` (``ReportDestination/path(_:)``).
    /// - Returns: the number of data rows written.
    @discardableResult
    public func export(runID: Int64, to path: String) async throws -> Int64 {
        try await export(runID: runID, to: .path(path))
    }

    /// Writes the report of `runID` to `destination`.
    /// - Returns: the number of data rows written.
    /// - Throws: ``FileWriteError`` when the destination cannot be written, or the ledger's errors.
    @discardableResult
    public func export(runID: Int64, to destination: ReportDestination) async throws -> Int64 {
        try await client.withConnection { connection in
            let output = try ReportFileWriter(destination)
            do {
                let count = try await connection.inReadOnlySnapshot(logger: logger) { connection in
                    try await write(runID: runID, from: connection, to: output)
                }
                try output.commit()
                return count
            } catch {
                output.abandon()
                throw error
            }
        }
    }

    /// Writes the header and every page of the run to `output`, reading the next page while writing the current one.
    private func write(runID: Int64, from connection: PostgresConnection, to output: ReportFileWriter) async throws -> Int64 {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 20)
        CSVFormat.appendRecord(Self.header, to: &buffer)
        var count: Int64 = 0
        var next: Task<ReportPage, any Error>? = readPage(runID: runID, after: nil, from: connection)
        do {
            while let pending = next {
                let page = try await pending.value
                // A short page is the last one.
                next = page.count < pageRows ? nil : readPage(runID: runID, after: page.lastSeq, from: connection)
                page.appendRecords(to: &buffer)
                count += Int64(page.count)
                try output.write(buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        } catch {
            // The connection goes back only once no page read is still running on it.
            if let next {
                next.cancel()
                _ = try? await next.value
            }
            throw error
        }
        try output.write(buffer)
        return count
    }

    /// Starts reading the page of rows after `seq` (from the first when nil).
    private func readPage(runID: Int64, after seq: Int64?, from connection: PostgresConnection) -> Task<ReportPage, any Error> {
        let logger = self.logger
        let limit = pageRows
        return Task {
            let rows = try await connection.answeredQuery(
                """
                SELECT \(unescaped: ReportPage.selectList)
                  FROM (SELECT seq, run_id, device_id, user_id, platform, provider, state, outcome_code, provider_message_id,
                               attempts, locale, variant, finished_at
                          FROM bugle.run_recipients WHERE run_id = \(runID) AND seq > \(seq ?? Int64.min)
                         ORDER BY seq LIMIT \(limit)) page
                """,
                logger: logger
            )
            var page: ReportPage?
            for try await row in rows { page = try ReportPage(row) }
            guard let page else { throw StoreError(.query, "the report page came back without a row") }
            return page
        }
    }
}
