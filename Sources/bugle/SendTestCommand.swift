import ArgumentParser
import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging

/// `bugle send-test FILE --user ID | --token T`: renders and sends a campaign to a seed list only.
struct SendTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send-test",
        abstract: "Send a campaign to seed users or tokens only, marked as a test (no dedupe, no frequency cap).",
        discussion: """
            Each seed user's active devices (--user, repeatable) and each active device with a seed token (--token, \
            repeatable) get the campaign's notification exactly as the real run would render it: the same locale \
            fallback, A/B variant and template values (taken from the campaign's segment row of that device; a device \
            outside the segment gets the defaults of message.variables, or empty text; so does a NULL value, even under \
            message.on_null: skip, where the real run would skip that recipient: a note says so). The run is recorded with kind \
            `test`: it does not count towards dedupe, frequency caps or copy rotation, and it ignores send_at, \
            local-time delivery and quiet hours. A CSV report and the summary are written as for any run.

            Every seed must match an active device: one that does not (a typo, a signed-out user) is named and \
            nothing is sent to any seed, and no run is recorded.

            Exit codes: 0 sent; 1 usage error (no seed given, or a seed that matches no active device); 2 failed or halted.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var output: RunOutputOptions

    @Argument(help: "The campaign YAML file.")
    var file: String

    @Option(name: .customLong("user"), help: "A seed user id (repeatable).")
    var users: [String] = []

    @Option(name: .customLong("token"), help: "A seed device token (repeatable).")
    var tokens: [String] = []

    @Option(help: "Providers file (overrides the campaign's `providers:`).")
    var providers: String?

    @Option(help: "Where to write the CSV report, - for standard output (default: ./bugle-run-<id>.csv).")
    var csv: String?

    @Flag(name: .customLong("allow-readable-keys"), help: "Start even if a key file is readable by group or others.")
    var allowReadableKeys = false

    func validate() throws {
        if users.isEmpty && tokens.isEmpty { throw ValidationError("give at least one --user or --token") }
        if users.count + tokens.count > 1000 { throw ValidationError("at most 1000 seeds per test send") }
        try CSVOption.validate(csv, json: output.json)
    }

    func run() async throws {
        let logger = global.makeLogger()
        let (users, tokens, output) = (users, tokens, output)
        try await ExitCodes.guarding {
            let csv = try CSVOption.destination(self.csv, json: output.json)
            if csv == nil { try CSVOption.requireDefaultReportDirectory() }
            let (yaml, campaign) = try CampaignFile.read(file)
            let (_, settings) = try ProvidersFile.load(
                override: providers, campaign: campaign, missing: "\(file): no providers file: set `providers:` in the campaign or pass --providers")
            if campaign.message.nullPolicy == .skip, !campaign.templateVariables.isEmpty {
                Console(jsonOnStdout: output.json).say(
                    "note: \(file): message.on_null is skip: the real run skips a recipient whose template variable is NULL; this test "
                        + "renders a NULL value as message.variables' default or empty text")
            }
            var test = campaign
            test.segment.sql = try TestSendSegment.sql(for: campaign, users: users, tokens: tokens)
            test.dedupe = .none
            test.message.nullPolicy = .empty
            test.delivery.sendAt = nil
            test.delivery.notAfter = nil
            test.delivery.localTime = LocalTimeDelivery()
            test.delivery.frequencyCap = nil
            output.prepareMetrics()
            let lanes = try ProviderLanes.make(settings: settings, campaign: campaign, allowReadableKeys: allowReadableKeys, logger: logger)
            let code: Int32
            do {
                let global = self.global
                code = try await DatabaseSession.with(global, logger: logger) { client in
                    let unmatched = try await TestSendSeeds(users: users, tokens: tokens).unmatched(client: client, logger: logger)
                    if !unmatched.users.isEmpty || !unmatched.tokens.isEmpty {
                        throw UsageError(
                            "no active device matches the seed(s) \(Self.describe(users: unmatched.users, tokens: unmatched.tokens)); nothing was sent")
                    }
                    let segments = try await DatabaseSession.segmentAccess(global, client: client, logger: logger)
                    try await SegmentColumnsCheck.verify(campaign, segments: segments, logger: logger)
                    return try await RunExecution.start(
                        campaign: test, yaml: yaml, client: client, segments: segments, lanes: lanes, csv: csv, output: output, worker: .standard,
                        isTest: true, requireRecipients: "no active device matches the seeds (\(Self.describe(users: users, tokens: tokens)))",
                        logger: logger)
                }
            } catch {
                await lanes.shutdown()
                throw error
            }
            await lanes.shutdown()
            return code
        }
    }

    static func describe(users: [String], tokens: [String]) -> String {
        let userPart = users.isEmpty ? [] : ["users " + users.joined(separator: ", ")]
        let tokenPart = tokens.isEmpty ? [] : ["\(tokens.count) token(s) " + tokens.map(TokenFingerprint.of).joined(separator: ", ")]
        return (userPart + tokenPart).joined(separator: "; ")
    }
}
