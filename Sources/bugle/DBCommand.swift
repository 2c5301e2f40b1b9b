import ArgumentParser
import BugleCore
import BugleStore
import Foundation

/// `bugle db status|start|stop|migrate`.
struct DBCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "Manage the embedded PostgreSQL cluster and Bugle's schema.",
        subcommands: [Status.self, Start.self, Stop.self, Migrate.self]
    )

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the embedded cluster's state (or the server a URL names, which of its settings came from libpq's service file or environment, and where its password came from) and the schema's migrations.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let logger = global.makeLogger()
            try await ExitCodes.guarding {
                let environment = ProcessInfo.processInfo.environment
                if global.databaseURL == nil, environment["BUGLE_DATABASE_URL"] == nil {
                    let status = try await EmbeddedCluster.defaultCluster(environment: environment).status()
                    print(status.description)
                    guard status.isRunning else { return ExitCodes.completed }
                } else {
                    let configuration = try await DatabaseSession.configuration(global, logger: logger)
                    print("database \(configuration)")
                    if let origins = configuration.settingOrigins { print("settings: \(origins)") }
                    if !configuration.ignoredSettings.isEmpty { print("ignored: \(configuration.ignoredSettings.joined(separator: ", "))") }
                    if let source = configuration.passwordSource { print("password: \(source.explanation)") }
                }
                let migrations = try await DatabaseSession.with(global, migrate: false, logger: logger) { client in
                    try await Migrator(client: client, logger: logger).status()
                }
                for migration in migrations { print("migration \(migration)") }
                return ExitCodes.completed
            }
        }
    }

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create (first time) and start the embedded cluster.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let logger = global.makeLogger()
            try await ExitCodes.guarding {
                let status = try await EmbeddedCluster.defaultCluster(environment: ProcessInfo.processInfo.environment).start(logger: logger)
                print(status.description)
                return ExitCodes.completed
            }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop the embedded cluster.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await ExitCodes.guarding {
                let cluster = EmbeddedCluster.defaultCluster(environment: ProcessInfo.processInfo.environment)
                try await cluster.stop()
                print(try await cluster.status().description)
                return ExitCodes.completed
            }
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Apply Bugle's schema migrations (idempotent; `run` does it too).")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let logger = global.makeLogger()
            try await ExitCodes.guarding {
                let applied = try await DatabaseSession.with(global, migrate: false, logger: logger) { client in
                    try await Migrator(client: client, logger: logger).migrate()
                }
                print(applied.isEmpty ? "schema is up to date" : "applied migration(s) \(applied.map(String.init).joined(separator: ", "))")
                return ExitCodes.completed
            }
        }
    }
}
