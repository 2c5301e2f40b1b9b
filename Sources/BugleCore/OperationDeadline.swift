/// Runs an operation with a deadline, abandoning it when the deadline passes.
///
/// A PostgreSQL backend killed in the middle of a transaction can leave the client's call waiting for an answer
/// that never comes (seen with `pg_terminate_backend` on a pooled connection). A caller that cannot wait forever,
/// and whose cancellation may not reach the stuck call, leaves the attempt to finish on its own — its result is
/// ignored — and retries or moves on. The runner relies on this for every ledger operation: a claim that commits
/// late is handed back by its claim id, and a group commit that lands twice writes nothing the second time.
public enum OperationDeadline {
    /// The error an abandoned attempt ends with.
    public struct Exceeded: Error, CustomStringConvertible {
        public let seconds: Double
        public var description: String { "no answer from the database within \(seconds) s" }
    }

    /// The error an attempt given up by its caller's condition ends with.
    public struct Abandoned: Error, CustomStringConvertible {
        public var description: String { "abandoned before the database answered" }
    }

    /// Runs `operation`, throwing ``Exceeded`` if it has not finished within `timeout`, or ``Abandoned`` as soon as
    /// `abandonWhen` (asked every second while the operation runs) answers true.
    public static func run<T: Sendable>(
        within timeout: Duration,
        abandonWhen: (@Sendable () async -> Bool)? = nil,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let answer = FirstAnswer(continuation)
            let work = Task {
                do {
                    answer.resume(with: .success(try await operation()))
                } catch {
                    answer.resume(with: .failure(error))
                }
            }
            Task {
                try? await Task.sleep(for: timeout)
                let (seconds, attoseconds) = timeout.components
                if answer.resume(with: .failure(Exceeded(seconds: Double(seconds) + Double(attoseconds) / 1e18))) { work.cancel() }
            }
            if let abandonWhen {
                Task {
                    while answer.isPending {
                        try? await Task.sleep(for: .seconds(1))
                        if answer.isPending, await abandonWhen(), answer.resume(with: .failure(Abandoned())) {
                            work.cancel()
                            return
                        }
                    }
                }
            }
        }
    }
}
