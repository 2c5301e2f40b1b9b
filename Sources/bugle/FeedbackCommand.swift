import ArgumentParser
import BugleCore
import BugleLegacyAPNs
import BugleStore
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// `bugle feedback --providers FILE`: read the legacy APNs feedback service and deactivate what it reports.
struct FeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feedback",
        abstract: "Poll the legacy APNs feedback service and deactivate the iOS tokens it reports.",
        discussion: """
            Connects to the legacy_apns: section's feedback_port with the client certificate, reads every \
            (time, token) tuple, and deactivates each active iOS device with that token unless it registered again \
            after the tuple's time (reason 'feedback'). The service empties its list once read, so the database is \
            opened before the service is read. A run whose campaign says `ios_transport: legacy` does this at its end.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Providers file with a legacy_apns: section.")
    var providers: String

    @Flag(name: .customLong("allow-readable-keys"), help: "Start even if the client key is readable by group or others.")
    var allowReadableKeys = false

    /// What one poll did.
    struct Summary: Sendable, CustomStringConvertible {
        var tuples: Int
        var result: DeviceStore.UninstalledResult
        /// How the stream ended badly after the complete tuples that were applied (nil: it ended cleanly).
        var problem: LegacyAPNSFeedbackError? = nil

        var description: String {
            "feedback: \(tuples) tuple(s); \(result.deactivated) device(s) deactivated, "
                + "\(result.keptReregistered) kept (registered again later), \(result.notActive) unknown or already inactive"
        }

        /// The stream's bad ending, saying that the complete tuples before it were applied (nil: it ended cleanly).
        var problemNote: String? {
            problem.map { "\($0); the \(tuples) complete tuple(s) received before it were applied" }
        }
    }

    func run() async throws {
        let logger = global.makeLogger()
        let path = providers
        let allowReadable = allowReadableKeys
        try await ExitCodes.guarding {
            let settings = try ProviderSettingsLoader.load(path: path)
            guard let legacy = settings.legacyAPNs else {
                throw UsageError("\(path): no legacy_apns: section, so there is no feedback service to read")
            }
            // Reading the list empties it: a section switched off is not read behind its owner's back.
            guard legacy.enabled else {
                throw UsageError("\(path): legacy_apns is switched off (enabled: false), so its feedback service is not read; set enabled: true to read it")
            }
            let lane: LegacyAPNSProvider
            do {
                lane = try LegacyAPNSProvider(
                    settings: legacy,
                    options: LegacyAPNSProvider.Options(allowReadableKeys: allowReadable),
                    logger: logger
                )
            } catch {
                throw UsageError(settings.locating("\(error)", section: "legacy_apns"))
            }
            let summary = try await DatabaseSession.with(global, logger: logger) { client in
                try await Self.poll(lane, client: client, logger: logger)
            }
            await lane.shutdown()
            print(summary.description)
            if let note = summary.problemNote {
                ExitCodes.printError(note)
                return ExitCodes.failed
            }
            return ExitCodes.completed
        }
    }

    /// Reads the feedback service once and applies it to `bugle.devices`. The service empties its list once read, so
    /// the complete tuples received before a stream that ends badly (cut inside a tuple, stalled, failed) are applied
    /// all the same, and the summary carries the problem.
    /// - Parameters:
    ///   - lane: The legacy lane (its TLS identity and feedback address).
    ///   - client: A connected client on a migrated database.
    ///   - logger: Logger.
    ///   - timeout: Longest time for connecting and reading.
    /// - Returns: What was read and done.
    /// - Throws: ``LegacyAPNSFeedbackError`` when not one complete tuple was received before the problem, or
    ///   ``StoreError``.
    static func poll(_ lane: LegacyAPNSProvider, client: PostgresClient, logger: Logger, timeout: TimeAmount = .seconds(30)) async throws -> Summary {
        let read = try await lane.readFeedback(timeout: timeout)
        if let problem = read.problem, read.tuples.isEmpty { throw problem }
        let tuples = read.tuples
        let uninstalled = tuples.map {
            DeviceStore.Uninstalled(token: $0.tokenHex, since: Date(timeIntervalSince1970: $0.since.secondsSince1970))
        }
        let result = try await DeviceStore(client: client, logger: logger).deactivate(uninstalled: uninstalled, platform: .ios, reason: "feedback")
        return Summary(tuples: tuples.count, result: result, problem: read.problem)
    }
}
