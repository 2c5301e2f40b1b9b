import Synchronization

/// Where the send loop's child tasks leave what they learned, for the loop to take in batches.
///
/// A task group that returns each child's result wakes its owner once per child and detaches each child under
/// the group's lock; at thousands of sends a second that was a task switch of the send loop per answer. Here a
/// child posts its event and ends, and the loop, once woken, takes every event posted meanwhile in one call.
final class EventMailbox<Event: Sendable>: Sendable {
    private struct State {
        var events: [Event] = []
        var waiter: CheckedContinuation<[Event], Never>?
    }

    private let state = Mutex(State())

    /// Leaves an event; wakes the loop if it is waiting.
    func post(_ event: Event) {
        let woken = state.withLock { state -> (CheckedContinuation<[Event], Never>, [Event])? in
            guard let waiter = state.waiter else {
                state.events.append(event)
                return nil
            }
            state.waiter = nil
            return (waiter, [event])
        }
        if let (waiter, events) = woken { waiter.resume(returning: events) }
    }

    /// Every event posted since the last call, in the order posted; waits for one when there are none.
    ///
    /// One caller at a time (the send loop). Not woken by cancellation: the loop waits only while it has work
    /// under way, and every child it started posts exactly once.
    func next() async -> [Event] {
        let ready = state.withLock { state -> [Event]? in
            state.events.isEmpty ? nil : Self.take(&state.events)
        }
        if let ready { return ready }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Event]? in
                guard !state.events.isEmpty else {
                    state.waiter = continuation
                    return nil
                }
                return Self.take(&state.events)
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private static func take(_ events: inout [Event]) -> [Event] {
        var taken: [Event] = []
        swap(&taken, &events)
        return taken
    }
}
