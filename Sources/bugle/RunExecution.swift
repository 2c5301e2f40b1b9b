import ArgumentParser
import BugleCore
import BugleLegacyAPNs
import BugleRunner
import BugleStore
import Foundation
import Logging
import PostgresNIO

/// Wiring shared by `run`, `resume` and `demo`: drive a materialized run and map its ending to an exit code.
enum RunExecution {
    /// Creates a run, materializes its segment, sends, and writes the report. Returns the exit code.
    static func start(
        campaign: Campaign,
        yaml: String,
        client: PostgresClient,
        segments: SegmentAccess,
        lanes: LanePacing.Lanes,
        csv: ReportDestination?,
        output: RunOutputOptions,
        worker: WorkerSettings,
        noWait: Bool = false,
        isTest: Bool = false,
        requireRecipients: String? = nil,
        logger: Logger
    ) async throws -> Int32 {
        try refuseAfterDeadline(campaign)
        let console = Console(jsonOnStdout: output.json)
        if !noWait, let sendAt = campaign.delivery.sendAt, sendAt.secondsSince1970 > Date().timeIntervalSince1970 {
            // The segment is read at send time, so the audience is the one of that moment.
            let wait = sendAt.secondsSince1970 - Date().timeIntervalSince1970
            // Taking the signals before saying so: a signal the moment the line is read ends the wait.
            let signals = SignalTrap.shared
            console.say("\(campaign.name): delivery.send_at is \(CSVFormat.timestamp(sendAt)); waiting \(Int(wait.rounded(.up))) s (Ctrl-C to stop; --no-wait schedules the run and exits)")
            if let signal = await signals.wait(.seconds(wait)) {
                ExitCodes.printError("\(signal): stopped waiting for delivery.send_at; nothing was written")
                return signal == "SIGINT" ? 130 : 143
            }
            try refuseAfterDeadline(campaign)
        }
        if let signal = SignalTrap.shared.signalName {
            ExitCodes.printError("\(signal): stopped before the run was written; nothing was written")
            return signal == "SIGINT" ? 130 : 143
        }
        let repository = RunRepository(client: client, logger: logger)
        let runID = try await repository.createRun(
            campaign: campaign, yaml: yaml, periodKey: PeriodKey.key(for: campaign, now: Date()), isTest: isTest)
        console.say("run \(runID): reading segment of \(campaign.name)")
        var phases = PhaseTimer()
        let materialized = try await materialize(
            runID: runID, campaign: campaign, segments: segments, leaseTTL: worker.leaseTTL, ridesOutages: worker.databaseOutageLimit > 0,
            json: output.json, logger: logger)
        phases.end("materialize")
        if materialized.closed {
            try await sayClosedWhileReading(runID: runID, materialized, repository: repository)
            try await report(runID: runID, client: client, csv: csv ?? defaultReport(runID), json: output.json, logger: logger, phases: phases)
            return ExitCodes.failed
        }
        if let requireRecipients, materialized.recipients == 0 {
            _ = try await repository.setStatus(runID: runID, to: .cancelled, reason: "no recipients")
            throw UsageError("run \(runID): \(requireRecipients)")
        }
        console.say(describe(runID: runID, materialized))
        // --no-wait with send_at still ahead: nothing is due before send_at, so the run is left scheduled however close
        // send_at is (the usual grace would wait for a send_at less than 30 s away and send it).
        let sendAtAhead = campaign.delivery.sendAt.map { $0.secondsSince1970 > Date().timeIntervalSince1970 } ?? false
        // Only scheduled campaigns are left for `bugle tick`; any other run waits out its retries as usual.
        let scheduled = campaign.delivery.sendAt != nil || campaign.delivery.localTime.isActive
        let code = try await execute(
            campaign: campaign, runID: runID, client: client, lanes: lanes, output: output, worker: worker,
            leaveWhenIdle: noWait && scheduled, idleGrace: sendAtAhead ? .zero : .seconds(30), logger: logger
        )
        phases.end("send")
        try await report(
            runID: runID, client: client, csv: csv ?? defaultReport(runID), json: output.json, logger: logger,
            phases: phases
        )
        return code
    }

    /// Why a run's reading stopped when the run left `materializing` under it (`bugle cancel`): nothing was sent.
    static func sayClosedWhileReading(runID: Int64, _ materialized: Materializer.Report, repository: RunRepository) async throws {
        let status = try await repository.run(id: runID)?.status.rawValue ?? "gone"
        ExitCodes.printError("run \(runID): stopped reading its segment after \(materialized.scan.rowsRead) row(s): the run is \(status); nothing was sent")
    }

    /// `run N: R recipient(s) from S row(s); skipped: …`.
    static func describe(runID: Int64, _ materialized: Materializer.Report) -> String {
        "run \(runID): \(materialized.recipients) recipient(s) from \(materialized.scan.rowsRead) row(s)" + RunCommand.describe(materialized.skipped)
    }

    /// Reads the campaign's segment into run `runID`'s ledger, holding the run's ``MaterializerLease`` (renewed every
    /// sixth of `leaseTTL`) so that `bugle resume` can tell a live reader from a dead one: a lease of a process of this
    /// host that no longer runs is taken over at once, any other once it has lapsed.
    /// - Parameters:
    ///   - first: Runs under the lease before the segment is read (a resume discards the dead reader's rows).
    ///   - ridesOutages: The command waits out a database outage (`--database-outage-limit` above 0): a lost
    ///     connection becomes ``DatabaseLost``, and the command reads the segment again once the server answers.
    /// - Throws: ``MaterializerLease/Held`` (as a usage error) when another live process reads the segment; for a lost
    ///   connection, ``DatabaseLost`` or a ``StoreError`` saying the run is left to `bugle resume`.
    static func materialize(
        runID: Int64, campaign: Campaign, segments: SegmentAccess, leaseTTL: Int, ridesOutages: Bool, json: Bool, logger: Logger,
        first: () async throws -> Void = {}
    ) async throws -> Materializer.Report {
        let client = segments.client
        let reader = try await segments.reader(for: campaign.segment, variables: Set(campaign.templateVariables), logger: logger)
        let failpoint = Failpoint.fromEnvironment()
        // Ctrl-C or SIGTERM while the segment is read stops the read at its next page (it used to kill the command).
        let signals = SignalTrap.shared
        let materializer = Materializer(client: client, logger: logger, stopRequested: signals.interruptedProbe) { pages in
            if failpoint.fires(.inMaterialize, count: pages) { failpoint.crash("\(pages) page(s) written") }
        }
        let host = ProcessInfo.processInfo.hostName
        do {
            return try await MaterializerLease.holding(
                runID: runID, owner: LocalWorkers.ownerID(), ttlSeconds: leaseTTL, client: client, logger: logger,
                // This very process reads a run's segment once at a time: a lease of its own is one its reader left
                // behind when the database connection was lost (its release could not be written then).
                ownerIsGone: { LocalWorkers.isDeadLocalProcess(owner: $0, host: host) || LocalWorkers.isThisProcess(owner: $0, host: host) }
            ) { lease in
                try await first()
                return try await materializer.materialize(runID: runID, campaign: campaign, reader: reader, lease: lease)
            }
        } catch let held as MaterializerLease.Held {
            throw UsageError("\(held); wait for it to start sending, or `bugle cancel \(runID)`")
        } catch is Materializer.Interrupted {
            let why = "stopped by \(signals.signalName ?? "a signal") while its segment was read; nothing was sent, and "
                + "`bugle resume \(runID)` reads it again"
            ExitCodes.printError("run \(runID): \(why)")
            if json {
                // Scripts get the run id and its state as for any other ending (stdout was empty): the rows read so far
                // are not counted, since a resume reads the segment again from zero.
                var record = try? await RunRepository(client: client, logger: logger).run(id: runID)
                record?.pauseReason = why
                print(SummaryJSON.render(runID: runID, record: record, lines: [], reportPath: nil, reportRows: 0))
            }
            throw ExitCode(ExitCodes.paused)
        } catch where StoreError.isConnectionLoss(error) {
            if ridesOutages { throw DatabaseLost(runID: runID, detail: StoreError.safeDescription(of: error), handover: nil) }
            throw StoreError(
                .connectionFailed,
                "run \(runID): the database connection was lost while its segment was read (\(StoreError.safeDescription(of: error))); "
                    + "nothing was sent, and `bugle resume \(runID)` reads the segment again")
        }
    }

    /// The campaign's `delivery.not_after`, when it has passed.
    static func deadlinePassed(_ campaign: Campaign, now: Date = Date()) -> Instant? {
        guard let notAfter = campaign.delivery.notAfter, now.timeIntervalSince1970 >= notAfter.secondsSince1970 else { return nil }
        return notAfter
    }

    /// A run never starts or resumes after its campaign's `delivery.not_after`.
    static func refuseAfterDeadline(_ campaign: Campaign, now: Date = Date()) throws {
        guard let notAfter = deadlinePassed(campaign, now: now) else { return }
        let formatter = ISO8601DateFormatter()
        let deadline = formatter.string(from: Date(timeIntervalSince1970: notAfter.secondsSince1970))
        throw UsageError("\(campaign.sourcePath ?? campaign.name): delivery.not_after (\(deadline)) has passed; the run does not start")
    }

    /// How the reason of a run left for `bugle tick` begins.
    static let scheduledPrefix = "scheduled: "

    /// Sends a run's recipients through `lanes` and returns the exit code.
    /// - Parameters:
    ///   - mode: `.exclusive` for `run`/`resume`, `.join` for `worker`.
    ///   - leaveWhenIdle: leave the run scheduled (exit 0) when its next due recipient is more than `idleGrace` away.
    ///   - scheduledWhenInterrupted: a signal leaves the run for the next `bugle tick` (`bugle tick` itself).
    /// - Throws: ``DatabaseLost`` when the worker stopped because the database stopped answering and
    ///   `worker.databaseOutageLimit` is above 0.
    static func execute(
        campaign: Campaign,
        runID: Int64,
        client: PostgresClient,
        lanes: LanePacing.Lanes,
        output: RunOutputOptions,
        worker: WorkerSettings,
        mode: LeaseMode = .exclusive,
        leaveWhenIdle: Bool = false,
        scheduledWhenInterrupted: Bool = false,
        idleGrace: Duration = .seconds(30),
        probeFirst: Bool = false,
        logger: Logger
    ) async throws -> Int32 {
        try refuseAfterDeadline(campaign)
        let console = Console(jsonOnStdout: output.json)
        let needed = try await RunRepository(client: client, logger: logger).unfinishedByProvider(runID: runID)
        let missing = needed.filter { provider, _ in ProviderKind(rawValue: provider).map { lanes.providers[$0] == nil } ?? true }
        if !missing.isEmpty {
            let what = missing.sorted { $0.key < $1.key }.map { provider, count in
                "\(count) recipient(s) need \(provider)" + (ProviderKind(rawValue: provider).map { " (a `\($0.providersSection):` section)" } ?? "")
            }.joined(separator: ", ")
            if mode == .join {
                // One machine's incomplete providers file is that worker's problem: it used to halt the run that the
                // other workers were delivering.
                throw UsageError(
                    "run \(runID): this worker cannot send it: \(what), which its providers file does not configure; the run goes on "
                        + "with its other workers. Give this worker the providers file they use")
            }
            _ = try await RunRepository(client: client, logger: logger).setStatus(runID: runID, to: .paused, reason: "halted: provider_not_configured: \(what)")
            ExitCodes.printError("run \(runID) halted: \(what), which the providers file does not configure. Add it, then `bugle resume \(runID)`.")
            return ExitCodes.failed
        }
        try await output.startMetrics(logger: logger)
        let store = PostgresCampaignStore(client: client, sessionTag: DatabaseSession.sessionTag, logger: logger)
        let control = RunControl()
        let trap = SignalTrap.shared
        trap.attach(control)
        defer { trap.detach() }
        let board = RunProgressBoard()
        let display = output.quiet ? nil : ProgressDisplay(runID: runID, board: board, pacers: lanes.pacers, interval: output.progressInterval)
        var configuration = CampaignRunner.Configuration()
        configuration.leaseTTLSeconds = worker.leaseTTL
        configuration.providerOutageLimit = .seconds(worker.providerOutageLimit)
        configuration.failpoint = Failpoint.fromEnvironment()
        configuration.describeError = StoreError.safeDescription(of:)
        // Once fenced for want of renewals, the worker hands what it holds over at once, and the command waits for the
        // database itself, for at most --database-outage-limit (``DatabaseOutageRecovery``). It used to hand over only
        // once a new session worked, retrying in place meanwhile: a full outage was waited out for 2.5 minutes of
        // retries (35 attempts) before the limit even began. Without the outage recovery nothing would write a
        // handover: the worker keeps retrying on its own connections.
        configuration.handsOverWhenFenced = worker.databaseOutageLimit > 0
        let interrupted = trap.interruptedProbe
        let waitsForDatabase = worker.databaseOutageLimit > 0
        configuration.goesOnAfterDatabaseLoss = { waitsForDatabase && !interrupted() }
        if leaveWhenIdle { configuration.leaveWhenIdle = idleGrace }
        configuration.interruptionLeavesScheduled = scheduledWhenInterrupted
        configuration.probeFirst = probeFirst
        let pacers = Array(lanes.pacers.values)
        configuration.onWorkerCount = { workers in
            for pacer in pacers { pacer.setWorkerShare(workers) }
            board.setWorkers(workers)
        }
        let runner = CampaignRunner(
            campaign: campaign, runID: runID, store: store, providers: lanes.providers, control: control, progress: board,
            configuration: configuration, logger: logger
        )
        display?.start()
        let result: RunResult
        do {
            result = try await runner.run(owner: LocalWorkers.ownerID(), mode: mode)
        } catch {
            await display?.stop()
            if configuration.goesOnAfterDatabaseLoss(), control.stopRequest == .leaseLost(nil) {
                throw DatabaseLost(runID: runID, detail: StoreError.safeDescription(of: error), handover: nil)
            }
            throw error
        }
        await display?.stop()
        // Fenced for want of renewals: a claim that ran late may also have found the lease lapsed (`.fenced(.running)`).
        if case .fenced = result.ending, control.stopRequest == .leaseLost(nil) {
            if configuration.goesOnAfterDatabaseLoss() { throw DatabaseLost(runID: runID, detail: nil, handover: result.handover) }
            if trap.interrupted {
                // Stopped by the operator during the outage: what the worker handed over is still written, then it ends.
                if let handover = result.handover { throw DatabaseLost(runID: runID, detail: nil, handover: handover, goesOn: false) }
                console.say("run \(runID): stopped while the database was away; `bugle resume \(runID)` goes on once it answers")
                return ExitCodes.paused
            }
        }
        if campaign.iosTransport == .legacy, let legacy = lanes.unpaced[.legacyAPNs] as? LegacyAPNSProvider {
            switch result.ending {
            case .fenced, .notGranted: break
            default: await pollFeedback(legacy, runID: runID, client: client, console: console, logger: logger)
            }
        }
        switch result.ending {
        case .completed:
            console.say("run \(runID): completed")
            return ExitCodes.completed
        case .closedAtDeadline:
            console.say(
                "run \(runID): delivery.not_after reached; the recipients not yet sent are cancelled (not_after_passed) and the run is completed")
            return ExitCodes.completed
        case .paused(let why) where why.hasPrefix(Self.scheduledPrefix):
            console.say("run \(runID): stopped (\(why.dropFirst(Self.scheduledPrefix.count))), or `bugle resume \(runID)`")
            return ExitCodes.paused
        case .paused(let why):
            // Only the last worker to leave pauses the run: one stopped beside others leaves it running with them (it
            // said the run was paused and pointed at `bugle resume`, which refuses a run others send).
            let repository = RunRepository(client: client, logger: logger)
            if try await repository.run(id: runID)?.status == .running {
                let others = try await LocalWorkers.others(runID: runID, repository: repository)
                if !others.isEmpty {
                    console.say("run \(runID): this worker left (\(why)); the run goes on with its \(others.count) other worker(s)")
                    return ExitCodes.completed
                }
            }
            console.say("run \(runID): paused (\(why)); resume with `bugle resume \(runID)`")
            return ExitCodes.paused
        case .halted(let code, let message):
            // The path or the provider failing is waited out; anything else is the configuration's.
            let next = ["AnswersLost", "ProviderUnavailable"].contains(code)
                ? "Once it works, `bugle resume \(runID)`" : "Fix the configuration, then `bugle resume \(runID)`"
            let said = message.hasSuffix(".") ? String(message.dropLast()) : message
            ExitCodes.printError("run \(runID) halted: \(code): \(said). \(next).")
            return ExitCodes.failed
        case .scheduled(let seconds):
            let due = CSVFormat.timestamp(Instant(secondsSince1970: Date().timeIntervalSince1970 + seconds))
            console.say("run \(runID): scheduled; the next recipients are due at \(due). `bugle tick` (from cron, every 15 minutes) or `bugle resume \(runID)` sends them")
            return ExitCodes.completed
        case .fenced(.completed):
            console.say("run \(runID): completed (by another worker)")
            return ExitCodes.completed
        case .fenced(let status):
            // A run still running (or ready) went on without this worker: its lease lapsed (renewals starved, the
            // database out of reach) and a peer reaped it. "the run is running" said nothing of that.
            let what: String
            switch status {
            case nil:
                what = "this worker's lease was lost or is held by another worker"
            case .running?, .ready?:
                what = "this worker's lease was lost (not renewed in time, so another worker took over); the run goes on without it"
            case let status?:
                what = "the run is \(status.rawValue)"
            }
            ExitCodes.printError("run \(runID): stopped: \(what)")
            if status == .cancelled,
                let settled = try await CancelledRunSettlement.settle(runID: runID, repository: RunRepository(client: client, logger: logger))
            {
                console.say(settled)
            }
            return status == .paused ? ExitCodes.paused : ExitCodes.failed
        case .notGranted:
            return try await notGranted(runID, mode: mode, client: client, console: console, logger: logger)
        }
    }

    /// The lease was refused after this process's own checks passed: another process took the run in between (two
    /// `bugle resume` of one run started together; a run completed as a worker joined). Refused as those checks would
    /// have refused it (exit 1, nothing claimed), or exit 0 when the run is completed.
    private static func notGranted(_ runID: Int64, mode: LeaseMode, client: PostgresClient, console: Console, logger: Logger) async throws -> Int32 {
        let repository = RunRepository(client: client, logger: logger)
        let status = try await repository.run(id: runID)?.status
        if status == .completed {
            console.say("run \(runID): completed (by another worker)")
            return ExitCodes.completed
        }
        let live = try await repository.liveWorkers(runID: runID)
        if mode == .exclusive, !live.isEmpty { throw UsageError(ResumeCommand.beingSent(runID, by: live, status: status)) }
        if mode == .join, let status { throw UsageError(WorkerCommand.notRunning(runID, status)) }
        throw UsageError("run \(runID) could not be taken: it is \(status?.rawValue ?? "gone"); see `bugle runs`")
    }

    /// The end-of-run feedback poll of a legacy campaign; a failure is reported but does not fail the run.
    private static func pollFeedback(_ lane: LegacyAPNSProvider, runID: Int64, client: PostgresClient, console: Console, logger: Logger) async {
        do {
            let summary = try await FeedbackCommand.poll(lane, client: client, logger: logger)
            console.say("run \(runID): " + summary.description)
            if let note = summary.problemNote {
                ExitCodes.printError("run \(runID): the legacy APNs feedback service was not read to the end: \(note)")
            }
        } catch {
            ExitCodes.printError("run \(runID): the legacy APNs feedback service could not be read: \(error); run `bugle feedback` later")
        }
    }

    /// Where a run's report goes without `--csv`: `./bugle-run-<id>.csv`.
    /// - Parameter directory: Where to put it (nil: the current directory).
    static func defaultReport(_ runID: Int64, in directory: String? = nil) -> ReportDestination {
        let name = "bugle-run-\(runID).csv"
        guard let directory else { return .path(name) }
        return .path(URL(fileURLWithPath: directory).appendingPathComponent(name).path)
    }

    /// Writes the CSV report and prints the summary (as JSON on stdout with `--json`).
    /// - Parameter phases: How long the earlier phases of this invocation took; the report's own time is added.
    static func report(
        runID: Int64, client: PostgresClient, csv: ReportDestination, json: Bool, logger: Logger, phases: PhaseTimer = PhaseTimer(),
        rebuildSummary: Bool = true
    ) async throws {
        var phases = phases
        let console = Console(jsonOnStdout: json)
        let repository = RunRepository(client: client, logger: logger)
        let lines = try await repository.summary(runID: runID, rebuild: rebuildSummary)
        let variants = try await repository.variantSummary(runID: runID)
        let record = try await repository.run(id: runID)
        let rows: Int64
        do {
            rows = try await ReportExporter(client: client, logger: logger).export(runID: runID, to: csv)
        } catch var error as FileWriteError {
            // The run is recorded whatever happened to its file: show the summary, and say how to write it again.
            if json {
                // Scripts still get the run's summary, with no report (it printed nothing at all).
                print(SummaryJSON.render(runID: runID, record: record, lines: lines, variants: variants, reportPath: nil, reportRows: 0, phases: phases.seconds))
            } else {
                SummaryPrinter.print(runID: runID, record: record, lines: lines, variants: variants)
            }
            error.hint = "the run is recorded; write its report again with `bugle report \(runID) --csv PATH`"
            throw error
        }
        phases.end("report")
        if json {
            print(SummaryJSON.render(runID: runID, record: record, lines: lines, variants: variants, reportPath: csv.description, reportRows: rows, phases: phases.seconds))
        } else {
            SummaryPrinter.print(runID: runID, record: record, lines: lines, variants: variants)
        }
        console.say("report: \(csv) (\(rows) row(s))")
        // Several workers: one leaving a stopped run reads the ledger while the others still record their last answers.
        let others = try await LocalWorkers.others(runID: runID, repository: repository)
        if let record, record.status != .running, !others.isEmpty {
            console.say(
                "note: \(others.count) other worker(s) still record their last answers: this summary and report may change; "
                    + "`bugle report \(runID)` gives the final ones once they have left")
        }
    }
}
