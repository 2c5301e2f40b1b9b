import BugleCore

/// Claimed sends held by the send loop until their lane frees a slot, instead of one waiting task each.
///
/// A lane takes a request at once only while it has a free slot, token and stream (``PushProvider/startSend(_:completion:)``).
/// A claim often holds more of a lane's recipients than the lane has slots (FCM: 100 streams per connection), and each
/// of those used to become a child task suspended in the lane's pacer. Here they wait in claim order, and every
/// answer of a send the lane started at once retries the oldest of them (the answer freed its slot).
///
/// A parked send is never stranded: when the lane refuses one and none of its started sends is still out, no answer
/// will come to retry it (the lane may be paused, out of tokens, or reconnecting), so the lane's parked sends go back to
/// the loop to wait in tasks as before (``unpark(_:start:)``).
struct ParkedSends<Send> {
    private var queues: [ProviderKind: Queue] = [:]

    private struct Queue {
        var sends: [Send] = []
        /// The first send still waiting in `sends` (sends before it were started or handed back).
        var head = 0
        /// Sends this lane started at once whose answers have not arrived.
        var started = 0

        var waiting: Int { sends.count - head }
    }

    init() {}

    /// Parked sends, over all lanes.
    var count: Int { queues.values.reduce(0) { $0 + $1.waiting } }

    /// Whether `lane` has parked sends: a new send of that lane must queue behind them, not try to start first.
    func hasWaiting(_ lane: ProviderKind) -> Bool {
        (queues[lane]?.waiting ?? 0) > 0
    }

    /// Whether `lane` has started sends whose answers will come (so a send it refused now can be parked).
    func canPark(_ lane: ProviderKind) -> Bool {
        (queues[lane]?.started ?? 0) > 0
    }

    /// A send `lane` started at once.
    mutating func started(_ lane: ProviderKind) {
        queues[lane, default: Queue()].started += 1
    }

    /// The answer of a send `lane` started at once.
    mutating func answered(_ lane: ProviderKind) {
        queues[lane, default: Queue()].started -= 1
    }

    /// Holds `send` until `lane` frees a slot. Only while ``canPark(_:)`` or ``hasWaiting(_:)``.
    mutating func park(_ send: Send, on lane: ProviderKind) {
        queues[lane, default: Queue()].sends.append(send)
    }

    /// Takes every parked send out, unsent (the run is stopping).
    mutating func withdrawAll() -> [Send] {
        var withdrawn: [Send] = []
        for lane in Array(queues.keys) {
            guard var queue = queues[lane] else { continue }
            withdrawn += queue.sends[queue.head...]
            queue.sends.removeAll()
            queue.head = 0
            queues[lane] = queue
        }
        return withdrawn
    }

    /// Starts each lane's parked sends in order while its lane takes them.
    /// - Parameter start: starts one send on its lane at once, or returns false.
    /// - Returns: sends of lanes that refused one with no started send still out, in order: the caller sends them
    ///   in tasks that wait for the lane.
    mutating func unpark(_ lanes: some Sequence<ProviderKind>, start: (Send) -> Bool) -> [Send] {
        var stranded: [Send] = []
        for lane in lanes {
            guard var queue = queues.removeValue(forKey: lane) else { continue }
            while queue.head < queue.sends.count, start(queue.sends[queue.head]) {
                queue.head += 1
                queue.started += 1
            }
            if queue.waiting > 0, queue.started == 0 {
                stranded += queue.sends[queue.head...]
                queue.head = queue.sends.count
            }
            if queue.waiting == 0 {
                queue.sends.removeAll(keepingCapacity: true)
                queue.head = 0
            } else if queue.head >= 1_024, queue.head * 2 >= queue.sends.count {
                queue.sends.removeFirst(queue.head)
                queue.head = 0
            }
            queues[lane] = queue
        }
        return stranded
    }
}
