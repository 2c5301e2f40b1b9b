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
    static func start(campaign: Campaign, yaml: String, client: PostgresClient, lanes: [ProviderKind: any PushProvider], csvPath: String?, logger: Logger) async throws -> Int32 {
        let repository = RunRepository(client: client, logger: logger)
        let runID = try await repository.createRun(campaign: campaign, yaml: yaml, periodKey: PeriodKey.key(for: campaign.dedupe, at: Date()))
        print("run \(runID): reading segment of \(campaign.name)")
        let useRole = try await Migrator(client: client, logger: logger).segmentReaderRoleAvailable()
        let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: useRole, logger: logger)
        let materialized = try await Materializer(client: client, logger: logger).materialize(runID: runID, campaign: campaign, reader: reader)
        print("run \(runID): \(materialized.recipients) recipient(s) from \(materialized.scan.rowsRead) row(s)" + RunCommand.describe(materialized.skipped))
        let code = try await execute(campaign: campaign, runID: runID, client: client, lanes: lanes, logger: logger)
        try await report(runID: runID, client: client, csvPath: csvPath ?? "bugle-run-\(runID).csv", logger: logger)
        return code
    }

    /// Sends a run's recipients through `lanes` and returns the exit code.
    static func execute(campaign: Campaign, runID: Int64, client: PostgresClient, lanes: [ProviderKind: any PushProvider], logger: Logger) async throws -> Int32 {
        let needed = try await RunRepository(client: client, logger: logger).unfinishedByProvider(runID: runID)
        let missing = needed.filter { provider, _ in ProviderKind(rawValue: provider).map { lanes[$0] == nil } ?? true }
        if !missing.isEmpty {
            let what = missing.sorted { $0.key < $1.key }.map { "\($0.value) recipient(s) need \($0.key)" }.joined(separator: ", ")
            _ = try await RunRepository(client: client, logger: logger).setStatus(runID: runID, to: .paused, reason: "halted: provider_not_configured: \(what)")
            ExitCodes.printError("run \(runID) halted before sending: \(what), which the providers file does not configure. Add it, then `bugle resume \(runID)`.")
            return ExitCodes.failed
        }
        let store = PostgresCampaignStore(client: client, logger: logger)
        let control = RunControl()
        let trap = SignalTrap(control: control)
        defer { trap.cancel() }
        let runner = CampaignRunner(campaign: campaign, runID: runID, store: store, providers: lanes, control: control, logger: logger)
        let owner = "\(ProcessInfo.processInfo.hostName):\(getpid()):\(UInt32.random(in: 0...UInt32.max))"
        let result = try await runner.run(owner: owner)
        if campaign.iosTransport == .legacy, let legacy = lanes[.legacyAPNs] as? LegacyAPNSProvider {
            if case .fenced = result.ending {} else { await pollFeedback(legacy, runID: runID, client: client, logger: logger) }
        }
        switch result.ending {
        case .completed:
            print("run \(runID): completed")
            return ExitCodes.completed
        case .paused(let why):
            print("run \(runID): paused (\(why)); resume with `bugle resume \(runID)`")
            return ExitCodes.paused
        case .halted(let code, let message):
            ExitCodes.printError("run \(runID) halted: \(code): \(message). Fix the configuration, then `bugle resume \(runID)`.")
            return ExitCodes.failed
        case .fenced(let status):
            ExitCodes.printError("run \(runID): stopped, the run is \(status?.rawValue ?? "held by another worker")")
            return status == .paused ? ExitCodes.paused : ExitCodes.failed
        }
    }

    /// The end-of-run feedback poll of a legacy campaign; a failure is reported but does not fail the run.
    private static func pollFeedback(_ lane: LegacyAPNSProvider, runID: Int64, client: PostgresClient, logger: Logger) async {
        do {
            print("run \(runID): " + (try await FeedbackCommand.poll(lane, client: client, logger: logger)).description)
        } catch {
            ExitCodes.printError("run \(runID): the legacy APNs feedback service could not be read: \(error); run `bugle feedback` later")
        }
    }

    /// Writes the CSV report and prints the summary.
    static func report(runID: Int64, client: PostgresClient, csvPath: String, logger: Logger) async throws {
        let repository = RunRepository(client: client, logger: logger)
        let lines = try await repository.summary(runID: runID)
        let rows = try await ReportExporter(client: client, logger: logger).export(runID: runID, to: csvPath)
        SummaryPrinter.print(runID: runID, record: try await repository.run(id: runID), lines: lines)
        print("report: \(csvPath) (\(rows) row(s))")
    }
}
