import ArgumentParser
import BugleCore
import Foundation

/// `bugle validate FILE`: checks a campaign (and its providers file) without touching the database.
struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a campaign file (and its providers file); templated campaigns also prepare their segment.",
        discussion: """
            Errors name file:line:column and the key path. Exit 0 when valid, 1 otherwise. A providers file that is \
            named but absent is only a note (secrets often live elsewhere); one given with --providers must exist and \
            is checked, and each APNs / FCM endpoint is printed with the way Bugle will reach it: directly, or through \
            which HTTP proxy (the file's `proxy:`, else https_proxy minus no_proxy).

            A campaign whose copy uses template variables ({{first_name}}) has its segment prepared on the database \
            (read-only, no row is read) to check that every variable is one of the segment's columns. --offline skips \
            that check; nothing else touches the database.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Do not prepare the segment on the database (template variables are then checked at `bugle run`).")
    var offline = false

    @Argument(help: "The campaign YAML file.")
    var file: String

    @Option(help: "Providers file to check instead of the campaign's `providers:`.")
    var providers: String?

    func run() async throws {
        try await ExitCodes.guarding {
            let campaign = try CampaignLoader.load(path: file)
            if let path = providers ?? campaign.providersPath {
                if FileManager.default.fileExists(atPath: path) {
                    let settings = try ProviderSettingsLoader.load(path: path)
                    for line in try ProviderRoutes.lines(settings, environment: ProcessInfo.processInfo.environment) {
                        print("\(path): \(line)")
                    }
                } else if providers != nil {
                    throw UsageError("providers file \(path) does not exist")
                } else {
                    ExitCodes.printError("note: \(file): providers file \(path) not found; `bugle run` will need it (or --providers)")
                }
            }
            var columnsNote = ""
            if !campaign.templateVariables.isEmpty {
                if offline {
                    columnsNote = "; template variables not checked against the segment (--offline)"
                } else {
                    let logger = global.makeLogger()
                    try await DatabaseSession.with(global, migrate: false, logger: logger) { client in
                        let segments = try await DatabaseSession.segmentAccess(global, client: client, prepare: false, logger: logger)
                        try await SegmentColumnsCheck.verify(campaign, segments: segments, logger: logger)
                    }
                    columnsNote = "; template variables \(campaign.templateVariables.joined(separator: ", ")) are segment columns"
                }
            }
            print("\(file): ok — campaign \(campaign.name) (\(campaign.message.locales.count) locale(s), dedupe \(campaign.dedupe.rawValue)\(campaign.variants.isEmpty ? "" : ", \(campaign.variants.count) variants")\(columnsNote))")
            return ExitCodes.completed
        }
    }
}

/// Reads a campaign file for a sending command: its text (stored with the run) and the validated campaign.
enum CampaignFile {
    static func read(_ path: String) throws -> (yaml: String, campaign: Campaign) {
        let yaml: String
        do {
            yaml = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw UsageError("\(path): cannot read the campaign file")
        }
        return (yaml, try CampaignLoader.load(yaml: yaml, path: path))
    }
}
