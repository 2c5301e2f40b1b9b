import BugleCore
import BugleRunner
import BugleStore
import Foundation

/// Terminal output of a dry run.
enum DryRunPrinter {
    /// What the dry run does not count: dedupe and the frequency cap are judged as each recipient is claimed, against
    /// what other runs have sent by then, so "would be sent" counts them as sent; with `estimate`, what the two rules
    /// would skip if the run claimed everyone now.
    static func claimTimeNote(_ campaign: Campaign, estimate: ClaimRulesEstimate?) -> String? {
        var rules: [String] = []
        if campaign.dedupe != .none { rules.append("dedupe (\(campaign.dedupe.rawValue))") }
        if campaign.delivery.frequencyCap != nil { rules.append("the frequency cap") }
        guard !rules.isEmpty else { return nil }
        var note = rules.joined(separator: " and ") + (rules.count > 1 ? " are" : " is") + " applied as the run claims each recipient, against what other runs "
            + "have sent by then; the counts above do not apply them"
        guard let estimate else { return note }
        var now: [String] = []
        if let period = estimate.periodKey {
            // The periods the devices are due in (local-time delivery), which need not include the run's own.
            let periods = estimate.periodsJudged.isEmpty ? [period] : estimate.periodsJudged.sorted()
            let already =
                period == "once"
                ? "users this notification type already reached"
                : periods.count > 1
                    ? "users already notified in the period each device is due in: \(periods.joined(separator: ", "))"
                    : "users already notified in period \(periods[0])"
            now.append("\(estimate.deduped) by dedupe (\(already))")
        }
        if let cap = estimate.cap { now.append("\(estimate.capped) by the frequency cap (users at \(cap.count) per \(window(cap.perSeconds)))") }
        note += "; claimed now, " + now.joined(separator: " and ") + " would be skipped"
        return note
    }

    /// A cap's window as the campaign file writes it: `7d`, `12h`, `90m`, else seconds.
    static func window(_ seconds: Int) -> String {
        for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] where seconds % size == 0 { return "\(seconds / size)\(unit)" }
        return "\(seconds)s"
    }

    /// - Parameter console: Where the lines go (stderr when stdout holds a JSON summary, as `bugle demo --json`).
    static func print(
        _ report: DryRunReport, campaign: Campaign, estimate: ClaimRulesEstimate?, samples: Int, preview: ReportDestination?, console: Console = Console()
    ) {
        console.say("dry run of \(campaign.name): \(report.rowsRead) row(s) read, \(report.totalWouldSend) would be sent")
        console.say("  per platform:")
        for platform in Platform.allCases {
            guard let n = report.wouldSend[platform] else { continue }
            console.say("    \(platform.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0)) \(n)  (largest body \(report.largestBody[platform] ?? 0) bytes)")
        }
        console.say("  per locale:")
        for (locale, n) in report.perLocale.sorted(by: { $0.key < $1.key }) {
            console.say("    \(locale.padding(toLength: 10, withPad: " ", startingAt: 0)) \(n)")
        }
        if !report.perVariant.isEmpty {
            console.say("  per variant:")
            for (variant, n) in report.perVariant.sorted(by: { $0.key < $1.key }) {
                console.say("    \(variant.padding(toLength: 10, withPad: " ", startingAt: 0)) \(n)")
            }
        }
        if report.scheduled > 0 {
            console.say("  scheduled for later (send_at, local time, quiet hours): \(report.scheduled); see not_before in the preview CSV")
        }
        if !report.skipped.isEmpty {
            console.say("  skipped:")
            for (reason, n) in report.skipped.sorted(by: { $0.key < $1.key }) {
                console.say("    \(reason.rawValue.padding(toLength: 20, withPad: " ", startingAt: 0)) \(n)")
            }
        }
        if let note = claimTimeNote(campaign, estimate: estimate) { console.say("  note: \(note)") }
        if samples > 0 {
            for platform in Platform.allCases {
                for request in (report.samples[platform] ?? []).prefix(samples) {
                    console.say("  sample \(platform.rawValue) (\(request.body.count) bytes):")
                    if let apns = request.apns {
                        console.say("    headers: " + headers(apns).map { "\($0.name): \($0.value)" }.joined(separator: ", "))
                    }
                    console.say("    body: " + redactedBody(request))
                }
            }
        }
        if let preview { console.say("preview: \(preview)") }
    }

    /// The `--validate` tally.
    static func print(_ validation: DryRunValidation) {
        Swift.print("FCM validate_only: \(validation.checked) checked, \(validation.valid) valid")
        for (code, n) in validation.refused.sorted(by: { $0.key < $1.key }) {
            Swift.print("    \(code.padding(toLength: 20, withPad: " ", startingAt: 0)) \(n)")
        }
        if !validation.notSent.isEmpty {
            Swift.print("  not sent for validation: " + Self.tally(validation.notSent))
        }
        if !validation.notChecked.isEmpty {
            let count = validation.notChecked.values.reduce(0, +)
            Swift.print(
                "  not checked: " + Self.tally(validation.notChecked) + " (FCM gave no verdict on \(count) message(s) in "
                    + "\(DryRunValidation.attempts) attempts each: the validation is incomplete)")
        }
        if let halted = validation.halted { Swift.print("  stopped: \(halted)") }
    }

    /// `CODE n, CODE n` in code order.
    static func tally(_ counts: [String: Int64]) -> String {
        counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    /// A sample's campaign-derived APNs headers, in the order they are shown.
    static func headers(_ apns: APNsHeaders) -> [(name: String, value: String)] {
        var headers = [("apns-push-type", apns.pushType.rawValue), ("apns-priority", String(apns.priority)), ("apns-id", apns.apnsID)]
        if let collapse = apns.collapseID { headers.append(("apns-collapse-id", collapse)) }
        if let expiration = apns.expiration { headers.append(("apns-expiration", String(expiration))) }
        return headers
    }

    /// The body with the device token replaced by its fingerprint.
    static func redactedBody(_ request: PushRequest) -> String {
        String(decoding: request.body, as: UTF8.self).replacingOccurrences(of: request.token, with: TokenFingerprint.of(request.token))
    }
}

/// Terminal output of a run summary.
enum SummaryPrinter {
    /// The statuses of recipients a provider answered (the view's `rate_per_second` counts the same).
    static let answeredStatuses = Set([RecipientState.sent, .invalidToken, .failedPermanent, .unknown].map(\.rawValue))

    /// How many of the lines' recipients a provider answered.
    static func answered(_ lines: [SummaryLine]) -> Int64 {
        lines.filter { answeredStatuses.contains($0.status) }.reduce(Int64(0)) { $0 + $1.count }
    }

    static func print(runID: Int64, record: RunRecord?, lines: [SummaryLine], variants: [VariantSummaryLine] = []) {
        if let record {
            // A test send says so: its summary read like a one-off run of the campaign.
            var header = "run \(runID) · \(record.campaign)\(record.kind == "test" ? " (test send)" : "") · \(record.status.rawValue)"
            if let duration = record.durationSeconds, duration > 0 {
                // Answered notifications per second, as `bugle.run_overview.rate_per_second` counts them: skipped and
                // cancelled recipients were never sent (a run cancelled early read as 214,908/s), and time paused is
                // not sending time (a run paused for twenty minutes read 7.5/s).
                let answered = answered(lines)
                header += String(format: " · %.1fs", duration)
                if record.pausedSeconds >= 0.05 { header += String(format: " (%.1fs paused)", record.pausedSeconds) }
                if let rate = record.rate(answered: answered) { header += " · " + ProgressRenderer.rate(rate) + "/s" }
            }
            Swift.print(header)
            if let reason = record.pauseReason { Swift.print("  reason: \(reason)") }
            if record.duplicatesCollapsed > 0 { Swift.print("  duplicate tokens collapsed: \(record.duplicatesCollapsed)") }
        }
        for line in lines {
            let reason = line.reason.isEmpty ? "" : " (\(line.reason))"
            Swift.print("  \(line.platform.padding(toLength: 8, withPad: " ", startingAt: 0)) \(line.status.padding(toLength: 19, withPad: " ", startingAt: 0)) \(line.count)\(reason)")
        }
        if !variants.isEmpty { Swift.print("  per variant:") }
        for line in variants {
            Swift.print("    \(line.variant.padding(toLength: 12, withPad: " ", startingAt: 0)) \(line.status.padding(toLength: 19, withPad: " ", startingAt: 0)) \(line.count)")
        }
    }
}
