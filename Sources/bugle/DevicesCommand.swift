import ArgumentParser
import BugleCore
import BugleStore
import Foundation

/// `bugle devices import|register|unregister|prune`.
struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "Manage device tokens in bugle.devices.",
        subcommands: [Import.self, Register.self, Unregister.self, Prune.self]
    )

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bulk upsert devices from a CSV file.",
            discussion: """
                The header row names the columns: user_id, token, platform (ios|android|web), and optionally locale, \
                timezone, app_version. Re-registering a token reactivates it and updates last_seen; a token that moved \
                to another user moves with it. Bad rows are reported by line and skipped; the rest are imported (exit \
                0). A quote that is never closed makes the rest of the file unreadable: what came before it is imported, \
                and the command exits 1 naming the line. A file none of whose rows can be imported, or whose header is unusable, is exit 1.
                """
        )
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The CSV file.") var file: String

        func run() async throws {
            let logger = global.makeLogger()
            let path = file
            try await ExitCodes.guarding {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                    throw UsageError("\(path): is a directory, not a CSV file")
                }
                guard FileManager.default.isReadableFile(atPath: path) else {
                    throw UsageError("\(path): cannot read the file: \(FileManager.default.fileExists(atPath: path) ? "permission denied" : "no such file")")
                }
                let report: DeviceImportReport
                do {
                    report = try await DatabaseSession.with(global, logger: logger) { client in
                        try await DeviceStore(client: client, logger: logger).importCSV(path: path)
                    }
                } catch let error as StoreError where error.code == .invalidInput {
                    // The file's own fault (an empty file, a header without user_id…): nothing was written.
                    throw UsageError("\(path): \(error.message)")
                }
                print(report.description)
                if let line = report.unreadFrom {
                    // One record swallowed the rest of the file: its rows were never read, which is not a skipped row.
                    ExitCodes.printError(
                        "\(path): the record of line \(line) opens a quote that is never closed, so nothing from line \(line) to the end was imported; "
                            + "fix it and import the file again (rows already imported are updated, not repeated)")
                    return ExitCodes.usage
                }
                guard report.rowsRead == 0 || report.skipped < report.rowsRead else {
                    ExitCodes.printError("\(path): none of its \(report.rowsRead) row(s) could be imported")
                    return ExitCodes.usage
                }
                return ExitCodes.completed
            }
        }
    }

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register (or re-register) one device token.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "The application's user id.") var user: String
        @Option(help: "The device token.") var token: String
        @Option(help: "ios, android or web.") var platform: String
        @Option(help: "Locale tag (en, pt-BR).") var locale: String?
        @Option(help: "IANA time zone (Europe/Berlin).") var timezone: String?
        @Option(name: .customLong("app-version"), help: "The app's version.") var appVersion: String?

        func validate() throws {
            guard Platform(name: platform) != nil else { throw ValidationError("--platform must be ios, android or web") }
            // The checks an import makes, before the database is touched (a bad token is a usage error, exit 1).
            let checked = DeviceRegistration.validate(
                userID: user, token: token, platform: platform, locale: locale, timezone: timezone, appVersion: appVersion)
            if case .failure(let problem) = checked {
                let option = problem.column == "user_id" ? "user" : problem.column == "app_version" ? "app-version" : problem.column
                throw ValidationError("--\(option): \(problem.reason)")
            }
        }

        func run() async throws {
            let logger = global.makeLogger()
            let (user, token, locale, timezone, appVersion) = (self.user, self.token, self.locale, self.timezone, self.appVersion)
            let platform = Platform(name: self.platform) ?? .ios
            try await ExitCodes.guarding {
                let result = try await DatabaseSession.with(global, logger: logger) { client in
                    try await DeviceStore(client: client, logger: logger).register(
                        userID: user, token: token, platform: platform, locale: locale, timezone: timezone, appVersion: appVersion
                    )
                }
                print(
                    result.inserted
                        ? "registered device \(result.deviceID) for user \(user)"
                        : "registered device \(result.deviceID) again for user \(user): active, last seen now")
                return ExitCodes.completed
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Sign-out: mark a token inactive (the row is kept).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "The device token.") var token: String
        @Option(help: "ios, android or web.") var platform: String

        func validate() throws {
            guard Platform(name: platform) != nil else { throw ValidationError("--platform must be ios, android or web") }
        }

        func run() async throws {
            let logger = global.makeLogger()
            let token = self.token
            let platform = Platform(name: self.platform) ?? .ios
            try await ExitCodes.guarding {
                let count = try await DatabaseSession.with(global, logger: logger) { client in
                    try await DeviceStore(client: client, logger: logger).unregister(token: token, platform: platform)
                }
                print(count == 0 ? "no active device with that token" : "unregistered \(count) device(s)")
                return ExitCodes.completed
            }
        }
    }

    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deactivate devices that have not re-registered for a while.")
        @OptionGroup var global: GlobalOptions
        @Option(name: .customLong("not-seen-for"), parsing: .unconditional, help: "Age like 90d, 2w, 12h, 30m, 45s or bare seconds (1s to 36500d).") var notSeenFor: String
        @Flag(name: .customLong("dry-run"), help: "Only count.") var dryRun = false

        /// The longest age accepted, 100 years: PostgreSQL's timestamps go out of range not far beyond it.
        static let longestAge = 36_500 * 86_400

        func validate() throws {
            guard let seconds = DurationText.seconds(notSeenFor) else { throw ValidationError("--not-seen-for: expected a duration like 90d, 12h or 3600") }
            guard (1...Self.longestAge).contains(seconds) else {
                throw ValidationError("--not-seen-for must be from 1s to 36500d (100 years), not \(notSeenFor)")
            }
        }

        func run() async throws {
            let logger = global.makeLogger()
            let seconds = DurationText.seconds(notSeenFor) ?? 0
            let dryRun = self.dryRun
            try await ExitCodes.guarding {
                let count = try await DatabaseSession.with(global, logger: logger) { client in
                    try await DeviceStore(client: client, logger: logger).prune(notSeenFor: seconds, dryRun: dryRun)
                }
                print(dryRun ? "\(count) device(s) would be deactivated" : "deactivated \(count) device(s)")
                return ExitCodes.completed
            }
        }
    }
}

/// `90d`, `12h`, `30m`, `45s`, `3600` → seconds (`Int.max` for an age too long to count in seconds).
enum DurationText {
    static func seconds(_ text: String) -> Int? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800]
        if let last = trimmed.last, let unit = units[last], let value = Int(trimmed.dropLast()), value >= 0 {
            let (seconds, overflow) = value.multipliedReportingOverflow(by: unit)
            return overflow ? Int.max : seconds
        }
        if let value = Int(trimmed), value >= 0 { return value }
        return nil
    }
}
