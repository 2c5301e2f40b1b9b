import ArgumentParser
import BugleCore
import BugleStore
import Foundation

/// `bugle runs`: lists recent runs.
struct RunsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "runs", abstract: "List recent runs, newest first.")

    @OptionGroup var global: GlobalOptions

    @Option(parsing: .unconditional, help: "How many runs to list.")
    var limit: Int = 20

    @Flag(help: "Print the runs as one JSON array on stdout (keys sorted; live_workers for running runs).")
    var json = false

    func validate() throws {
        guard limit >= 1 else { throw ValidationError("--limit must be at least 1") }
    }

    func run() async throws {
        let logger = global.makeLogger()
        let (limit, json) = (self.limit, self.json)
        try await ExitCodes.guarding {
            let (runs, workers) = try await DatabaseSession.with(global, readOnly: true, logger: logger) { client in
                let repository = RunRepository(client: client, logger: logger)
                let runs = try await repository.list(limit: limit)
                var workers: [Int64: [RunRepository.Worker]] = [:]
                for run in runs where run.status == .running {
                    workers[run.id] = try await repository.liveWorkers(runID: run.id)
                }
                // A run reading its segment: its reader, as one worker (none when it died).
                for run in runs where run.status == .materializing {
                    let reader = try await repository.liveReader(runID: run.id)
                    workers[run.id] = reader.map { [RunRepository.Worker(epoch: 0, owner: $0, expiresIn: 0)] } ?? []
                }
                return (runs, workers)
            }
            let host = ProcessInfo.processInfo.hostName
            let alive = workers.mapValues { Self.alive($0, host: host) }
            if json {
                print(RunsJSON.render(runs, liveWorkers: alive))
                return ExitCodes.completed
            }
            func columns(_ id: String, _ status: String, _ created: String, _ total: String, _ campaign: String) -> String {
                [id.padding(toLength: 6, withPad: " ", startingAt: 0), status.padding(toLength: 13, withPad: " ", startingAt: 0),
                 created.padding(toLength: 21, withPad: " ", startingAt: 0), total.padding(toLength: 10, withPad: " ", startingAt: 0), campaign]
                    .joined(separator: " ")
            }
            if runs.isEmpty { print("no runs yet") } else { print(columns("run", "status", "created (UTC)", "recipients", "campaign")) }
            for run in runs {
                let total = run.recipientsTotal.map(String.init) ?? "-"
                let line = columns(String(run.id), run.status.rawValue, run.createdAt, total, run.campaign + (run.kind == "test" ? " (test send)" : ""))
                let state = alive[run.id].map { Self.describe($0, runID: run.id, reading: run.status == .materializing) }
                print(line + (state ?? Self.reason(of: run)))
            }
            return ExitCodes.completed
        }
    }

    /// How many of a `running` run's live leases belong to live workers: those of processes of this host that are
    /// gone do not count.
    static func alive(_ workers: [RunRepository.Worker], host: String) -> Int {
        workers.filter { !LocalWorkers.isDeadLocalProcess(owner: $0.owner, host: host) }.count
    }

    /// Why a run is paused, failed or cancelled (a scheduled run's reason says when it is due; a halt, its code), cut
    /// at 120 characters; `--json` has it whole.
    static func reason(of run: RunRecord) -> String {
        guard let reason = run.pauseReason ?? run.failureReason, !reason.isEmpty else { return "" }
        return "  (" + (reason.count > 120 ? reason.prefix(119) + "…" : reason) + ")"
    }

    /// Who sends a `running` run, or reads a `materializing` run's segment (`reading`). A run nobody sends (its worker
    /// was killed, or stopped in a database outage and gave up waiting) or reads (its reader was killed, interrupted, or
    /// lost the database) says how to go on: such a run used to show nothing, like one being read.
    static func describe(_ alive: Int, runID: Int64, reading: Bool = false) -> String {
        if reading {
            return alive == 0 ? "  (nobody is reading its segment: `bugle resume \(runID)` reads it again)" : "  (reading its segment)"
        }
        return alive == 0 ? "  (no live worker: `bugle resume \(runID)`)" : "  (\(alive) worker\(alive == 1 ? "" : "s"))"
    }
}
