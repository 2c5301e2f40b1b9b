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
            let runs = try await DatabaseSession.with(global, readOnly: true, logger: logger) { client in
                try await RunRepository(client: client, logger: logger).list(limit: limit)
            }
            if runs.isEmpty { print("no runs yet") }
            for run in runs {
                let total = run.recipientsTotal.map(String.init) ?? "-"
                print("\(String(run.id).padding(toLength: 6, withPad: " ", startingAt: 0)) \(run.status.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)) \(run.createdAt)  \(total.padding(toLength: 9, withPad: " ", startingAt: 0)) \(run.campaign)")
            }
            return ExitCodes.completed
        }
    }
}
