import ArgumentParser
import BugleCore
import BugleStore

/// `bugle report RUN`: prints the summary and regenerates the CSV from the ledger.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Print a run's summary and regenerate its CSV report from the ledger.",
        discussion: "The summary table is rebuilt from bugle.run_recipients first, so CSV and summary always agree."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The run id (see `bugle runs`).")
    var run: Int64

    @Option(help: "Where to write the CSV, - for standard output (default ./bugle-run-<id>.csv).")
    var csv: String?

    @Flag(help: "Print the summary as JSON on stdout (everything else goes to stderr).")
    var json = false

    func validate() throws {
        try CSVOption.validate(csv, json: json)
    }

    func run() async throws {
        let logger = global.makeLogger()
        let runID = run
        let json = self.json
        try await ExitCodes.guarding {
            let csv = try CSVOption.destination(self.csv, json: json) ?? RunExecution.defaultReport(runID)
            return try await DatabaseSession.with(global, migrate: false, logger: logger) { client -> Int32 in
                // On a read replica the summary is the one stored when the run last wrote it, not rebuilt.
                let writable = try await Migrator(client: client, logger: logger).migrateOrCheck(changingSchema: !DatabaseSession.namesServer(global))
                guard let record = try await RunRepository(client: client, logger: logger).run(id: runID) else {
                    throw UsageError("run \(runID) does not exist")
                }
                if [.running, .materializing].contains(record.status) {
                    // The summary and the CSV are read one after the other while answers keep being recorded.
                    Console(jsonOnStdout: json).say(
                        "note: run \(runID) is \(record.status.rawValue): its summary and its report are read moments apart and may differ")
                }
                if !writable {
                    Console(jsonOnStdout: json).say("read-only database: the summary is the one stored when run \(runID) last wrote it")
                }
                try await RunExecution.report(runID: runID, client: client, csv: csv, json: json, logger: logger, rebuildSummary: writable)
                return ExitCodes.completed
            }
        }
    }
}
