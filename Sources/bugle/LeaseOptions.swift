import ArgumentParser

/// The lease a sending command holds on its run.
struct LeaseOptions: ParsableArguments {
    @Option(
        name: .customLong("lease-ttl"),
        help: """
            Seconds a worker's lease lives without renewal (renewed every sixth of it). A worker that cannot renew \
            for half of it stops sending; a crashed worker's recipients are taken over after it. (default: 30)
            """
    )
    var leaseTTL: Int = 30

    func validate() throws {
        guard (3...3600).contains(leaseTTL) else { throw ValidationError("--lease-ttl must be within 3...3600 seconds") }
    }
}
