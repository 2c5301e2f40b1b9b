import ArgumentParser
import BugleCore
import BugleStore
import Foundation
import Logging
import PostgresNIO

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
                // The server a URL names, chosen once: choosing among a host list logs those passed over.
                var chosen: DatabaseConfiguration?
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
                    chosen = configuration
                }
                let migrations = try await DatabaseSession.with(global, migrate: false, chosen: chosen, logger: logger) { client in
                    try await Migrator(client: client, logger: logger).status()
                }
                for migration in migrations { print("migration \(migration)") }
                return ExitCodes.completed
            }
        }
    }

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create (first time) and start the embedded cluster.", discussion: DBCommand.embeddedOnly)
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            try DBCommand.refuseURL(global, verb: "start")
        }

        func run() async throws {
            let logger = global.makeLogger()
            try await ExitCodes.guarding {
                DBCommand.noteDatabaseVariable()
                let status = try await EmbeddedCluster.defaultCluster(environment: ProcessInfo.processInfo.environment).start(logger: logger)
                print(status.description)
                return ExitCodes.completed
            }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop the embedded cluster.", discussion: DBCommand.embeddedOnly)
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            try DBCommand.refuseURL(global, verb: "stop")
        }

        func run() async throws {
            try await ExitCodes.guarding {
                DBCommand.noteDatabaseVariable()
                let cluster = EmbeddedCluster.defaultCluster(environment: ProcessInfo.processInfo.environment)
                if try await cluster.status().isRunning, let sending = try? await DBCommand.runsBeingSent(cluster, logger: global.makeLogger()), !sending.isEmpty {
                    // A run rides through a database restart, and on the embedded cluster that means starting it again.
                    let runs = sending.map { "run \($0)" }.joined(separator: ", ")
                    ExitCodes.printError(
                        "note: \(runs) \(sending.count == 1 ? "is" : "are") being sent: \(sending.count == 1 ? "its worker" : "their workers") "
                            + "will start the cluster again when they reconnect; `bugle pause` \(sending.count == 1 ? "it" : "them") first to keep it stopped")
                }
                try await cluster.stop()
                print(try await cluster.status().description)
                return ExitCodes.completed
            }
        }
    }

    /// The runs with a live worker lease on the embedded cluster (an error when its schema is not there yet).
    static func runsBeingSent(_ cluster: EmbeddedCluster, logger: Logger) async throws -> [Int64] {
        try await Database.withClient(cluster.databaseConfiguration(), logger: logger) { client in
            let rows = try await client.answeredQuery(
                """
                SELECT DISTINCT w.run_id FROM bugle.run_workers w WHERE w.expires_at > now() ORDER BY w.run_id
                """, logger: logger)
            var runs: [Int64] = []
            for try await (run,) in rows.decode((Int64,).self) { runs.append(run) }
            return runs
        }
    }

    /// What `db start` and `db stop` say about the server they act on.
    static let embeddedOnly = """
        Acts on the embedded cluster under $BUGLE_HOME only, never on a server a URL names: --database-url is \
        refused (exit 1), and with BUGLE_DATABASE_URL set the embedded cluster is still the one acted on, with a \
        note on stderr that the other commands use the server the variable names.
        """

    /// `db start` and `db stop` with `--database-url`: a usage error, since they cannot act on that server.
    static func refuseURL(_ global: GlobalOptions, verb: String) throws {
        guard global.databaseURL != nil else { return }
        throw ValidationError(
            "bugle db \(verb) manages the embedded cluster only and cannot \(verb) the server --database-url names; "
                + "drop --database-url to \(verb) the embedded cluster")
    }

    /// With `BUGLE_DATABASE_URL` set, says on stderr that the embedded cluster is not the server other commands use.
    static func noteDatabaseVariable() {
        guard let url = ProcessInfo.processInfo.environment["BUGLE_DATABASE_URL"], !url.isEmpty else { return }
        ExitCodes.printError(
            "note: BUGLE_DATABASE_URL is set, so other bugle commands use the server it names, not this embedded cluster")
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
