import ArgumentParser
import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging
import PostgresNIO

/// `bugle worker RUN`: adds a worker to a running run, from any machine that reaches the database.
struct WorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Join a running run as one more worker (scale-out on PostgreSQL alone).",
        discussion: """
            The worker takes its own lease (with its own fencing epoch) beside the workers already on the run, and \
            they share the remaining recipients through `FOR UPDATE SKIP LOCKED` claims. The run's in-flight window \
            W and each lane's rate hold for the run as a whole: each worker paces at the rate divided by the live \
            workers, re-read at every lease renewal. If a worker dies, the others reap its lease once it expires \
            (--lease-ttl) and its in-flight recipients follow the ambiguous policy.

            The run must be `running` (start it with `bugle run` or `bugle resume`). The worker exits 0 when the \
            run completes, whoever sent its last recipient; 3 when stopped with Ctrl-C / SIGTERM (the run goes on \
            with its other workers, or is paused if this was the last one); 2 when fenced or halted. It prints the \
            run's summary at the end and writes the CSV report only with --csv.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var output: RunOutputOptions

    @OptionGroup var worker: WorkerOptions

    @OptionGroup var stored: StoredRunOptions

    @Option(help: "Write the CSV report here when this worker ends (- for standard output).")
    var csv: String?

    func validate() throws {
        try CSVOption.validate(csv, json: output.json)
    }

    func run() async throws {
        let logger = global.makeLogger()
        let (runID, source, global, output, worker) = (stored.run, stored.source, global, output, worker.settings)
        try await ExitCodes.guarding {
            let csv = try CSVOption.destination(self.csv, json: output.json)
            return try await DatabaseOutageRecovery.riding(global, runID: runID, limit: worker.databaseOutageLimit, json: output.json, logger: logger) {
                try await Self.join(
                    $0, source: source, global: global, output: output, worker: worker, csv: csv, afterOutage: $1, logger: logger)
            }
        }
    }

    /// Joins run `runID` and sends until it ends; also how a worker goes on after the database answered again.
    /// - Parameter afterOutage: Going on after a database outage: a run completed meanwhile by the other workers ends
    ///   this one with exit 0.
    static func join(
        _ runID: Int64, source: StoredRunSource, global: GlobalOptions, output: RunOutputOptions, worker: WorkerSettings, csv: ReportDestination?,
        afterOutage: Bool = false, logger: Logger
    ) async throws -> Int32 {
        try await source.withRun(runID, global: global, logger: logger) { client, repository, record, send in
            if record.status == .completed {
                // As `bugle resume` of a completed run: nothing to do is not a failure, so a scale-out script that
                // starts a worker after the others finished sees success.
                let why = afterOutage ? "run \(runID): completed (by another worker)" : Self.notRunning(runID, record.status)
                Console(jsonOnStdout: output.json).say(why)
                try await summarize(runID, client: client, repository: repository, output: output, csv: csv, logger: logger)
                return ExitCodes.completed
            }
            guard record.status == .running else { throw UsageError(Self.notRunning(runID, record.status)) }
            _ = try await LocalWorkers.expireDead(runID: runID, repository: repository)
            if afterOutage {
                try await OutagePeers.awaitHandovers(runID: runID, repository: repository, leaseTTL: worker.leaseTTL, console: Console(jsonOnStdout: output.json))
            }
            var phases = PhaseTimer()
            let code = try await send(output, worker, .join)
            phases.end("send")
            try await summarize(runID, client: client, repository: repository, output: output, csv: csv, phases: phases, logger: logger)
            return code
        }
    }

    /// The run's summary as a worker ends: with `--csv`, the report and its summary; otherwise the summary alone, as
    /// text or (`--json`) one JSON object whose `report` is null.
    /// - Parameter phases: How long this worker's phases took (`send`, when it sent), for `--json`'s `phase_seconds`.
    private static func summarize(
        _ runID: Int64, client: PostgresClient, repository: RunRepository, output: RunOutputOptions, csv: ReportDestination?,
        phases: PhaseTimer = PhaseTimer(), logger: Logger
    ) async throws {
        if let csv {
            try await RunExecution.report(runID: runID, client: client, csv: csv, json: output.json, logger: logger, phases: phases)
            return
        }
        let record = try await repository.run(id: runID)
        let lines = try await repository.summary(runID: runID)
        if output.json {
            let variants = try await repository.variantSummary(runID: runID)
            print(SummaryJSON.render(runID: runID, record: record, lines: lines, variants: variants, reportPath: nil, reportRows: 0, phases: phases.seconds))
        } else {
            SummaryPrinter.print(runID: runID, record: record, lines: lines)
        }
    }

    /// Why a worker cannot join run `runID`, and what to do instead.
    static func notRunning(_ runID: Int64, _ status: RunStatus) -> String {
        switch status {
        case .completed:
            return "run \(runID) is completed: every recipient has its outcome, so there is nothing to join"
        case .cancelled, .failed:
            return "run \(runID) is \(status.rawValue): there is nothing to join"
        case .paused:
            return "run \(runID) is paused, not running; `bugle resume \(runID)` continues it, and workers can join it then"
        case .materializing, .ready:
            return "run \(runID) is \(status.rawValue), not sending yet; join it once it runs (`bugle resume \(runID)` goes on with a run whose process is gone)"
        case .running:
            return "run \(runID) is running"
        }
    }
}
