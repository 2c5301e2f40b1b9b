import ArgumentParser
import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// `bugle resume RUN`: continues a paused or interrupted run from its ledger.
struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Continue a paused or interrupted run from its ledger.",
        discussion: """
            Takes the run's lease with a new epoch; recipients left in flight by the previous holder follow the \
            campaign's ambiguous policy (drop → unknown, resend → sent again). Recipients already answered are never \
            sent again, and resuming a completed run sends nothing. The campaign is rebuilt from the text stored with \
            the run, so later edits to the file do not change a running campaign.

            A run that still has a live worker is refused (exit 1): join it with `bugle worker RUN` instead, or wait \
            for that worker's lease to expire. A worker of this machine whose process is gone (kill -9, a crash) \
            does not count: its lease is ended at once.

            A run killed while reading its segment (status materializing) has it read again from zero, then sent; \
            that is refused (exit 1) while another process is still reading it.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var output: RunOutputOptions

    @OptionGroup var worker: WorkerOptions

    @OptionGroup var stored: StoredRunOptions

    @Option(help: "Where to write the CSV report, - for standard output (default ./bugle-run-<id>.csv).")
    var csv: String?

    func validate() throws {
        try CSVOption.validate(csv, json: output.json)
    }

    func run() async throws {
        let logger = global.makeLogger()
        let (runID, source, global, output, worker) = (stored.run, stored.source, global, output, worker.settings)
        try await ExitCodes.guarding {
            let csv = try CSVOption.destination(self.csv, json: output.json)
            if csv == nil { try CSVOption.requireDefaultReportDirectory() }
            return try await DatabaseOutageRecovery.riding(global, runID: runID, limit: worker.databaseOutageLimit, json: output.json, logger: logger) {
                try await Self.resume(
                    $0, source: source, global: global, output: output, worker: worker, csv: csv, afterOutage: $1, logger: logger)
            }
        }
    }

    /// Continues run `runID` from its ledger and writes its report; also how `run` and `resume` go on after the
    /// database answered again (``DatabaseOutageRecovery``).
    /// - Parameter afterOutage: Going on after a database outage: a running run is joined (other workers may be back
    ///   on it, or coming back), after waiting for their handovers (``OutagePeers``); a run an operator paused or halted
    ///   meanwhile stays paused (exit 3).
    static func resume(
        _ runID: Int64, source: StoredRunSource, global: GlobalOptions, output: RunOutputOptions, worker: WorkerSettings, csv: ReportDestination?,
        afterOutage: Bool = false, logger: Logger
    ) async throws -> Int32 {
        try await source.withRun(runID, global: global, logger: logger) { client, repository, record, send in
            let report = csv ?? RunExecution.defaultReport(runID)
            var phases = PhaseTimer()
            switch record.status {
            case .completed, .cancelled, .failed:
                Console(jsonOnStdout: output.json).say("run \(runID) is \(record.status.rawValue); nothing to send")
                if record.status == .cancelled, let settled = try await CancelledRunSettlement.settle(runID: runID, repository: repository) {
                    Console(jsonOnStdout: output.json).say(settled)
                }
                try await RunExecution.report(runID: runID, client: client, csv: report, json: output.json, logger: logger)
                return record.status == .completed ? ExitCodes.completed : ExitCodes.failed
            case .materializing:
                let materialized = try await rematerialize(
                    record, client: client, repository: repository, global: global, output: output, worker: worker, logger: logger)
                phases.end("materialize")
                if materialized.closed {
                    try await RunExecution.sayClosedWhileReading(runID: runID, materialized, repository: repository)
                    try await RunExecution.report(runID: runID, client: client, csv: report, json: output.json, logger: logger, phases: phases)
                    return ExitCodes.failed
                }
            case .paused where afterOutage && record.pauseReason != "lease lost":
                Console(jsonOnStdout: output.json).say(
                    "run \(runID): paused while the database was away (\(record.pauseReason ?? "no reason")); resume with `bugle resume \(runID)`")
                return ExitCodes.paused
            case .ready, .running, .paused:
                break
            }
            let ended = try await LocalWorkers.expireDead(runID: runID, repository: repository)
            if ended > 0 { Console(jsonOnStdout: output.json).say("run \(runID): ended \(ended) lease(s) left by stopped workers of this machine") }
            if afterOutage {
                try await OutagePeers.awaitHandovers(runID: runID, repository: repository, leaseTTL: worker.leaseTTL, console: Console(jsonOnStdout: output.json))
            }
            let live = try await repository.liveWorkers(runID: runID)
            var mode = LeaseMode.exclusive
            if afterOutage, record.status == .running {
                // Other workers coming back from the outage may join at any moment: join rather than take it alone.
                if !live.isEmpty { Console(jsonOnStdout: output.json).say("run \(runID): \(live.count) other worker(s) send it; joining them") }
                mode = .join
            } else if !live.isEmpty {
                throw UsageError(beingSent(runID, by: live, status: try await repository.run(id: runID)?.status))
            }
            let code = try await send(output, worker, mode)
            phases.end("send")
            try await RunExecution.report(runID: runID, client: client, csv: report, json: output.json, logger: logger, phases: phases)
            return code
        }
    }
}

extension ResumeCommand {
    /// Why `resume` refuses a run that live workers send, and what to do instead. A run `paused` now (read after its
    /// workers) is one they are leaving: `bugle worker` refuses a paused run, so only waiting is suggested.
    static func beingSent(_ runID: Int64, by live: [RunRepository.Worker], status: RunStatus?) -> String {
        let lease = live.first.map { " (\($0.owner), lease for \(Int($0.expiresIn.rounded(.up))) s more)" } ?? ""
        if status == .paused {
            return "run \(runID) is being sent by \(live.count) worker(s)\(lease); it is paused and they are finishing what they sent: "
                + "resume it once they have left, within the lease"
        }
        return "run \(runID) is being sent by \(live.count) worker(s)\(lease); join it with `bugle worker \(runID)` or resume once the lease has expired"
    }

    /// A run left `materializing`: when the process reading its segment is gone (its ``MaterializerLease`` lapsed, or
    /// its owner was a process of this host that no longer runs), the partial ledger is discarded and the segment read
    /// again from zero; nothing was sent from it.
    static func rematerialize(
        _ record: RunRecord, client: PostgresClient, repository: RunRepository, global: GlobalOptions, output: RunOutputOptions,
        worker: WorkerSettings, logger: Logger
    ) async throws -> Materializer.Report {
        let campaign = try CampaignLoader.load(yaml: record.campaignYAML, path: record.campaignFile ?? "run-\(record.id).yaml")
        let console = Console(jsonOnStdout: output.json)
        let segments = try await DatabaseSession.segmentAccess(global, client: client, logger: logger)
        let materialized = try await RunExecution.materialize(
            runID: record.id, campaign: campaign, segments: segments, leaseTTL: worker.leaseTTL, ridesOutages: worker.databaseOutageLimit > 0,
            json: output.json, logger: logger
        ) {
            let discarded = try await repository.discardPartialLedger(runID: record.id)
            console.say("run \(record.id): its segment was being read when its process ended (\(discarded) row(s) written, none sent); reading it again")
        }
        if !materialized.closed { console.say(RunExecution.describe(runID: record.id, materialized)) }
        return materialized
    }
}

/// The run a `resume` or `worker` acts on, and how its lanes are built.
struct StoredRunOptions: ParsableArguments {
    @Argument(help: "The run id (see `bugle runs`).")
    var run: Int64

    @Option(help: "Providers file (overrides the campaign's `providers:`).")
    var providers: String?

    @Flag(name: .customLong("allow-readable-keys"), help: "Start even if a key file is readable by group or others.")
    var allowReadableKeys = false

    var source: StoredRunSource { StoredRunSource(providersOverride: providers, allowReadableKeys: allowReadableKeys) }
}

/// Rebuilds what a stored run sends with: the campaign from the text kept with the run, and its lanes.
struct StoredRunSource {
    var providersOverride: String?
    var allowReadableKeys: Bool

    /// Sends a run's recipients: (output, worker settings, lease mode) → exit code.
    typealias Send = (RunOutputOptions, WorkerSettings, LeaseMode) async throws -> Int32

    /// The frame `resume` and `worker` share: a database session, the run's record (a missing run is a usage
    /// error), and a `send` that builds the run's lanes and drives it; the lanes are shut down after the session
    /// (also when it throws).
    func withRun(
        _ runID: Int64,
        global: GlobalOptions,
        logger: Logger,
        _ body: @escaping (PostgresClient, RunRepository, RunRecord, Send) async throws -> Int32
    ) async throws -> Int32 {
        let lanesBox = LanesBox()
        do {
            let code = try await DatabaseSession.withServer(global, logger: logger) { client, server -> Int32 in
                let repository = RunRepository(client: client, logger: logger)
                guard let record = try await repository.run(id: runID) else { throw UsageError("run \(runID) does not exist") }
                if record.kind == "test", ![.completed, .cancelled, .failed].contains(record.status) {
                    // Its seeds and its lifted schedule are not stored with it: resumed from its campaign file, a test
                    // send read the campaign's whole segment and sent to everyone in it, on the campaign's schedule.
                    throw UsageError(
                        "run \(runID) is a test send (`bugle send-test`), which is not resumed or joined: its seed users and tokens are "
                            + "not stored with it, and its campaign would read the whole segment. Cancel it (`bugle cancel \(runID)`) "
                            + "and send the test again")
                }
                return try await body(client, repository, record) { output, worker, mode in
                    let (campaign, lanes) = try prepare(record, output: output, logger: logger)
                    lanesBox.lanes = lanes
                    return try await RunExecution.execute(
                        campaign: campaign, runID: runID, client: client, lanes: lanes, output: output, worker: worker, mode: mode,
                        // A run halted because its answers were lost starts small: the path may still lose them.
                        probeFirst: record.pauseReason?.hasPrefix("halted: AnswersLost") == true, logger: logger
                    )
                }
            }
            await lanesBox.shutdown()
            return code
        } catch {
            await lanesBox.shutdown()
            throw error
        }
    }

    func prepare(_ record: RunRecord, output: RunOutputOptions, logger: Logger) throws -> (Campaign, LanePacing.Lanes) {
        let campaign = try Self.campaign(of: record)
        return (campaign, try lanes(for: campaign, record: record, output: output, logger: logger))
    }

    /// The campaign a run was made from, as its file read then (stored with the run).
    static func campaign(of record: RunRecord) throws -> Campaign {
        try CampaignLoader.load(yaml: record.campaignYAML, path: record.campaignFile ?? "run-\(record.id).yaml")
    }

    /// The lanes that send `campaign`'s run `record`, from the providers file named now.
    func lanes(for campaign: Campaign, record: RunRecord, output: RunOutputOptions, logger: Logger) throws -> LanePacing.Lanes {
        let (_, settings) = try ProvidersFile.load(
            override: providersOverride, campaign: campaign, missing: "run \(record.id): no providers file; pass --providers")
        output.prepareMetrics()
        return try ProviderLanes.make(settings: settings, campaign: campaign, allowReadableKeys: allowReadableKeys, logger: logger)
    }
}

/// Holds the lanes a command built so they can be shut down after the database session ends.
final class LanesBox: Sendable {
    private let storage = Mutex<LanePacing.Lanes?>(nil)

    var lanes: LanePacing.Lanes? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    func shutdown() async {
        await lanes?.shutdown()
    }
}

/// `bugle pause RUN` and `bugle cancel RUN`: act on a run from another terminal or machine.
struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a run from anywhere; its workers stop at their next lease renewal (within a sixth of the lease TTL) and it can be resumed.",
        discussion: """
            The workers answer what is in flight, record it and exit 3; `bugle resume RUN` goes on. A run still reading \
            its segment cannot be paused (it would keep only part of its audience): cancel it instead, or pause it \
            once it sends.
            """
    )
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The run id.") var run: Int64

    func run() async throws {
        try await RunStatusChange.apply(global, runID: run, to: .paused)
    }
}

struct CancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a run: unsent recipients become cancelled and dedupe reservations are released."
    )
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The run id.") var run: Int64

    func run() async throws {
        try await RunStatusChange.apply(global, runID: run, to: .cancelled)
    }
}

/// Wiring shared by `pause` and `cancel`.
enum RunStatusChange {
    /// Pauses or cancels run `runID`, printing what became of it. A run already paused (a halt, Ctrl-C) keeps its
    /// reason and is no error; a run that does not exist, is finished, or (for a pause) still reads its segment is a
    /// usage error (exit 1) on stderr.
    static func apply(_ global: GlobalOptions, runID: Int64, to status: RunStatus) async throws {
        let logger = global.makeLogger()
        try await ExitCodes.guarding {
            let said = try await DatabaseSession.with(global, logger: logger) { client -> String in
                let repository = RunRepository(client: client, logger: logger)
                let changed =
                    status == .paused
                    ? try await repository.pause(runID: runID, reason: "paused by operator")
                    : try await repository.setStatus(runID: runID, to: status, reason: "cancelled by operator")
                // What stopped workers left in flight, and what live ones handed back unsent after an earlier cancel,
                // is ended by the cancel, or by cancelling again (it stayed `in_flight` and `retry_wait` for good).
                let settled = status == .cancelled ? try await CancelledRunSettlement.settle(runID: runID, repository: repository) : nil
                if changed { return "run \(runID): \(status.rawValue)" + (settled.map { "\n" + $0 } ?? "") }
                if let settled { return "run \(runID) was cancelled already\n" + settled }
                return try unchanged(runID, wanted: status, record: try await repository.run(id: runID))
            }
            print(said)
            return ExitCodes.completed
        }
    }

    /// Why run `runID` did not become `wanted`: said when it is already paused, else thrown as a ``UsageError``.
    static func unchanged(_ runID: Int64, wanted: RunStatus, record: RunRecord?) throws -> String {
        guard let record else { throw UsageError("run \(runID) does not exist") }
        let verb = wanted == .paused ? "pause" : "cancel"
        switch record.status {
        case .paused where wanted == .paused:
            return "run \(runID) is already paused (\(record.pauseReason ?? "no reason recorded")); `bugle resume \(runID)` goes on"
        case .materializing:
            throw UsageError(
                "run \(runID) is still reading its segment; nothing is sent before the whole audience is read. "
                    + "Pause it once it sends, or `bugle cancel \(runID)`")
        case .completed, .cancelled, .failed:
            throw UsageError("run \(runID) is \(record.status.rawValue); there is nothing to \(verb)")
        case .ready, .running, .paused:
            throw UsageError("run \(runID) changed while being asked to \(verb) (it is \(record.status.rawValue) now); try again")
        }
    }
}
