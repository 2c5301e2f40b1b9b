import ArgumentParser

/// How a sending command's worker holds its run and how long it waits out a provider that processes nothing.
struct WorkerOptions: ParsableArguments {
    @Option(
        name: .customLong("lease-ttl"),
        parsing: .unconditional,
        help: """
            Seconds a worker's lease lives without renewal (renewed every sixth of it). A worker that cannot renew \
            for half of it stops sending; a crashed worker's recipients are taken over after it.
            """
    )
    var leaseTTL: Int = WorkerSettings.standard.leaseTTL

    @Option(
        name: .customLong("provider-outage-limit"),
        parsing: .unconditional,
        help: """
            Seconds a lane may process no request (only provider errors, or requests the provider did not take: \
            connections refused or turned away) before the run halts, paused, with exit 2 (ProviderUnavailable); \
            `bugle resume` goes on once the provider works.
            """
    )
    var providerOutageLimit: Int = WorkerSettings.standard.providerOutageLimit

    @Option(
        name: .customLong("database-outage-limit"),
        parsing: .unconditional,
        help: """
            Seconds to wait for the database after it stopped answering mid-run (a restart, a failover) before \
            giving up. When it answers again (of a host list with target_session_attrs: the server that now will \
            do, such as a promoted standby), what the worker held is recorded there and the run goes on in this \
            process. 0: stop at once and leave the run for `bugle resume`.
            """
    )
    var databaseOutageLimit: Int = WorkerSettings.standard.databaseOutageLimit

    func validate() throws {
        guard (3...3600).contains(leaseTTL) else { throw ValidationError("--lease-ttl must be within 3...3600 seconds") }
        guard (1...604_800).contains(providerOutageLimit) else {
            throw ValidationError("--provider-outage-limit must be within 1...604800 seconds (a week)")
        }
        guard (0...86_400).contains(databaseOutageLimit) else {
            throw ValidationError("--database-outage-limit must be within 0...86400 seconds (a day)")
        }
    }

    /// The parsed values.
    var settings: WorkerSettings {
        WorkerSettings(leaseTTL: leaseTTL, providerOutageLimit: providerOutageLimit, databaseOutageLimit: databaseOutageLimit)
    }
}

/// A sending worker's settings (``WorkerOptions``, or the defaults for commands without those options).
struct WorkerSettings: Sendable {
    /// Seconds the worker's lease (and the segment reader's) lives without renewal.
    var leaseTTL: Int
    /// Seconds a lane may process no request before the run halts.
    var providerOutageLimit: Int
    /// Seconds to wait for the database to answer again after it stopped mid-run, before giving up (0: at once).
    var databaseOutageLimit: Int

    static let standard = WorkerSettings(leaseTTL: 30, providerOutageLimit: 600, databaseOutageLimit: 300)
}
