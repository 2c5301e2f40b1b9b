import Synchronization

/// A caller waiting for the first of several answers (an operation's own, a deadline's, a watch's): the first one
/// resumes it, the later ones find it answered. For operations that may never answer and ignore cancellation.
public final class FirstAnswer<T: Sendable>: Sendable {
    private let waiting: Mutex<CheckedContinuation<T, any Error>?>

    public init(_ continuation: CheckedContinuation<T, any Error>) {
        waiting = Mutex(continuation)
    }

    /// Whether no answer has come yet.
    public var isPending: Bool { waiting.withLock { $0 != nil } }

    /// Resumes the caller with `result` unless another answer came first; returns whether this one did.
    @discardableResult
    public func resume(with result: Result<T, any Error>) -> Bool {
        let continuation = waiting.withLock { state in
            defer { state = nil }
            return state
        }
        continuation?.resume(with: result)
        return continuation != nil
    }
}
