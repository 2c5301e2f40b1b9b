import BugleCore
import BugleStore
import Foundation

/// `--json`: the final summary of a run as one JSON object on stdout, for scripts.
///
/// `{"run_id", "campaign", "kind" (`campaign`, or `test` for `bugle send-test`), "status", "reason", "started_at", "finished_at", "duration_seconds", "paused_seconds",
/// "rate_per_second" (answered notifications per second of unpaused time, as `run_overview` counts them), "recipients",
/// "rows_scanned", "duplicates_collapsed", "counts": [{"platform", "status", "reason", "count"}], "report":
/// {"path", "rows"} (null when no report was written), "phase_seconds": {"materialize", "send", "report"}}` — keys sorted, absent values as `null`;
/// `phase_seconds` holds the phases this invocation went through (`bugle report` has only "report").
enum SummaryJSON {
    static func render(runID: Int64, record: RunRecord?, lines: [SummaryLine], variants: [VariantSummaryLine] = [], reportPath: String?, reportRows: Int64, phases: [String: Double] = [:]) -> String {
        let object: [String: Any] = [
            "run_id": runID,
            "campaign": record?.campaign ?? NSNull(),
            "kind": record?.kind ?? NSNull(),
            "status": record?.status.rawValue ?? NSNull(),
            "reason": record?.pauseReason ?? record?.failureReason ?? NSNull(),
            "started_at": record?.startedAt ?? NSNull(),
            "finished_at": record?.finishedAt ?? NSNull(),
            "duration_seconds": record?.durationSeconds ?? NSNull(),
            "paused_seconds": record?.pausedSeconds ?? NSNull(),
            "rate_per_second": record?.rate(answered: SummaryPrinter.answered(lines)) ?? NSNull(),
            "recipients": record?.recipientsTotal ?? NSNull(),
            "rows_scanned": record?.rowsScanned ?? NSNull(),
            "duplicates_collapsed": record?.duplicatesCollapsed ?? 0,
            "counts": lines.map { ["platform": $0.platform, "status": $0.status, "reason": $0.reason, "count": $0.count] as [String: Any] },
            "variants": variants.map { ["variant": $0.variant, "status": $0.status, "count": $0.count] as [String: Any] },
            "report": reportPath.map { ["path": $0, "rows": reportRows] as [String: Any] } ?? NSNull(),
            "phase_seconds": phases,
        ]
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{\"run_id\":\(runID)}"
        }
        return String(decoding: data, as: UTF8.self)
    }
}
