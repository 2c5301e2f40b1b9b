import BugleCore

/// The runner's ``SendGate``: open while the worker's lease was renewed within half its TTL, the point where the
/// worker stops opening requests (RELIABILITY.md §3.4). A worker frozen past its lease (SIGSTOP, a suspended VM) wakes
/// with sends held for its lanes' rate, and they used to go out at once, before its heartbeat learned the lease was
/// gone; another worker had taken their recipients over.
struct LeaseGate: SendGate {
    let control: RunControl
    /// Seconds without a renewal after which nothing more is written (TTL/2).
    let limitSeconds: Double

    var isOpen: Bool { control.secondsSinceRenewal <= limitSeconds }
}
