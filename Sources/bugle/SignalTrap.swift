import BugleRunner
import Dispatch
import Foundation
import Synchronization

/// Ctrl-C / SIGTERM for the whole command, once installed: the first asks the run being sent (``attach(_:)``) to stop
/// claiming, drain in-flight answers and end paused (exit 3); while the segment is read, or while the command waits for
/// the database, it is noted (``interrupted``) and those steps end as it asks. A second one, a second or more after the
/// first, exits at once (the ledger's in-flight window bounds what is ambiguous). One within that second is the same
/// request delivered twice — GNU `timeout` signals the command and then its whole process group, a terminal's Ctrl-C
/// reaches every process of the foreground group — and is ignored: it used to end the process at once and leave its
/// run `running` with no worker. The signals are counted here, not read from the run's stop request: a worker already
/// stopping for a lost database lease still drains on the first.
///
/// One per process, for the process's life: it used to be installed for the send only, so a signal while the segment
/// was read killed the command at once (SIGINT inherited as ignored was dropped, and the run went on to send), and a
/// trap made again later for the wait for the database never fired.
final class SignalTrap: Sendable {
    static let shared = SignalTrap()

    private struct State {
        var count = 0
        var first: ContinuousClock.Instant?
        var name = ""
        var control: RunControl?
        /// Tasks in ``wait(_:)``, resumed by the first signal.
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())
    /// Kept for the process's life; never touched after `init`.
    nonisolated(unsafe) private let sources: [any DispatchSourceSignal]

    /// How long after the first signal another one is taken as the same request.
    static let repeatWindow = Duration.seconds(1)

    /// Takes SIGINT and SIGTERM from now on: ``shared`` is made on first use (its first reader installs it).
    private init() {
        var sources: [any DispatchSourceSignal] = []
        for signo in [SIGINT, SIGTERM] {
            signal(signo, SIG_IGN)
            sources.append(DispatchSource.makeSignalSource(signal: signo, queue: .global()))
        }
        self.sources = sources
        for (source, name) in zip(sources, ["SIGINT", "SIGTERM"]) {
            source.setEventHandler { [self] in received(name) }
            source.resume()
        }
    }

    private enum Action {
        case ignore, stop(RunControl?), exit
    }

    private func received(_ name: String) {
        let now = ContinuousClock.now
        let action = state.withLock { state -> Action in
            if let first = state.first, now - first < Self.repeatWindow { return .ignore }
            state.count += 1
            if state.count > 1 { return .exit }
            state.first = now
            state.name = name
            return .stop(state.control)
        }
        var waited = false
        if case .stop = action {
            let waiters = state.withLock { state in
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            // A wait ends quietly: its caller says what stopped.
            waited = !waiters.isEmpty
            for waiter in waiters { waiter.resume() }
        }
        switch action {
        case .ignore:
            return
        case .exit:
            FileHandle.standardError.write(Data("bugle: second \(name): exiting now\n".utf8))
            exit(130)
        case .stop(let control):
            if waited && control == nil { return }
            FileHandle.standardError.write(Data("bugle: \(name): stopping — waiting for in-flight answers (again to force)\n".utf8))
            control?.requestStop(.interrupted("interrupted by \(name)"))
        }
    }

    /// Routes the first signal to `control` until ``detach()``: its run stops claiming and ends paused. A signal that
    /// came before is passed on at once.
    func attach(_ control: RunControl) {
        let earlier = state.withLock { state -> String? in
            state.control = control
            return state.count > 0 ? state.name : nil
        }
        if let earlier { control.requestStop(.interrupted("interrupted by \(earlier)")) }
    }

    func detach() {
        state.withLock { $0.control = nil }
    }

    /// Waits `duration`, or less when a signal comes (or came): a wait before anything is written ends as the
    /// operator asks, where a plain sleep left SIGINT inherited as ignored by a background job without effect.
    /// - Returns: The first signal's name when one ended the wait, else nil.
    func wait(_ duration: Duration) async -> String? {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { await self.signalled() }
            await group.next()
            group.cancelAll()
        }
        return signalName
    }

    /// Returns once a signal came, or when the task is cancelled.
    private func signalled() async {
        let id = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.count > 0 || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Whether a signal came: the operator wants the command to end, not to go on after a database outage.
    var interrupted: Bool { state.withLock { $0.count > 0 } }

    /// The first signal's name (`SIGINT`, `SIGTERM`), once one came.
    var signalName: String? { state.withLock { $0.count > 0 ? $0.name : nil } }

    /// ``interrupted``, to be asked from any task.
    var interruptedProbe: @Sendable () -> Bool {
        { [self] in interrupted }
    }
}
