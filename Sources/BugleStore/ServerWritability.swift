import Logging
import PostgresNIO

/// Whether a server takes writes through this login: a standby in recovery does not, nor do sessions made read-only
/// (`default_transaction_read_only` on the role, the database or the server). Asked once by the migrator (commands
/// that write refuse such a server at once) and by ``DatabaseHostSelection`` (`target_session_attrs`).
struct ServerWritability {
    /// `pg_is_in_recovery()`.
    var standby: Bool
    /// `transaction_read_only` of a new transaction.
    var readOnly: Bool

    static let query: PostgresQuery = "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'"

    /// Reads it from the answer to ``query``.
    static func read<Rows: AsyncSequence>(_ rows: Rows) async throws -> ServerWritability where Rows.Element == PostgresRow {
        var writability = ServerWritability(standby: false, readOnly: false)
        for try await (standby, readOnly) in rows.decode((Bool, Bool).self) {
            writability = ServerWritability(standby: standby, readOnly: readOnly)
        }
        return writability
    }

    /// Why this login cannot write, or nil when it can.
    var reason: String? {
        if standby { return "the database server is a standby in recovery (pg_is_in_recovery() is true)" }
        if readOnly {
            return "this login's sessions are read-only (default_transaction_read_only is on for the role, the database or the server)"
        }
        return nil
    }
}
