import ArgumentParser
import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging

/// `bugle validate FILE`: checks a campaign (and its providers file), and prepares its segment on the database.
struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a campaign file (and its providers file), and prepare its segment on the database.",
        discussion: """
            Errors name file:line:column and the key path. Exit 0 when valid, 1 otherwise. A providers file that is \
            named but absent is only a note (secrets often live elsewhere); one given with --providers must exist and \
            is checked, and each APNs / FCM endpoint is printed with the way Bugle will reach it: directly, or through \
            which HTTP proxy (the file's `proxy:`, else https_proxy minus no_proxy). Its credentials are loaded as \
            `bugle run` loads them (key files read and parsed, their permissions checked, certificates and passphrases \
            tried; nothing is sent), and an `ios_transport` whose section the file lacks is an error.

            The segment is prepared on the database (read-only, no row is read), so SQL the server refuses is an error \
            here, and every template variable ({{first_name}}) must be one of its columns: on the server a database URL \
            names, or on the embedded cluster when it runs or the copy uses template variables (for an untemplated \
            campaign none is created or started: a note says the segment was not checked). --offline skips that \
            check; nothing else touches the database.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Do not prepare the segment on the database (its SQL and template variables are then checked at `bugle run`).")
    var offline = false

    @Argument(help: "The campaign YAML file.")
    var file: String

    @Option(help: "Providers file to check instead of the campaign's `providers:`.")
    var providers: String?

    @Flag(name: .customLong("allow-readable-keys"), help: "Accept key files readable by group or others, as `bugle run --allow-readable-keys` does.")
    var allowReadableKeys = false

    func run() async throws {
        try await ExitCodes.guarding {
            let campaign = try CampaignLoader.load(path: file)
            try RunExecution.refuseAfterDeadline(campaign)
            let path = providers ?? campaign.providersPath
            let settings = try path.flatMap { path in
                FileManager.default.fileExists(atPath: path) ? try ProviderSettingsLoader.load(path: path) : nil
            }
            // Legacy iOS copy meets the gateway's payload_limit (the providers file's, else its default).
            let oversized = PayloadPrecheck.oversized(
                campaign, legacyPayloadLimit: settings?.legacyAPNs?.payloadLimit ?? LegacyAPNsSettings.defaultPayloadLimit)
            if !oversized.isEmpty { throw UsageError(oversized.map { "\(file): \($0)" }.joined(separator: "\n")) }
            if let path {
                if let settings {
                    for line in try ProviderRoutes.lines(settings, environment: ProcessInfo.processInfo.environment) {
                        print("\(path): \(line)")
                    }
                    try await checkCredentials(campaign, settings: settings, path: path)
                } else if providers != nil {
                    throw UsageError("providers file \(path) does not exist")
                } else {
                    ExitCodes.printError("note: \(file): providers file \(path) not found; `bugle run` will need it (or --providers)")
                }
            } else {
                // Said here rather than only when `bugle run` refuses it: routes and credentials are not checked.
                ExitCodes.printError(
                    "note: \(file): no providers file (`providers:` in the campaign or --providers); routes and credentials not checked, and `bugle run` will need one")
            }
            let templated = !campaign.templateVariables.isEmpty
            var columnsNote = ""
            if offline {
                columnsNote = templated ? "; segment.sql and template variables not checked (--offline)" : "; segment.sql not checked (--offline)"
            } else if templated || DatabaseSession.namesServer(global) ? true : await embeddedClusterRuns() {
                try await checkSegment(campaign, templated: templated, note: &columnsNote)
            } else {
                ExitCodes.printError(
                    "note: \(file): segment.sql not checked: no database named and the embedded cluster is not running (--database-url, BUGLE_DATABASE_URL or `bugle db start`)")
            }
            print("\(file): ok — campaign \(campaign.name) (\(campaign.message.locales.count) locale(s), dedupe \(campaign.dedupe.rawValue)\(campaign.variants.isEmpty ? "" : ", \(campaign.variants.count) variants")\(columnsNote))")
            return ExitCodes.completed
        }
    }
}

extension ValidateCommand {
    /// Prepares the segment on the database (read-only, no row read): SQL the server refuses passed validate whenever
    /// the copy used no template variable, and failed the run.
    private func checkSegment(_ campaign: Campaign, templated: Bool, note: inout String) async throws {
        let logger = global.makeLogger()
        try await DatabaseSession.with(global, migrate: false, logger: logger) { client in
            let segments = try await DatabaseSession.segmentAccess(global, client: client, prepare: false, logger: logger)
            try await SegmentColumnsCheck.verify(campaign, segments: segments, logger: logger)
        }
        note = templated
            ? "; segment prepared, template variables \(campaign.templateVariables.joined(separator: ", ")) are segment columns"
            : "; segment prepared"
    }

    /// Whether the embedded cluster runs (an untemplated campaign's segment is prepared on it then; none is started).
    private func embeddedClusterRuns() async -> Bool {
        let cluster = EmbeddedCluster.defaultCluster(environment: ProcessInfo.processInfo.environment)
        return (try? await cluster.status().isRunning) == true
    }

    /// Loads every lane's credentials as a run would (no connection is opened), refuses an `ios_transport` the file
    /// cannot serve, and notes platforms whose lane is missing.
    private func checkCredentials(_ campaign: Campaign, settings: ProviderSettings, path: String) async throws {
        let lanes = try ProviderLanes.make(settings: settings, campaign: campaign, allowReadableKeys: allowReadableKeys, logger: global.makeLogger())
        await lanes.shutdown()
        try ProviderLanes.checkTransport(campaign, lanes: lanes, providersPath: path)
        let loaded = ProviderKind.allCases.filter { lanes.providers[$0] != nil }.map(\.providersSection)
        if !loaded.isEmpty { print("\(path): credentials load (\(loaded.joined(separator: ", ")))") }
        for note in ProviderLanes.missingLaneNotes(campaign, lanes: lanes) { ExitCodes.printError("note: \(path): \(note)") }
    }
}

/// Reads a campaign file for a sending command: its text (stored with the run) and the validated campaign.
enum CampaignFile {
    static func read(_ path: String) throws -> (yaml: String, campaign: Campaign) {
        let yaml = try CampaignLoader.readText(path: path)
        let campaign = try CampaignLoader.load(yaml: yaml, path: path)
        // `validate` refuses such copy; a run may have no device of that platform or locale, so it is told, not stopped.
        for oversize in PayloadPrecheck.oversized(campaign) { ExitCodes.printError("warning: \(path): \(oversize)") }
        return (yaml, campaign)
    }
}
