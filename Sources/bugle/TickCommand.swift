import ArgumentParser
import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging

/// `bugle tick`: sends what is due in scheduled runs, then exits (for cron, every 15 minutes).
struct TickCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tick",
        abstract: "Send what is due now in scheduled runs (delivery.send_at, deliver_at_local), then exit. For cron, every 15 minutes.",
        discussion: """
            Finds the runs of campaigns with delivery.send_at or local-time delivery that have recipients due now and no \
            live worker (runs started with `bugle run --no-wait`, or left by an earlier tick), sends their due \
            recipients, writes each run's CSV report (bugle-run-N.csv in --report-dir, the current directory by \
            default), and leaves each run scheduled again when its next recipients are further away. With --json, \
            each run's summary is one JSON object on its own line of stdout; when nothing was due, the one line is \
            {"runs_due":0}. Runs paused by `bugle pause` or halted by a provider are left alone. Safe to overlap: a run \
            another tick is sending is skipped. Stopped by Ctrl-C or SIGTERM (cron's timeout, a shutdown), a tick \
            records the answers of what it sent, leaves the run it was sending for the next tick, and begins no other.

                */15 * * * *  cd /srv/bugle && bugle tick --quiet >> tick.log 2>&1

            Exit codes: 0 nothing left to do now; 2 a run failed or halted; 3 stopped by Ctrl-C or SIGTERM (the next tick goes on).
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var output: RunOutputOptions

    @OptionGroup var worker: WorkerOptions

    @Option(help: "Providers file for every run (overrides each campaign's `providers:`).")
    var providers: String?

    @Flag(name: .customLong("allow-readable-keys"), help: "Start even if a key file is readable by group or others.")
    var allowReadableKeys = false

    @Option(name: .customLong("report-dir"), help: "Directory for each run's CSV report, bugle-run-N.csv (default: the current directory).")
    var reportDirectory: String?

    func validate() throws {
        guard let reportDirectory else { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: reportDirectory, isDirectory: &isDirectory) else {
            throw ValidationError("--report-dir \(reportDirectory): no such directory")
        }
        guard isDirectory.boolValue else { throw ValidationError("--report-dir \(reportDirectory): not a directory") }
        guard FileManager.default.isWritableFile(atPath: reportDirectory) else {
            throw ValidationError("--report-dir \(reportDirectory): not writable by this user")
        }
    }

    func run() async throws {
        let logger = global.makeLogger()
        let source = StoredRunSource(providersOverride: providers, allowReadableKeys: allowReadableKeys)
        var worker = worker.settings
        // Run from cron: a run that lost the database stops, paused, and the next tick goes on with it.
        worker.databaseOutageLimit = 0
        let output = output
        let reportDirectory = reportDirectory
        try await ExitCodes.guarding {
            try await DatabaseSession.with(global, logger: logger) { client -> Int32 in
                let repository = RunRepository(client: client, logger: logger)
                let due = try await repository.dueScheduledRuns()
                let console = Console(jsonOnStdout: output.json)
                if due.isEmpty {
                    console.say("tick: no scheduled run has recipients due")
                    if output.json { print(#"{"runs_due":0}"#) }
                } else if reportDirectory == nil {
                    try CSVOption.requireDefaultReportDirectory()
                }
                var worst = ExitCodes.completed
                for runID in due {
                    // Stopped by a signal: the runs not yet begun wait for the next tick, untouched.
                    if SignalTrap.shared.interrupted { break }
                    guard let record = try await repository.run(id: runID) else { continue }
                    let campaign: Campaign
                    var prepared: LanePacing.Lanes?
                    do {
                        campaign = try StoredRunSource.campaign(of: record)
                        // Past its deadline it is closed, which needs no providers: a providers file gone meanwhile
                        // kept it `scheduled` for good, said at every tick.
                        if RunExecution.deadlinePassed(campaign) == nil {
                            prepared = try source.lanes(for: campaign, record: record, output: output, logger: logger)
                        }
                    } catch {
                        // One run whose campaign or providers file cannot be used (moved, unreadable) is said and left
                        // as it is; it used to end the tick, and every run due after it waited with it.
                        ExitCodes.printError("run \(runID): not sent: \(error)")
                        // With --json, a line for it too: a tick whose due runs could none be sent printed nothing.
                        if output.json { print(Self.notSentJSON(runID: runID, status: record.status, error: "\(error)")) }
                        worst = max(worst, ExitCodes.failed)
                        continue
                    }
                    if let notAfter = RunExecution.deadlinePassed(campaign) {
                        // Nothing may send it any more: closed, its unsent recipients cancelled and their reservations
                        // released (it was left paused for good, holding them).
                        await prepared?.shutdown()
                        _ = try await repository.closeAtDeadline(runID: runID, reason: "delivery.not_after passed")
                        console.say(
                            "run \(runID): delivery.not_after (\(CSVFormat.timestamp(notAfter))) has passed; the recipients not yet sent are cancelled (not_after_passed)")
                        try await RunExecution.report(
                            runID: runID, client: client, csv: RunExecution.defaultReport(runID, in: reportDirectory), json: output.json, logger: logger)
                        continue
                    }
                    guard let lanes = prepared else { continue }
                    let code: Int32
                    var phases = PhaseTimer()
                    do {
                        code = try await RunExecution.execute(
                            campaign: campaign, runID: runID, client: client, lanes: lanes, output: output, worker: worker,
                            leaveWhenIdle: true, scheduledWhenInterrupted: true, logger: logger)
                    } catch {
                        await lanes.shutdown()
                        throw error
                    }
                    await lanes.shutdown()
                    phases.end("send")
                    try await RunExecution.report(
                        runID: runID, client: client, csv: RunExecution.defaultReport(runID, in: reportDirectory), json: output.json, logger: logger,
                        phases: phases)
                    worst = max(worst, code)
                }
                return worst
            }
        }
    }

    /// `--json`'s line for a due run that could not be sent: `{"run_id", "status", "not_sent"}` (the reason).
    static func notSentJSON(runID: Int64, status: RunStatus, error: String) -> String {
        let object: [String: Any] = ["run_id": runID, "status": status.rawValue, "not_sent": error]
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{\"run_id\":\(runID)}"
        }
        return String(decoding: data, as: UTF8.self)
    }
}
