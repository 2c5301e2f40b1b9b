import ArgumentParser
import Logging

/// Options every command that touches the database shares.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "PostgreSQL URL (postgres://user@host:port/db?sslmode=require). Defaults to $BUGLE_DATABASE_URL, else the embedded cluster (`bugle db start`/`stop` refuse it: they manage the embedded cluster only). What the URL leaves out comes from libpq's service file (?service=name or PGSERVICE) and its variables (PGHOST, PGPORT, PGDATABASE, PGUSER, PGSSLMODE, …), so postgres:// alone takes the server from the environment. Prefer the variable or a password file (~/.pgpass) to a password here: the command line is visible to other users.",
            valueName: "url"
        )
    )
    var databaseURL: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .warning

    /// A logger writing to stderr at the chosen level.
    func makeLogger(label: String = "bugle") -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = logLevel
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
