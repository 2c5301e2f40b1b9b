import NIOCore

/// The notifications written on one gateway connection whose fate is not yet known, in write order
/// (PROTOCOLS.md §3.3). A pure state machine: time is an input, nothing here does I/O.
///
/// The legacy gateway never confirms success; it answers only the first failure on a connection and then
/// discards everything that followed. So:
/// - an entry is confirmed **delivered** once a quiet period has passed since it reached the socket
///   with no error response (``confirm(now:quietPeriod:)``);
/// - an error response for identifier *k* (``errorResponse(_:)``) settles everything at once: entries
///   before *k* were processed (delivered), *k* failed with the status, entries after *k* were discarded
///   and must be resent on a new connection; for status 10 (shutdown) *k* is the last one processed, so
///   *k* is delivered too and only what follows is resent;
/// - a close without an error response (``connectionClosed()``) leaves every unconfirmed entry ambiguous.
public struct LegacyAPNSResendBuffer<Element> {
    private struct Entry {
        var sequence: Int
        var identifier: UInt32
        var element: Element
        /// When the write reached the socket; nil while it is still queued in the channel.
        var writtenAt: NIODeadline?
    }

    /// How an error response settles the buffer.
    public struct ErrorResolution {
        /// Processed by the gateway before the failure (or up to and including *k* for a shutdown).
        public var delivered: [Element] = []
        /// The notification the status is about (nil for a shutdown, or when *k* was not in the buffer).
        public var failed: Element?
        /// Discarded by the gateway: to be written again on a new connection, in this order.
        public var resend: [Element] = []
        /// The identifier was not in the buffer: everything buffered was treated as discarded.
        public var identifierUnknown = false
    }

    private var entries: [Entry] = []
    /// Index of the first live entry (entries before it were confirmed; compacted lazily).
    private var head = 0
    private var nextSequence = 0
    /// Entries before this sequence have reached the socket.
    private var writtenThrough = 0

    /// Creates an empty buffer.
    public init() {}

    /// Unconfirmed entries.
    public var count: Int { entries.count - head }
    /// True when nothing awaits confirmation.
    public var isEmpty: Bool { count == 0 }

    /// Adds a notification that was just handed to the channel.
    /// - Parameters:
    ///   - identifier: The frame's identifier.
    ///   - element: What to resolve or resend later.
    /// - Returns: Its sequence number, to pass to ``markWritten(through:at:)``.
    @discardableResult
    public mutating func append(identifier: UInt32, element: Element) -> Int {
        let sequence = nextSequence
        nextSequence += 1
        entries.append(Entry(sequence: sequence, identifier: identifier, element: element, writtenAt: nil))
        return sequence
    }

    /// Records that every entry up to and including `sequence` reached the socket at `time` (writes
    /// complete in order, so one completion covers all before it).
    /// - Parameters:
    ///   - sequence: A sequence number returned by ``append(identifier:element:)``.
    ///   - time: When the write completed.
    public mutating func markWritten(through sequence: Int, at time: NIODeadline) {
        guard sequence >= writtenThrough else { return }
        var index = entries.count - 1
        while index >= head, entries[index].sequence > sequence { index -= 1 }
        while index >= head, entries[index].writtenAt == nil {
            entries[index].writtenAt = time
            index -= 1
        }
        writtenThrough = sequence + 1
    }

    /// Confirms as delivered every entry that reached the socket at least `quietPeriod` before `now`.
    /// - Parameters:
    ///   - now: The current time.
    ///   - quietPeriod: How long without an error response counts as success.
    /// - Returns: The confirmed entries, oldest first.
    public mutating func confirm(now: NIODeadline, quietPeriod: TimeAmount) -> [Element] {
        var confirmed: [Element] = []
        while head < entries.count, let written = entries[head].writtenAt, written + quietPeriod <= now {
            confirmed.append(entries[head].element)
            head += 1
        }
        compact()
        return confirmed
    }

    /// The oldest time at which an entry reached the socket, if any did.
    public var oldestWrite: NIODeadline? {
        head < entries.count ? entries[head].writtenAt : nil
    }

    /// Settles every entry for an error response; the buffer is empty afterwards (the connection is over).
    /// - Parameter response: The gateway's error response.
    /// - Returns: What was delivered, what failed and what must be resent.
    public mutating func errorResponse(_ response: LegacyAPNSErrorResponse) -> ErrorResolution {
        var resolution = ErrorResolution()
        let live = entries[head...]
        if let index = live.firstIndex(where: { $0.identifier == response.identifier }) {
            resolution.delivered = entries[head..<index].map(\.element)
            if response.status == .shutdown {
                resolution.delivered.append(entries[index].element)
            } else {
                resolution.failed = entries[index].element
            }
            resolution.resend = entries[(index + 1)...].map(\.element)
        } else {
            // The named notification is not unconfirmed here (already confirmed, or an identifier we never
            // wrote): the gateway stopped before everything we still hold, so all of it was discarded.
            resolution.identifierUnknown = true
            resolution.resend = live.map(\.element)
        }
        removeAll()
        return resolution
    }

    /// Empties the buffer after a close without an error response.
    /// - Returns: Every unconfirmed entry, oldest first (their fate is unknown).
    public mutating func connectionClosed() -> [Element] {
        let unconfirmed = entries[head...].map(\.element)
        removeAll()
        return unconfirmed
    }

    private mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        head = 0
        writtenThrough = nextSequence
    }

    private mutating func compact() {
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
