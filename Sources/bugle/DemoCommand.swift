import ArgumentParser
import BugleCore
import BugleStore
import Foundation
import Logging

/// `bugle demo`: the zero-setup tour — embedded PostgreSQL, seeded demo devices, a campaign from `campaigns/`.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Seed demo devices into the embedded database and run a campaign from campaigns/.",
        discussion: """
            Starts (or reuses) the embedded PostgreSQL cluster under $BUGLE_HOME, seeds --devices demo devices \
            (half iOS, half Android/web, several locales, 2% dead tokens) and dry-runs campaigns/spring-sale.yaml.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "How many demo devices to seed.")
    var devices: Int = 2_000

    @Option(help: "The campaign to run.")
    var campaign: String = "campaigns/spring-sale.yaml"

    @Flag(name: .customLong("seed-only"), help: "Only seed the demo devices (used by tools/bench).")
    var seedOnly = false

    func validate() throws {
        guard (1...50_000_000).contains(devices) else { throw ValidationError("--devices must be between 1 and 50,000,000") }
    }

    func run() async throws {
        let logger = global.makeLogger()
        let (count, path, seedOnly) = (devices, campaign, self.seedOnly)
        try await ExitCodes.guarding {
            if seedOnly {
                let seeded = try await DatabaseSession.with(global, logger: logger) { client in
                    try await DemoSeeder(client: client, logger: logger).seed(count: count)
                }
                print("demo: \(seeded) demo device(s) in bugle.devices")
                return ExitCodes.completed
            }
            guard FileManager.default.fileExists(atPath: path) else {
                throw UsageError("\(path) not found: run `bugle demo` from the repository root, or pass --campaign")
            }
            let campaign = try CampaignLoader.load(path: path)
            let report = try await DatabaseSession.with(global, logger: logger) { client in
                let seeded = try await DemoSeeder(client: client, logger: logger).seed(count: count)
                print("demo: \(seeded) demo device(s) in bugle.devices")
                return try await DryRunExecution.execute(campaign: campaign, client: client, csvPath: nil, logger: logger)
            }
            DryRunPrinter.print(report, campaign: campaign, samples: 1, csvPath: nil)
            return ExitCodes.completed
        }
    }
}
