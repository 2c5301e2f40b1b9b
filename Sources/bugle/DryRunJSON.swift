import BugleCore
import BugleRunner
import BugleStore
import Foundation

/// `bugle run FILE --dry-run --json`: the dry run's counts as one JSON object on stdout, for scripts.
///
/// `{"campaign", "rows_read", "would_send", "per_platform": {PLATFORM: {"would_send", "largest_body_bytes"}},
/// "per_locale": {LOCALE: n}, "per_variant": {VARIANT: n}, "scheduled", "skipped": {REASON: n}, "samples":
/// [{"platform", "bytes", "headers": {NAME: VALUE} | null, "body"}], "preview": PATH | null, "validation":
/// {"checked", "valid", "refused": {CODE: n}, "halted"} | null, "not_counted": TEXT | null, "skipped_if_claimed_now":
/// {"dedupe": n | null, "period_key": KEY | null, "period_keys": [KEY] | null, "frequency_cap": n | null} | null}` — keys sorted; `samples` has at most `--samples` requests per
/// platform (`--samples 0`: none), its `body` the request's JSON with the device token replaced by its fingerprint;
/// `validation` is given with `--validate` only.
enum DryRunJSON {
    static func render(
        _ report: DryRunReport, campaign: Campaign, estimate: ClaimRulesEstimate?, samples: Int, preview: ReportDestination?, validation: DryRunValidation?
    ) -> String {
        var perPlatform: [String: Any] = [:]
        for (platform, count) in report.wouldSend {
            perPlatform[platform.rawValue] = ["would_send": count, "largest_body_bytes": report.largestBody[platform] ?? 0] as [String: Any]
        }
        let sampled = Platform.allCases.flatMap { (report.samples[$0] ?? []).prefix(samples) }
        let object: [String: Any] = [
            "campaign": campaign.name,
            "rows_read": report.rowsRead,
            "would_send": report.totalWouldSend,
            "per_platform": perPlatform,
            "per_locale": report.perLocale,
            "per_variant": report.perVariant,
            "scheduled": report.scheduled,
            "skipped": Dictionary(uniqueKeysWithValues: report.skipped.map { ($0.key.rawValue, $0.value) }),
            "samples": sampled.map(sample),
            "preview": preview.map { $0.description as Any } ?? NSNull(),
            "validation": validation.map(describe) ?? NSNull(),
            // Dedupe and the frequency cap, judged at claim time: "would_send" does not apply them; what they would
            // skip if everyone were claimed now.
            "not_counted": DryRunPrinter.claimTimeNote(campaign, estimate: estimate).map { $0 as Any } ?? NSNull(),
            "skipped_if_claimed_now": estimate.map(describe) ?? NSNull(),
        ]
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{\"campaign\":null}"
        }
        return String(decoding: data, as: UTF8.self)
    }

    private static func sample(_ request: PushRequest) -> [String: Any] {
        let body = DryRunPrinter.redactedBody(request)
        let headers = request.apns.map { Dictionary(uniqueKeysWithValues: DryRunPrinter.headers($0).map { ($0.name, $0.value) }) }
        return [
            "platform": request.platform.rawValue,
            "bytes": request.body.count,
            "headers": headers.map { $0 as Any } ?? NSNull(),
            // The request's JSON as an object (its text only if it were not JSON).
            "body": (try? JSONSerialization.jsonObject(with: Data(body.utf8))) ?? body,
        ]
    }

    private static func describe(_ estimate: ClaimRulesEstimate) -> Any {
        [
            "dedupe": estimate.periodKey == nil ? NSNull() : estimate.deduped as Any,
            "period_key": estimate.periodKey.map { $0 as Any } ?? NSNull(),
            // With local-time delivery, the periods the devices are due in (the run's own key may be none of them).
            "period_keys": estimate.periodKey == nil ? NSNull() : (estimate.periodsJudged.isEmpty ? [estimate.periodKey].compactMap { $0 } : estimate.periodsJudged.sorted()) as Any,
            "frequency_cap": estimate.cap == nil ? NSNull() : estimate.capped as Any,
        ] as [String: Any]
    }

    private static func describe(_ validation: DryRunValidation) -> Any {
        [
            "checked": validation.checked,
            "valid": validation.valid,
            "refused": validation.refused,
            "not_checked": validation.notChecked,
            "not_sent": validation.notSent,
            "halted": validation.halted.map { $0 as Any } ?? NSNull(),
        ] as [String: Any]
    }
}
