import NIOCore

/// The deadlines of a connection's open requests, earliest first, so one timer per connection serves them all.
///
/// A scheduled task per request cost a heap insert and, when cancelled on the answer, a linear search of the event
/// loop's scheduled tasks (thousands with a large in-flight window): about 3% of Bugle's CPU in a mixed run.
/// Deadlines almost always arrive in order, so keeping them sorted is an append. Entries of answered requests are
/// dropped lazily: the caller says which streams are still open.
struct HTTP2DeadlineQueue {
    private var entries = CircularBuffer<(streamID: UInt32, deadline: NIODeadline)>()

    /// Files a request's deadline in order.
    /// - Parameters:
    ///   - streamID: The request's stream.
    ///   - deadline: When it times out.
    ///   - openCount: How many requests are open (to know when answered entries should be swept out).
    ///   - isOpen: Whether a stream still waits for its answer.
    mutating func add(_ streamID: UInt32, deadline: NIODeadline, openCount: Int, isOpen: (UInt32) -> Bool) {
        // Answered requests at the front go first, so the queue holds about one entry per open request.
        while let first = entries.first, !isOpen(first.streamID) {
            entries.removeFirst()
        }
        // A hung request at the front holds back the entries behind it: compact when most of them are answered.
        if entries.count > 2 * openCount + 1_024 {
            entries.removeAll { !isOpen($0.streamID) }
        }
        if let last = entries.last, last.deadline > deadline {
            // A retry keeps its first attempt's deadline, which can be earlier than later requests' ones.
            var index = entries.endIndex
            while index > entries.startIndex, entries[entries.index(before: index)].deadline > deadline {
                index = entries.index(before: index)
            }
            entries.insert((streamID, deadline), at: index)
        } else {
            entries.append((streamID, deadline))
        }
    }

    /// Takes out the open requests whose deadline has passed.
    /// - Parameters:
    ///   - now: The time.
    ///   - isOpen: Whether a stream still waits for its answer.
    /// - Returns: The expired streams, and the earliest deadline of the open ones left (nil: none).
    mutating func expire(now: NIODeadline, isOpen: (UInt32) -> Bool) -> (expired: [UInt32], next: NIODeadline?) {
        var expired: [UInt32] = []
        while let first = entries.first {
            if !isOpen(first.streamID) {
                entries.removeFirst()
            } else if first.deadline <= now {
                entries.removeFirst()
                expired.append(first.streamID)
            } else {
                return (expired, first.deadline)
            }
        }
        return (expired, nil)
    }

    /// Forgets every deadline.
    mutating func removeAll() {
        entries.removeAll()
    }
}
