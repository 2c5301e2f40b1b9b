import ArgumentParser
import BugleCore
import BugleRunner
import BugleSimulator
import BugleStore
import Foundation
import Logging

/// `bugle demo`: the zero-setup tour — embedded PostgreSQL, seeded demo devices, an in-process simulator,
/// a real campaign run, and a dry run of the mixed campaign.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Seed demo devices into the embedded database and run campaigns from campaigns/ against a local simulator.",
        discussion: """
            Starts (or reuses) the embedded PostgreSQL cluster under $BUGLE_HOME, seeds --devices demo devices \
            (half iOS, half Android/web, several locales, 2% dead tokens), starts the APNs simulator in-process \
            over TLS + HTTP/2 (certificates and an ES256 key in $BUGLE_HOME/sim), sends campaigns/ios-launch.yaml \
            through it for real (dead tokens come back 410 and are deactivated), then dry-runs the mixed \
            campaigns/spring-sale.yaml. Run it again: the `once` dedupe means nobody is notified twice.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var output: RunOutputOptions

    @Option(help: "How many demo devices to seed.")
    var devices: Int = 2_000

    @Option(help: "The campaign sent for real to the simulator.")
    var campaign: String = "campaigns/ios-launch.yaml"

    @Option(help: "The campaign dry-run afterwards (empty to skip).")
    var dryRunCampaign: String = "campaigns/spring-sale.yaml"

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
                print("demo: \(seeded) demo device(s) in bugle.devices")
                return ExitCodes.completed
            }
            for file in [path, dryPath] where !file.isEmpty && !FileManager.default.fileExists(atPath: file) {
                throw UsageError("\(file) not found: run `bugle demo` from the repository root, or pass --campaign")
            }
            let yaml = try String(contentsOfFile: path, encoding: .utf8)
            let campaign = try CampaignLoader.load(yaml: yaml, path: path)
            let dryCampaign = try dryPath.isEmpty ? nil : CampaignLoader.load(path: dryPath)

            let home = EmbeddedCluster.bugleHome(environment: ProcessInfo.processInfo.environment)
            let simulatorDirectory = home + "/sim"
            let certificates = SimulatorCertificates.exists(in: simulatorDirectory)
                ? try SimulatorCertificates.load(from: simulatorDirectory)
                : try SimulatorCertificates.generate(in: simulatorDirectory, port: 0)
            var simulatorLogger = logger
            simulatorLogger[metadataKey: "component"] = "simulator"
            let simulator = APNsSimulator(configuration: APNsSimulatorConfiguration(certificates: certificates), logger: simulatorLogger)
            let port = try await simulator.start()
            try certificates.writeProvidersFile(port: port)
            print("demo: APNs simulator on https://127.0.0.1:\(port) (providers file \(certificates.providersFile))")
            let lanes: LanePacing.Lanes
            do {
                let settings = try ProviderSettingsLoader.load(path: certificates.providersFile)
                output.prepareMetrics()
                lanes = try ProviderLanes.make(settings: settings, campaign: campaign, allowReadableKeys: false, logger: logger)
            } catch {
                try await simulator.stop()
                throw error
            }
            let code: Int32
            let dryReport: DryRunOutcome?
            do {
                (code, dryReport) = try await DatabaseSession.with(global, logger: logger) { client in
                    let seeded = try await DemoSeeder(client: client, logger: logger).seed(count: count)
                    print("demo: \(seeded) demo device(s) in bugle.devices")
                    let code = try await RunExecution.start(campaign: campaign, yaml: yaml, client: client, lanes: lanes, csvPath: nil, output: output, logger: logger)
                    guard let dryCampaign else { return (code, nil) }
                    let (report, _) = try await DryRunExecution.execute(campaign: dryCampaign, client: client, csvPath: nil, logger: logger)
                    return (code, DryRunOutcome(report: report, campaign: dryCampaign))
                }
            } catch {
                await lanes.shutdown()
                try await simulator.stop()
                throw error
            }
            await lanes.shutdown()
            let counters = simulator.counters()
            try await simulator.stop()
            print("demo: the simulator accepted \(counters.accepted) notification(s)")
            if let dryReport {
                print("")
                DryRunPrinter.print(dryReport.report, campaign: dryReport.campaign, samples: 1, csvPath: nil)
            }
            return code
        }
    }
}

/// A dry-run report with its campaign, carried out of the database session.
struct DryRunOutcome: Sendable {
    var report: DryRunReport
    var campaign: Campaign
}
