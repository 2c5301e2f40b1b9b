import ArgumentParser
import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import Foundation
import Logging

/// `bugle demo`: the zero-setup tour — embedded PostgreSQL, seeded demo devices, in-process APNs and FCM
/// simulators, a real run of the mixed campaign, and a dry run.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Seed demo devices into the embedded database and run campaigns from campaigns/ against local APNs and FCM simulators.",
        discussion: """
            Starts (or reuses) the embedded PostgreSQL cluster under $BUGLE_HOME, seeds --devices demo devices \
            (half iOS, half Android/web, several locales, 2% dead tokens), starts the APNs and FCM simulators \
            in-process over TLS + HTTP/2 (a private CA, an ES256 .p8 key and an RSA service account in \
            $BUGLE_HOME/sim), sends the mixed campaigns/spring-sale.yaml through them for real (dead tokens come \
            back 410 / UNREGISTERED and are deactivated), then dry-runs campaigns/ios-launch.yaml. Run it again \
            the same day: the `daily` dedupe means nobody is notified twice.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var output: RunOutputOptions

    @Option(parsing: .unconditional, help: "How many demo devices to seed.")
    var devices: Int = 2_000

    @Option(help: "The campaign sent for real to the simulators.")
    var campaign: String = "campaigns/spring-sale.yaml"

    @Option(help: "The campaign dry-run afterwards (empty to skip).")
    var dryRunCampaign: String = "campaigns/ios-launch.yaml"

    @Flag(name: .customLong("seed-only"), help: "Only seed the demo devices (used by tools/bench).")
    var seedOnly = false

    func validate() throws {
        guard (1...50_000_000).contains(devices) else { throw ValidationError("--devices must be between 1 and 50,000,000") }
    }

    func run() async throws {
        let logger = global.makeLogger()
        let (count, path, dryPath, seedOnly, output) = (devices, campaign, dryRunCampaign, self.seedOnly, output)
        try await ExitCodes.guarding {
            if seedOnly {
                let seeded = try await DatabaseSession.with(global, logger: logger) { client in
                    try await DemoSeeder(client: client, logger: logger).seed(count: count)
                }
                print(Self.describe(seeded))
                return ExitCodes.completed
            }
            if DatabaseSession.namesServer(global) {
                // The demo seeds made-up devices and sends a campaign to everyone in bugle.devices: against a real server
                // it reached real users' rows and took their day's dedupe slot.
                throw UsageError(
                    "bugle demo seeds demo devices and sends a campaign to every device it finds, so it runs on Bugle's embedded "
                        + "cluster only; \(global.databaseURL == nil ? "BUGLE_DATABASE_URL is set" : "--database-url was given") and names a "
                        + "server: unset it for the demo (`env -u BUGLE_DATABASE_URL bugle demo`); nothing was written")
            }
            let console = Console(jsonOnStdout: output.json)
            for file in [path, dryPath] where !file.isEmpty && !FileManager.default.fileExists(atPath: file) {
                throw UsageError("\(file) not found: run `bugle demo` from the repository root, or pass --campaign")
            }
            let yaml = try String(contentsOfFile: path, encoding: .utf8)
            let campaign = try CampaignLoader.load(yaml: yaml, path: path)
            let dryCampaign = try dryPath.isEmpty ? nil : CampaignLoader.load(path: dryPath)

            let home = EmbeddedCluster.bugleHome(environment: ProcessInfo.processInfo.environment)
            let lock = try DemoLock(home: home, say: console.say)
            defer { withExtendedLifetime(lock) {} }
            let simulators = try await DemoSimulators.start(directory: home + "/sim", logger: logger)
            console.say("demo: APNs simulator on https://127.0.0.1:\(simulators.apnsPort), FCM on https://127.0.0.1:\(simulators.fcmPort) (providers file \(simulators.certificates.providersFile))")
            let lanes: LanePacing.Lanes
            do {
                let settings = try ProviderSettingsLoader.load(path: simulators.certificates.providersFile)
                output.prepareMetrics()
                lanes = try ProviderLanes.make(settings: settings, campaign: campaign, allowReadableKeys: false, logger: logger)
            } catch {
                try await simulators.stop()
                throw error
            }
            do {
                // A port in use is found before the run is written (it left a `ready` run that no resume could send).
                try await output.startMetrics(logger: logger)
            } catch {
                await lanes.shutdown()
                try await simulators.stop()
                throw error
            }
            let code: Int32
            let dryReport: DryRunOutcome?
            do {
                (code, dryReport) = try await DatabaseSession.with(global, logger: logger) { client in
                    let seeded = try await DemoSeeder(client: client, logger: logger).seed(count: count)
                    console.say(Self.describe(seeded))
                    let segments = try await DatabaseSession.segmentAccess(global, client: client, logger: logger)
                    let code = try await RunExecution.start(
                        campaign: campaign, yaml: yaml, client: client, segments: segments, lanes: lanes, csv: nil, output: output, worker: .standard,
                        logger: logger)
                    guard let dryCampaign else { return (code, nil) }
                    let (report, _, estimate) = try await DryRunExecution.execute(
                        campaign: dryCampaign, client: client, segments: segments, csv: nil, logger: logger)
                    return (code, DryRunOutcome(report: report, campaign: dryCampaign, estimate: estimate))
                }
            } catch {
                await lanes.shutdown()
                try await simulators.stop()
                throw error
            }
            await lanes.shutdown()
            let accepted = simulators.accepted
            try await simulators.stop()
            console.say("demo: the simulators accepted \(accepted.apns) APNs and \(accepted.fcm) FCM notification(s)")
            if let dryReport {
                console.say("")
                DryRunPrinter.print(dryReport.report, campaign: dryReport.campaign, estimate: dryReport.estimate, samples: 1, preview: nil, console: console)
            }
            return code
        }
    }
}

extension DemoCommand {
    /// `demo: 10 demo device(s) added; bugle.devices holds 2010`.
    static func describe(_ seeded: DemoSeeder.Seeded) -> String {
        "demo: \(seeded.inserted) demo device(s) added; bugle.devices holds \(seeded.devices)"
    }
}

/// A dry-run report with its campaign, carried out of the database session.
struct DryRunOutcome: Sendable {
    var report: DryRunReport
    var campaign: Campaign
    var estimate: ClaimRulesEstimate?
}
