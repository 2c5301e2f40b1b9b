import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging
import PostgresNIO

/// Wiring for dry runs: stream the segment through a ``DryRunReport``, optionally writing the preview CSV.
enum DryRunExecution {
    /// - Parameters:
    ///   - client: Bugle's database, where what dedupe and the frequency cap would skip now is judged.
    ///   - csv: Where the preview CSV goes (none when nil).
    ///   - validator: With `--validate`, sends each FCM recipient's message with `validate_only`.
    static func execute(
        campaign: Campaign,
        client: PostgresClient,
        segments: SegmentAccess,
        csv: ReportDestination?,
        validator: DryRunValidation? = nil,
        legacyPayloadLimit: Int = LegacyAPNsSettings.defaultPayloadLimit,
        samples: Int = 1,
        logger: Logger
    ) async throws -> (DryRunReport, DryRunValidation?, ClaimRulesEstimate?) {
        let reader = try await segments.reader(for: campaign.segment, variables: Set(campaign.templateVariables), logger: logger)
        let now = Date()
        var estimate = try await ClaimRulesEstimate.make(for: campaign, now: now, client: client, logger: logger)
        let writer = try csv.map { try ReportFileWriter($0) }
        var report = DryRunReport(
            campaign: campaign, now: Int(now.timeIntervalSince1970), legacyPayloadLimit: legacyPayloadLimit, sampleLimit: samples,
            collectsUserIDs: estimate != nil)
        var validation = validator
        do {
            if let writer {
                var header: [UInt8] = []
                CSVFormat.appendRecord(DryRunReport.previewHeader, to: &header)
                try writer.write(header)
            }
            let scan = try await reader.read(duplicateSieve: RepeatedTokenSieve()) { rows in
                let chunk = report.add(rows, csv: writer != nil)
                if let writer { try writer.write(chunk) }
                await validation?.validate(rows)
                try await estimate?.add(userIDs: report.pageUserIDs, periodKeys: report.pagePeriodKeys)
            }

            report.addUnpaged(.missingDeviceID, count: scan.nullDeviceIDs)
            report.addUnpaged(.duplicateToken, count: scan.duplicateTokens ?? 0)
            try writer?.commit()
        } catch {
            writer?.abandon()
            throw error
        }
        return (report, validation, estimate)
    }
}
