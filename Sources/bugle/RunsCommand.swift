import ArgumentParser
import BugleCore
import BugleStore
import Foundation

/// `bugle runs`: lists recent runs.
struct RunsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "runs", abstract: "List recent runs, newest first.")

    @OptionGroup var global: GlobalOptions

    @Option(help: "How many runs to list.")
    var limit: Int = 20

    func run() async throws {
        let logger = global.makeLogger()
        let limit = self.limit
        try await ExitCodes.guarding {
            let (runs, workers) = try await DatabaseSession.with(global, readOnly: true, logger: logger) { client in
                let repository = RunRepository(client: client, logger: logger)
                let runs = try await repository.list(limit: limit)
                var workers: [Int64: [RunRepository.Worker]] = [:]
                for run in runs where run.status == .running {
                    workers[run.id] = try await repository.liveWorkers(runID: run.id)
                }
                return (runs, workers)
            }
            if runs.isEmpty { print("no runs yet") }
            let host = ProcessInfo.processInfo.hostName
            for run in runs {
                let total = run.recipientsTotal.map(String.init) ?? "-"
                let line = "\(String(run.id).padding(toLength: 6, withPad: " ", startingAt: 0)) \(run.status.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)) \(run.createdAt)  \(total.padding(toLength: 9, withPad: " ", startingAt: 0)) \(run.campaign)"
                print(line + (workers[run.id].map { Self.describe($0, runID: run.id, host: host) } ?? ""))
            }
            return ExitCodes.completed
        }
    }

    /// Who sends a `running` run: its live leases, less those of processes of this host that are gone. A run nobody
    /// sends (its worker was killed, or stopped in a database outage and gave up waiting) says how to go on.
    static func describe(_ workers: [RunRepository.Worker], runID: Int64, host: String) -> String {
        let alive = workers.filter { !LocalWorkers.isDeadLocalProcess(owner: $0.owner, host: host) }.count
        return alive == 0 ? "  (no live worker: `bugle resume \(runID)`)" : "  (\(alive) worker\(alive == 1 ? "" : "s"))"
    }
}
