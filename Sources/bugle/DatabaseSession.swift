import BugleStore
import Foundation
import Logging
import PostgresNIO

/// Wiring: picks the database (URL or embedded cluster), connects, and applies migrations when asked.
enum DatabaseSession {
    /// The configuration from `--database-url`, `BUGLE_DATABASE_URL`, or the embedded cluster (started if needed).
    static func configuration(_ options: GlobalOptions, logger: Logger) async throws -> DatabaseConfiguration {
        let environment = ProcessInfo.processInfo.environment
        if let url = options.databaseURL ?? environment["BUGLE_DATABASE_URL"], !url.isEmpty {
            return try DatabaseConfiguration(url: url)
        }
        let cluster = EmbeddedCluster.defaultCluster(environment: environment)
        _ = try await cluster.start(logger: logger)
        return cluster.databaseConfiguration()
    }

    /// Connects, optionally migrates, and runs `body` with a client.
    static func with<R: Sendable>(
        _ options: GlobalOptions,
        migrate: Bool = true,
        logger: Logger,
        _ body: (PostgresClient) async throws -> R
    ) async throws -> R {
        let configuration = try await configuration(options, logger: logger)
        return try await Database.withClient(configuration, logger: logger) { client in
            if migrate { _ = try await Migrator(client: client, logger: logger).migrate() }
            return try await body(client)
        }
    }
}
