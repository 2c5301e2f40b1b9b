import BugleCore
import BugleRunner
import Foundation

/// Formats progress: the terminal block and the one-line log form. Keeps the last reading to compute the
/// rate (smoothed) and the ETA.
struct ProgressRenderer {
    let runID: Int64
    private var lastFinished: Int64 = 0
    private var lastTime: ContinuousClock.Instant
    private var rate: Double?

    init(runID: Int64, started: ContinuousClock.Instant) {
        self.runID = runID
        self.lastTime = started
    }

    /// The lines of the terminal block.
    mutating func block(_ snapshot: RunProgressBoard.Snapshot, lanes: [ProviderKind: LanePacer.Snapshot], now: ContinuousClock.Instant) -> [String] {
        let header = headline(snapshot, now: now)
        var lines = [header]
        for platform in Platform.allCases {
            guard let counts = snapshot.platforms[platform] else { continue }
            lines.append(
                "  " + platform.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)
                    + " sent " + Self.number(counts.sent).leftPadded(10)
                    + "  failed " + Self.number(counts.failed).leftPadded(7)
                    + "  deactivated " + Self.number(counts.deactivated).leftPadded(7)
                    + "  retries " + Self.number(counts.retries).leftPadded(7)
                    + (counts.unknown > 0 ? "  unknown " + Self.number(counts.unknown) : "")
                    + (counts.skipped > 0 ? "  skipped " + Self.number(counts.skipped) : "")
            )
        }
        if !lanes.isEmpty {
            lines.append("  lanes     " + Self.lanes(lanes))
        }
        return lines
    }

    /// One log line (non-terminal output).
    mutating func logLine(_ snapshot: RunProgressBoard.Snapshot, lanes: [ProviderKind: LanePacer.Snapshot], now: ContinuousClock.Instant) -> String {
        let finished = snapshot.finished
        updateRate(finished: finished, now: now)
        var line = "progress run=\(runID) finished=\(finished)"
        if let total = snapshot.remainingAtStart { line += "/\(total)" }
        // Several workers: the counts and the rate are this worker's; say so, and how many share the run.
        if snapshot.workers > 1 { line += " workers=\(snapshot.workers)" }
        line += " rate=\(Self.plainRate(rate ?? 0))/s"
        if let until = snapshot.waitingUntil {
            line += " waiting_until=" + Date(timeIntervalSince1970: until.rounded()).formatted(.iso8601)
        } else if let eta = eta(snapshot) {
            line += " eta=\(eta)"
        }
        for platform in Platform.allCases {
            guard let c = snapshot.platforms[platform] else { continue }
            // `retries` counts answers that put a recipient back to wait (a recipient retried and then sent is in both);
            // it read `retrying`, as if it were how many wait now, and the `unknown` that `finished` counts had no key.
            line += " \(platform.rawValue):sent=\(c.sent),failed=\(c.failed),deactivated=\(c.deactivated),unknown=\(c.unknown),retries=\(c.retries)"
            if c.skipped > 0 { line += ",skipped=\(c.skipped)" }
        }
        for (kind, lane) in lanes.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            line += " \(kind.rawValue):rate=" + (lane.rate.map { Self.plainRate($0) } ?? "unpaced") + ",in_flight=\(lane.inFlight)"
            if lane.pausedFor > 0 { line += ",paused=\(Int(lane.pausedFor.rounded(.up)))s" }
        }
        return line
    }

    private mutating func headline(_ snapshot: RunProgressBoard.Snapshot, now: ContinuousClock.Instant) -> String {
        let finished = snapshot.finished
        updateRate(finished: finished, now: now)
        var header = "run \(runID) · " + Self.number(finished)
        if let total = snapshot.remainingAtStart { header += " of " + Self.number(total) }
        if snapshot.workers > 1 { header += " (this worker, 1 of \(snapshot.workers))" }
        header += " · " + Self.rate(rate ?? 0) + "/s"
        if let until = snapshot.waitingUntil {
            header += " · nothing due until " + Date(timeIntervalSince1970: until.rounded()).formatted(.iso8601)
        } else if let eta = eta(snapshot) {
            header += " · ETA " + eta
        }
        return header
    }

    private mutating func updateRate(finished: Int64, now: ContinuousClock.Instant) {
        let elapsed = lastTime.duration(to: now)
        let seconds = elapsed.inSeconds
        guard seconds > 0.05 else { return }
        let instant = Double(finished - lastFinished) / seconds
        rate = rate.map { 0.7 * $0 + 0.3 * instant } ?? instant
        lastFinished = finished
        lastTime = now
    }

    private func eta(_ snapshot: RunProgressBoard.Snapshot) -> String? {
        guard let total = snapshot.remainingAtStart, let rate, rate > 0.5 else { return nil }
        let left = max(0, total - snapshot.finished)
        return Self.duration(Double(left) / rate)
    }

    private static func lanes(_ lanes: [ProviderKind: LanePacer.Snapshot]) -> String {
        lanes.sorted { $0.key.rawValue < $1.key.rawValue }.map { kind, lane in
            var text = kind.rawValue + " " + (lane.rate.map { rate($0) + "/s" } ?? "unpaced")
            if lane.pausedFor > 0 { text += " paused \(Int(lane.pausedFor.rounded(.up)))s" }
            return text
        }.joined(separator: " · ")
    }

    /// A rate: one decimal below 10/s (a paced 1/s lane read `0/s` when truncated), whole numbers with separators above.
    static func rate(_ value: Double) -> String {
        guard value.isFinite, value >= 0 else { return "0" }
        if value < 9.95 { return String(format: "%.1f", value) }
        return number(Int64(value.rounded()))
    }

    /// A rate for the log line, whose fields are separated by commas: no thousands separators (`rate=10,000` read as
    /// `rate=10` and a stray `000`).
    static func plainRate(_ value: Double) -> String {
        guard value.isFinite, value >= 0 else { return "0" }
        if value < 9.95 { return String(format: "%.1f", value) }
        return String(Int64(value.rounded()))
    }

    static func number(_ value: Int64) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return (value < 0 ? "-" : "") + out
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(String(format: "%02d", s % 60))s" }
        return "\(s / 3600)h\(String(format: "%02d", s % 3600 / 60))m"
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
