import Logging
import PostgresNIO

extension PostgresConnection {
    /// Runs `body` in one `REPEATABLE READ READ ONLY` transaction, so everything it reads is one snapshot, and commits.
    /// When `body` or the commit fails, the transaction is rolled back, or the connection closed if even that fails:
    /// a connection left inside this transaction must not go back to the pool.
    func inReadOnlySnapshot<Result>(
        logger: Logger,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await answeredQuery("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
        do {
            let result = try await body(self)
            try await answeredQuery("COMMIT", logger: logger)
            return result
        } catch {
            do { try await rollBack(after: error, logger: logger) } catch { try? await close() }
            throw error
        }
    }
}
