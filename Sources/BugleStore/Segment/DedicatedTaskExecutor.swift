import Dispatch

/// Runs the jobs of tasks that prefer it on one serial dispatch queue of its own, outside Swift's cooperative pool.
///
/// For short, latency-bound work that must not wait behind long jobs: the segment reader's page producer asks
/// PostgreSQL for the next page the moment a page arrives; in the pool (one thread per core, both busy decoding and
/// handling pages) it waited its turn while PostgreSQL sat idle.
final class DedicatedTaskExecutor: TaskExecutor, Sendable {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { [self] in
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
