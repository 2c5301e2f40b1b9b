import Logging
import PostgresNIO

/// The seeds of a test send (`bugle send-test`), checked against `bugle.devices` before anything is written or sent:
/// a seed that matches no active device is a mistake in the command (a typo, a signed-out user), and the test send
/// must not go out to the other seeds as if it had worked.
public struct TestSendSeeds: Sendable {
    /// Seed user ids (`--user`).
    public var users: [String]
    /// Seed device tokens (`--token`).
    public var tokens: [String]

    public init(users: [String], tokens: [String]) {
        self.users = users
        self.tokens = tokens
    }

    /// The seeds without an active device, each list in the order given.
    /// - Parameters:
    ///   - client: The database holding `bugle.devices`.
    ///   - logger: For the queries.
    /// - Returns: Unmatched users and tokens (both empty when every seed matches).
    /// - Throws: The database's errors.
    public func unmatched(client: PostgresClient, logger: Logger) async throws -> (users: [String], tokens: [String]) {
        var users: [String] = []
        if !self.users.isEmpty {
            let rows = try await client.query(
                """
                SELECT s.seed FROM unnest(\(self.users)::text[]) WITH ORDINALITY AS s(seed, n)
                 WHERE NOT EXISTS (SELECT 1 FROM bugle.devices d WHERE d.is_active AND d.user_id = s.seed)
                 ORDER BY s.n
                """,
                logger: logger
            )
            for try await (seed,) in rows.decode((String,).self) { users.append(seed) }
        }
        var tokens: [String] = []
        if !self.tokens.isEmpty {
            let rows = try await client.query(
                """
                SELECT s.seed FROM unnest(\(self.tokens)::text[]) WITH ORDINALITY AS s(seed, n)
                 WHERE NOT EXISTS (SELECT 1 FROM bugle.devices d WHERE d.is_active AND d.token = s.seed)
                 ORDER BY s.n
                """,
                logger: logger
            )
            for try await (seed,) in rows.decode((String,).self) { tokens.append(seed) }
        }
        return (users, tokens)
    }
}
