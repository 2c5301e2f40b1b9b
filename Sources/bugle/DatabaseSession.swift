import BugleStore
import Foundation
import Logging
import PostgresNIO

/// Wiring: picks the database (URL or embedded cluster), connects, and applies migrations when asked.
enum DatabaseSession {
    /// Ends this process's `application_name` (`pid:random`): a worker that takes over this process's expired lease
    /// finds its sessions by it.
    static let sessionTag = "\(getpid()):\(UInt32.random(in: 0...UInt32.max))"

    /// The configuration from `--database-url`, `BUGLE_DATABASE_URL`, or the embedded cluster (started if needed),
    /// with this process's ``sessionTag``.
    static func configuration(_ options: GlobalOptions, logger: Logger) async throws -> DatabaseConfiguration {
        let environment = ProcessInfo.processInfo.environment
        if let url = options.databaseURL ?? environment["BUGLE_DATABASE_URL"], !url.isEmpty {
            return try DatabaseConfiguration(url: url).taggingSessions(sessionTag)
        }
        let cluster = EmbeddedCluster.defaultCluster(environment: environment)
        _ = try await cluster.start(logger: logger)
        return cluster.databaseConfiguration().taggingSessions(sessionTag)
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
