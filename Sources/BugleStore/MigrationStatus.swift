import Foundation

/// One line of ``Migrator/status()``.
public struct MigrationStatus: Sendable, Hashable, CustomStringConvertible {
    /// The migration's version.
    public var version: Int
    /// Its name (from this build, or from the database for unknown versions).
    public var name: String
    /// When it was applied, or `nil` while pending.
    public var appliedAt: Date?
    /// `false` when the database has this version but this build of Bugle does not know it (the database is newer).
    public var isKnown: Bool

    /// Whether it has been applied.
    public var isApplied: Bool { self.appliedAt != nil }

    /// `"1 initial_schema  applied 2026-…"` or `"… pending"`.
    public var description: String {
        let state = self.appliedAt.map { "applied \($0)" } ?? "pending"
        return "\(self.version) \(self.name) \(state)\(self.isKnown ? "" : " (unknown to this build)")"
    }
}
