/// What ``EmbeddedCluster/status()`` found.
public struct EmbeddedClusterStatus: Sendable, Hashable, CustomStringConvertible {
    /// The real data directory (under `/var/lib/bugle/…` when running as root).
    public var dataDirectory: String
    /// The directory holding the server's Unix socket.
    public var socketDirectory: String
    /// The server log file.
    public var logFile: String
    /// The port that names the socket file.
    public var port: Int
    /// Whether `initdb` has run (the data directory holds `PG_VERSION`).
    public var isInitialized: Bool
    /// Whether a server is running on the data directory (`pg_ctl status`).
    public var isRunning: Bool
    /// The postmaster's process id while running.
    public var pid: Int?
    /// The major version recorded in `PG_VERSION`.
    public var majorVersion: String?
    /// The account the server runs as when Bugle itself runs as root, else `nil`.
    public var systemUser: String?

    /// A one-line summary for the CLI.
    public var description: String {
        let state: String
        if !self.isInitialized {
            state = "not initialized"
        } else if self.isRunning {
            state = "running" + (self.pid.map { " (pid \($0))" } ?? "")
        } else {
            state = "stopped"
        }
        var text = "embedded PostgreSQL \(self.majorVersion ?? "") \(state); data: \(self.dataDirectory); "
        text += "socket: \(self.socketDirectory)/.s.PGSQL.\(self.port); log: \(self.logFile)"
        if let user = self.systemUser {
            text += "; runs as: \(user)"
        }
        return text
    }
}
