import ArgumentParser
import BugleCore
import Foundation

/// `bugle validate FILE`: checks a campaign (and its providers file) without touching the database.
struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a campaign file (and its providers file) without touching the database.",
        discussion: "Errors name file:line:column and the key path. Exit 0 when valid, 1 otherwise. A providers file that is named but absent is only a note (secrets often live elsewhere); one given with --providers must exist and is checked."
    )

    @Argument(help: "The campaign YAML file.")
    var file: String

    @Option(help: "Providers file to check instead of the campaign's `providers:`.")
    var providers: String?

    func run() async throws {
        try await ExitCodes.guarding {
            let campaign = try CampaignLoader.load(path: file)
            if let path = providers ?? campaign.providersPath {
                if FileManager.default.fileExists(atPath: path) {
                    _ = try ProviderSettingsLoader.load(path: path)
                } else if providers != nil {
                    throw UsageError("providers file \(path) does not exist")
                } else {
                    ExitCodes.printError("note: \(file): providers file \(path) not found; `bugle run` will need it (or --providers)")
                }
            }
            print("\(file): ok — campaign \(campaign.name) (\(campaign.message.locales.count) locale(s), dedupe \(campaign.dedupe.rawValue))")
            return ExitCodes.completed
        }
    }
}
