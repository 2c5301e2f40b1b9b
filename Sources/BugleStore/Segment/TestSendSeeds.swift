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
    ///   - logger: For the query.
    /// - Returns: Unmatched users and tokens (both empty when every seed matches).
    /// - Throws: The database's errors.
    public func unmatched(client: PostgresClient, logger: Logger) async throws -> (users: [String], tokens: [String]) {
        guard !users.isEmpty || !tokens.isEmpty else { return ([], []) }
        let rows = try await client.answeredQuery(
            """
            SELECT s.is_user, s.seed
              FROM (SELECT true AS is_user, seed, n FROM unnest(\(users)::text[]) WITH ORDINALITY AS u(seed, n)
                    UNION ALL
                    SELECT false, seed, n FROM unnest(\(tokens)::text[]) WITH ORDINALITY AS t(seed, n)) s
             WHERE (s.is_user AND NOT EXISTS (SELECT 1 FROM bugle.devices d WHERE d.is_active AND d.user_id = s.seed))
                OR (NOT s.is_user AND NOT EXISTS (SELECT 1 FROM bugle.devices d
                                                   WHERE d.is_active AND (d.token = s.seed OR (d.platform = 'ios' AND d.token = lower(s.seed)))))
             ORDER BY s.is_user DESC, s.n
            """,
            logger: logger
        )
        var unmatched: (users: [String], tokens: [String]) = ([], [])
        for try await (isUser, seed) in rows.decode((Bool, String).self) {
            if isUser { unmatched.users.append(seed) } else { unmatched.tokens.append(seed) }
        }
        return unmatched
    }
}
