import BugleCore
import Foundation
import Logging
import PostgresNIO

/// Writes a run's per-recipient CSV report from the ledger (RFC 4180, formula-neutralised), streaming rows so
/// memory stays flat; the file is written under a temporary name, fsync'd and renamed, so a failure never
/// leaves a truncated report at the final path.
public struct ReportExporter: Sendable {
    /// The CSV header, in column order.
    public static let header = [
        "run_id", "device_id", "user_id", "platform", "provider", "status", "reason", "provider_message_id",
        "attempts", "locale", "variant", "finished_at",
    ]

    private let client: PostgresClient
    private let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Writes the report of `runID` to `path`.
    /// - Returns: the number of data rows written.
    @discardableResult
    public func export(runID: Int64, to path: String) async throws -> Int64 {
        let output = try AtomicFileWriter(path: path)
        do {
            var buffer: [UInt8] = []
            buffer.reserveCapacity(1 << 16)
            CSVFormat.appendRecord(Self.header, to: &buffer)
            let rows = try await client.query(
                """
                SELECT run_id::text, device_id::text, user_id, platform, provider, state, outcome_code, provider_message_id,
                       attempts::text, locale, variant, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                  FROM bugle.run_recipients WHERE run_id = \(runID) ORDER BY seq
                """,
                logger: logger
            )
            var count: Int64 = 0
            // Every column is text, NULL an empty field: each cell's bytes go straight into the CSV.
            for try await row in rows {
                var leadingComma = false
                for cell in row {
                    if let bytes = cell.bytes {
                        bytes.withUnsafeReadableBytes { CSVFormat.appendField(utf8: $0, leadingComma: leadingComma, to: &buffer) }
                    } else if leadingComma {
                        buffer.append(UInt8(ascii: ","))
                    }
                    leadingComma = true
                }
                CSVFormat.endRecord(&buffer)
                count += 1
                if buffer.count >= 1 << 16 {
                    try output.write(buffer)
                    buffer.removeAll(keepingCapacity: true)
                }
            }
            try output.write(buffer)
            try output.commit()
            return count
        } catch {
            output.abandon()
            throw error
        }
    }
}
