import ArgumentParser
import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging
import PostgresNIO

/// `bugle run FILE`: materialize the segment into a run ledger, send, report.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a campaign: read its segment, send to APNs/FCM, write a CSV report and a DB summary.",
        discussion: """
            --dry-run renders every recipient's APNs payload/headers and FCM message, checks sizes, and prints counts \
            per platform, locale and skip reason with sample payloads (--json: as one JSON object on stdout). It \
            writes nothing to the database; with --csv it writes a preview CSV (status would_send, or the skip reason). --dry-run --validate also sends every \
            Android/web recipient's message to FCM with validate_only (when the providers file has an fcm: section), \
            so FCM checks message and token without delivering anything; nothing is deactivated. A message FCM gives no \
            verdict on (quota, unavailable, no access token) is asked again up to 3 times, then counted as not checked, \
            and the dry run exits 2.

            Scheduling: with delivery.send_at in the future, run waits until then (--no-wait: the run is created now, \
            due at send_at, and `bugle tick` sends it). With delivery.deliver_at_local, each device is due when its \
            local clock shows that time: run stays open across the day and sends each 15-minute window as it comes \
            (--no-wait: sends what is due and exits; `bugle tick` from cron every 15 minutes sends the rest).

            Exit codes: 0 completed (or scheduled with --no-wait), 1 validation error (nothing written), 2 failed or halted (with \
            --dry-run --validate: FCM halted, or some messages were not checked), 3 paused (resumable).
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var output: RunOutputOptions

    @OptionGroup var worker: WorkerOptions

    @Argument(help: "The campaign YAML file.")
    var file: String

    @Option(help: "Providers file (overrides the campaign's `providers:`).")
    var providers: String?

    @Flag(name: .customLong("dry-run"), help: "Render and count without sending or writing to the database.")
    var dryRun = false

    @Flag(name: .customLong("validate"), help: "With --dry-run: have FCM check every Android/web message (validate_only); needs an fcm: section.")
    var validateWithFCM = false

    @Option(help: "Where to write the CSV report, - for standard output (default: ./bugle-run-<id>.csv; dry run: no CSV unless given).")
    var csv: String?

    @Option(parsing: .unconditional, help: "Sample requests to print per platform in a dry run, other locales and variants first (0 to hide).")
    var samples: Int = 1

    @Flag(name: .customLong("allow-readable-keys"), help: "Start even if a key file is readable by group or others.")
    var allowReadableKeys = false

    @Flag(
        name: .customLong("no-wait"),
        help: "Do not wait for delivery.send_at or local-time windows: create the run, send what is due now, and exit 0; `bugle tick` sends the rest.")
    var noWait = false

    func validate() throws {
        if validateWithFCM && !dryRun {
            throw ValidationError("--validate needs --dry-run")
        }
        try CSVOption.validate(csv, json: output.json)
        guard samples >= 0 else { throw ValidationError("--samples must be 0 (none) or more") }
    }

    func run() async throws {
        let logger = global.makeLogger()
        try await ExitCodes.guarding {
            let (yaml, campaign) = try CampaignFile.read(file)
            let csv = try CSVOption.destination(self.csv, json: output.json)
            if dryRun { return try await runDry(campaign, csv: csv, logger: logger) }
            // The signals are taken from here on: SIGINT inherited as ignored (a script's background job) that came
            // before the wait for send_at or the segment's reading took them was lost.
            _ = SignalTrap.shared
            if csv == nil { try CSVOption.requireDefaultReportDirectory() }
            let (global, output, worker) = (global, output, worker.settings)
            let source = StoredRunSource(providersOverride: providers, allowReadableKeys: allowReadableKeys)
            return try await DatabaseOutageRecovery.riding(global, limit: worker.databaseOutageLimit, json: output.json, logger: logger) {
                try await runWithLanes(campaign, yaml: yaml, csv: csv, logger: logger)
            } then: { runID in
                try await ResumeCommand.resume(
                    runID, source: source, global: global, output: output, worker: worker, csv: csv, afterOutage: true, logger: logger)
            }
        }
    }

    /// Builds the campaign's lanes, sends the run through them, and shuts them down.
    private func runWithLanes(_ campaign: Campaign, yaml: String, csv: ReportDestination?, logger: Logger) async throws -> Int32 {
        let (providersPath, settings) = try ProvidersFile.load(
            override: providers, campaign: campaign, missing: "\(file): no providers file: set `providers:` in the campaign or pass --providers")
        output.prepareMetrics()
        let lanes = try ProviderLanes.make(settings: settings, campaign: campaign, allowReadableKeys: allowReadableKeys, logger: logger)
        do {
            try ProviderLanes.checkTransport(campaign, lanes: lanes, providersPath: providersPath)
            // A port in use is found before the run is written, not after (it used to leave a `ready` run behind).
            try await output.startMetrics(logger: logger)
        } catch {
            await lanes.shutdown()
            throw error
        }
        let code: Int32
        do {
            code = try await runReal(campaign, yaml: yaml, lanes: lanes, csv: csv, logger: logger)
        } catch {
            await lanes.shutdown()
            throw error
        }
        await lanes.shutdown()
        return code
    }

    private func runReal(
        _ campaign: Campaign, yaml: String, lanes: LanePacing.Lanes, csv: ReportDestination?, logger: Logger
    ) async throws -> Int32 {
        let (output, worker, noWait) = (output, worker.settings, noWait)
        let global = self.global
        return try await DatabaseSession.withServer(global, logger: logger) { client, server in
            let segments = try await DatabaseSession.segmentAccess(global, client: client, logger: logger)
            try await SegmentColumnsCheck.verify(campaign, segments: segments, logger: logger)
            return try await RunExecution.start(
                campaign: campaign, yaml: yaml, client: client, segments: segments, lanes: lanes, csv: csv, output: output, worker: worker,
                noWait: noWait, logger: logger)
        }
    }

    static func describe(_ skipped: [SkipReason: Int64]) -> String {
        guard !skipped.isEmpty else { return "" }
        return "; skipped: " + skipped.sorted { $0.key < $1.key }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", ")
    }

    /// The `payload_limit` a legacy campaign's iOS payloads meet: the providers file's, when there is one, else the
    /// default (the dry run sizes them as the lane will).
    private func legacyPayloadLimit(_ campaign: Campaign) throws -> Int {
        guard campaign.iosTransport == .legacy, let path = providers ?? campaign.providersPath, FileManager.default.fileExists(atPath: path) else {
            return LegacyAPNsSettings.defaultPayloadLimit
        }
        return try ProviderSettingsLoader.load(path: path).legacyAPNs?.payloadLimit ?? LegacyAPNsSettings.defaultPayloadLimit
    }

    private func runDry(_ campaign: Campaign, csv: ReportDestination?, logger: Logger) async throws -> Int32 {
        try RunExecution.refuseAfterDeadline(campaign)
        if let providers, !validateWithFCM {
            // The dry run sends nothing and needs no providers file, but one given by name must be there and well
            // formed: a missing or broken file passed without a word (its credentials are `bugle validate`'s to check).
            _ = try ProviderSettingsLoader.load(path: providers)
        }
        var fcm: (any PushProvider)?
        if validateWithFCM {
            let (providersPath, settings) = try ProvidersFile.load(
                override: providers, campaign: campaign,
                missing: "\(file): --validate needs a providers file: set `providers:` in the campaign or pass --providers")
            if settings.fcm == nil {
                Console(jsonOnStdout: output.json).say("note: \(providersPath) has no fcm: section; --validate checks nothing")
            } else {
                fcm = try ProviderLanes.make(settings: ProviderSettings(fcm: settings.fcm, sourcePath: settings.sourcePath), campaign: campaign, allowReadableKeys: allowReadableKeys, logger: logger).providers[.fcm]
            }
        }
        let validator = fcm.map { DryRunValidation(campaign: campaign, provider: $0) }
        let legacyPayloadLimit = try legacyPayloadLimit(campaign)
        let report: DryRunReport
        let validation: DryRunValidation?
        let estimate: ClaimRulesEstimate?
        do {
            let global = self.global
            (report, validation, estimate) = try await DatabaseSession.with(global, migrate: false, logger: logger) { client in
                let segments = try await DatabaseSession.segmentAccess(global, client: client, prepare: false, logger: logger)
                // As `run` and `validate` do: a template variable the segment does not return is a mistake in the
                // file, not a recipient whose value is NULL.
                try await SegmentColumnsCheck.verify(campaign, segments: segments, logger: logger)
                return try await DryRunExecution.execute(
                    campaign: campaign, client: client, segments: segments, csv: csv, validator: validator, legacyPayloadLimit: legacyPayloadLimit,
                    samples: samples, logger: logger)
            }
        } catch {
            await fcm?.shutdown()
            throw error
        }
        await fcm?.shutdown()
        if output.json {
            print(DryRunJSON.render(report, campaign: campaign, estimate: estimate, samples: samples, preview: csv, validation: validation))
        } else {
            DryRunPrinter.print(report, campaign: campaign, estimate: estimate, samples: samples, preview: csv)
            if let validation { DryRunPrinter.print(validation) }
        }
        if let validation, !validation.isComplete {
            // Said on stderr too, so a script reading --json or the exit status alone is not misled.
            ExitCodes.printError(
                "--validate: FCM gave no verdict on \(validation.notChecked.values.reduce(0, +)) message(s) ("
                    + DryRunPrinter.tally(validation.notChecked) + "); the validation is incomplete")
        }
        // An incomplete validation is a failed one: the messages it could not check may be refused.
        let passed = validation.map { $0.halted == nil && $0.isComplete } ?? true
        return passed ? ExitCodes.completed : ExitCodes.failed
    }
}
