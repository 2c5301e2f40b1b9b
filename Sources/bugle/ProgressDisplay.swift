import BugleCore
import BugleRunner
import Foundation
import Synchronization

/// The live progress of a run on stderr: on a terminal, a block redrawn in place (per platform: sent,
/// failed, deactivated, retries; the rate, the ETA and each lane's rate in force or pause); otherwise one
/// log line every few seconds. Reads a ``RunProgressBoard`` and the lanes' pacers; never touches the database.
final class ProgressDisplay: Sendable {
    private let runID: Int64
    private let board: RunProgressBoard
    private let pacers: [ProviderKind: LanePacer]
    private let isTerminal: Bool
    private let interval: Double
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let startedAt = Mutex(ContinuousClock.now)
    private let lastDrawn = Mutex(0)

    /// - Parameters:
    ///   - runID: The run.
    ///   - board: The runner's counts.
    ///   - pacers: The lanes' pacers.
    ///   - interval: Seconds between updates (nil: 0.5 on a terminal, 5 otherwise).
    init(runID: Int64, board: RunProgressBoard, pacers: [ProviderKind: LanePacer], interval: Double?) {
        self.runID = runID
        self.board = board
        self.pacers = pacers
        self.isTerminal = isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
        self.interval = interval ?? (isTerminal ? 0.5 : 5)
    }

    /// Starts updating.
    func start() {
        startedAt.withLock { $0 = ContinuousClock.now }
        let running = Task { [self] in
            var renderer = ProgressRenderer(runID: runID, started: ContinuousClock.now)
            var drawn = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int64(interval * 1000)))
                if Task.isCancelled { break }
                drawn = draw(&renderer, previousLines: drawn)
                lastDrawn.withLock { [drawn] in $0 = drawn }
            }
        }
        task.withLock { $0 = running }
    }

    /// Stops updating and draws the final state once.
    func stop() async {
        guard let running = task.withLock({ task -> Task<Void, Never>? in
            defer { task = nil }
            return task
        }) else { return }
        running.cancel()
        _ = await running.value
        // The final update shows the average rate since the start.
        var renderer = ProgressRenderer(runID: runID, started: startedAt.withLock { $0 })
        _ = draw(&renderer, previousLines: lastDrawn.withLock { $0 })
    }

    private func draw(_ renderer: inout ProgressRenderer, previousLines: Int) -> Int {
        let snapshot = board.snapshot
        let lanes = pacers.mapValues(\.snapshot)
        if isTerminal {
            let lines = renderer.block(snapshot, lanes: lanes, now: ContinuousClock.now)
            var text = previousLines > 0 ? "\u{1B}[\(previousLines)F" : ""
            for line in lines { text += "\u{1B}[2K" + line + "\n" }
            Console.toStderr(text)
            return lines.count
        }
        Console.toStderr(renderer.logLine(snapshot, lanes: lanes, now: ContinuousClock.now) + "\n")
        return 0
    }
}
