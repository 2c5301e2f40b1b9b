/// Wall-clock seconds of the consecutive phases of one command (materialize, send, report), for `--json`.
struct PhaseTimer: Sendable {
    private var last = ContinuousClock.now
    /// Seconds per finished phase, by name.
    private(set) var seconds: [String: Double] = [:]

    /// Ends the phase that started when the previous one ended (or when the timer was made).
    mutating func end(_ phase: String) {
        let now = ContinuousClock.now
        let elapsed = last.duration(to: now).components
        seconds[phase] = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        last = now
    }
}
