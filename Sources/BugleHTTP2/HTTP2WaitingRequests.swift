import NIOCore

/// Requests that wait for a stream because the connection already has as many open as the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` allows. This happens when the server lowers the limit: the pool learns it
/// after the session does, and a request it leased under the old limit must not open a stream the server would
/// count as a violation (RFC 9113 §5.1.2). Nothing of a waiting request has been written, so any failure is safe
/// to retry.
struct HTTP2WaitingRequests {
    struct Request {
        var headers: HTTP2HeaderBlock
        var body: ByteBuffer
        var deadline: NIODeadline
        var completion: HTTP2ClientSession.Completion
    }

    private var requests = CircularBuffer<Request>()

    var isEmpty: Bool { requests.isEmpty }

    /// The earliest deadline among the waiting requests.
    var earliestDeadline: NIODeadline? { requests.map(\.deadline).min() }

    mutating func append(_ request: Request) {
        requests.append(request)
    }

    /// The longest-waiting request.
    mutating func popFirst() -> Request? {
        requests.popFirst()
    }

    /// Removes and returns the requests whose deadline is at or before `now`.
    mutating func removeExpired(now: NIODeadline) -> [Request] {
        guard requests.contains(where: { $0.deadline <= now }) else { return [] }
        let expired = Array(requests.filter { $0.deadline <= now })
        requests = requests.filter { $0.deadline > now }
        return expired
    }

    /// Removes and returns every waiting request.
    mutating func removeAll() -> [Request] {
        let all = Array(requests)
        requests.removeAll()
        return all
    }
}
