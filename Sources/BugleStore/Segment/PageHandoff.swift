import Synchronization

/// A bounded hand-off from one producer task to one consumer: the producer waits while `capacity` values are
/// queued, so memory stays bounded however far ahead it could run.
///
/// The producer ends the stream with ``finish(throwing:)``; the consumer gives up with ``cancel()``, after which a
/// waiting or later ``send(_:)`` throws `CancellationError` (the producer stops; nothing is cancelled under it).
final class PageHandoff<Value: Sendable>: Sendable {
    private struct State {
        var queue: [Value] = []
        /// Set when the producer is done: nil error for a normal end.
        var end: (any Error)??
        var cancelled = false
        var consumer: CheckedContinuation<Value?, any Error>?
        var producer: CheckedContinuation<Void, any Error>?
    }

    private let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Queues a value, waiting while the queue is full.
    /// - Throws: `CancellationError` once the consumer has cancelled.
    func send(_ value: Value) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let action: () -> Void = state.withLock { state in
                if state.cancelled { return { continuation.resume(throwing: CancellationError()) } }
                if let consumer = state.consumer {
                    state.consumer = nil
                    return {
                        consumer.resume(returning: value)
                        continuation.resume()
                    }
                }
                state.queue.append(value)
                if state.queue.count < capacity { return { continuation.resume() } }
                state.producer = continuation
                return {}
            }
            action()
        }
    }

    /// Ends the stream after the queued values; `error` is thrown to the consumer after them.
    func finish(throwing error: (any Error)? = nil) {
        let consumer: CheckedContinuation<Value?, any Error>? = state.withLock { state in
            state.end = .some(error)
            guard state.queue.isEmpty, let consumer = state.consumer else { return nil }
            state.consumer = nil
            return consumer
        }
        guard let consumer else { return }
        if let error { consumer.resume(throwing: error) } else { consumer.resume(returning: nil) }
    }

    /// The next value; nil after the last.
    /// - Throws: the producer's error, after every value queued before it.
    func next() async throws -> Value? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value?, any Error>) in
            let action: () -> Void = state.withLock { state in
                if !state.queue.isEmpty {
                    let value = state.queue.removeFirst()
                    let producer = state.producer
                    state.producer = nil
                    return {
                        continuation.resume(returning: value)
                        producer?.resume()
                    }
                }
                if let end = state.end {
                    return {
                        if let error = end { continuation.resume(throwing: error) } else { continuation.resume(returning: nil) }
                    }
                }
                state.consumer = continuation
                return {}
            }
            action()
        }
    }

    /// The consumer stops taking values: the producer's waiting or next ``send(_:)`` throws.
    func cancel() {
        let producer: CheckedContinuation<Void, any Error>? = state.withLock { state in
            state.cancelled = true
            state.queue = []
            let producer = state.producer
            state.producer = nil
            return producer
        }
        producer?.resume(throwing: CancellationError())
    }
}
