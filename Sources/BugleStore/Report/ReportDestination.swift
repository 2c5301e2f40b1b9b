/// Where a CSV report (a run's report, a dry run's preview) is written.
public enum ReportDestination: Sendable, Equatable, CustomStringConvertible {
    /// A path: a regular file is replaced atomically, through any symlinks; anything else that exists there (a
    /// FIFO, a character device) is written to directly (see ``ReportFileWriter``).
    case path(String)
    /// Standard output, moved aside to `descriptor` so that the report alone goes there (`--csv -`).
    case standardOutput(descriptor: Int32)

    /// The path, or `standard output`.
    public var description: String {
        switch self {
        case .path(let path): return path
        case .standardOutput: return "standard output"
        }
    }
}
