import ArgumentParser
import Foundation

/// The `bugle` command: push-notification campaigns from PostgreSQL to APNs and FCM.
@main
struct Bugle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bugle",
        abstract: "Send push-notification campaigns from a PostgreSQL segment to APNs and FCM.",
        discussion: """
            Exit codes: 0 completed; 1 usage or validation error (nothing written); 2 run failed or halted; \
            3 run paused (resumable with `bugle resume RUN`).

            Database: BUGLE_DATABASE_URL or --database-url selects a server; with neither, Bugle starts and uses \
            its own embedded PostgreSQL cluster under $BUGLE_HOME (default ~/.bugle). Segments are read through \
            BUGLE_SEGMENT_DATABASE_URL when set (a read-only login), else as the bugle_segment_reader role. A URL \
            without a password takes it as libpq does: PGPASSWORD, else the password file (the URL's passfile, \
            PGPASSFILE, or ~/.pgpass, mode 0600). What a URL leaves out comes from libpq's service file \
            (?service=NAME or PGSERVICE; ~/.pg_service.conf, PGSERVICEFILE, PGSYSCONFDIR) and variables (PGHOST, \
            PGPORT, PGDATABASE, PGUSER, PGSSLMODE, …): BUGLE_DATABASE_URL=postgres:// takes the whole server from them. \
            A host list (host=db1,db2 with target_session_attrs=read-write) uses the first server that will do. \
            Commands that write refuse a standby or read-only server at once.

            Providers: the providers file (--providers, or the campaign's `providers:`) names endpoints and \
            credentials. Provider connections (APNs, FCM, legacy APNs) go through the proxy in https_proxy, else \
            all_proxy (minus no_proxy) unless the file's `proxy:` says otherwise (http://, https:// with TLS to the \
            proxy itself, or SOCKS5 as socks5h://); loopback endpoints always connect directly. FCM's access tokens come from a service-account file, an \
            external_account file (workload identity federation from a token file, a URL, AWS or a program, with \
            project_id), or, on Google Cloud, the metadata \
            server (credentials: metadata_server, with project_id; GCE_METADATA_HOST).
            """,
        version: "0.1.0",
        subcommands: [
            RunCommand.self, ValidateCommand.self, ReportCommand.self, RunsCommand.self, DBCommand.self,
            ResumeCommand.self, WorkerCommand.self, PauseCommand.self, CancelCommand.self, DevicesCommand.self, DemoCommand.self,
            FeedbackCommand.self, TickCommand.self, SendTestCommand.self, PKCS12Probe.Command.self,
        ]
    )

    /// Parses and runs, mapping argument errors to exit code 1 (Bugle's "usage or validation error").
    static func main() async {
        MallocTuning.apply()
        // A file-size limit (`ulimit -f`) then fails the write with EFBIG, reported like a full disk and cleaned up,
        // instead of killing the process with SIGXFSZ and leaving a half-written temporary file.
        signal(SIGXFSZ, SIG_IGN)
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(ExitCodes.usage)
            }
            exit(withError: error)
        }
    }
}
