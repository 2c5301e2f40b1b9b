import PostgresNIO

/// One versioned schema change: a list of statements applied in a single transaction.
///
/// Statements are separate `PostgresQuery` values because the extended protocol runs one statement per query.
public struct Migration: Sendable, Hashable {
    /// The version, unique and increasing.
    public let version: Int
    /// A short snake_case name, stored in `bugle.schema_migrations`.
    public let name: String
    /// The statements, run in order inside one transaction.
    public let statements: [PostgresQuery]

    /// Creates a migration.
    /// - Parameters:
    ///   - version: The version, unique and increasing.
    ///   - name: A short snake_case name.
    ///   - statements: The statements, one SQL command each, from code constants.
    public init(version: Int, name: String, statements: [PostgresQuery]) {
        self.version = version
        self.name = name
        self.statements = statements
    }
}
