import BugleRunner
import Dispatch
import Foundation
import Synchronization

/// Ctrl-C / SIGTERM: the first asks the run to stop claiming, drain in-flight answers and end paused (exit 3);
/// a second one, a second or more after the first, exits at once (the ledger's in-flight window bounds what is
/// ambiguous). One within that second is the same request delivered twice — GNU `timeout` signals the command and then
/// its whole process group, a terminal's Ctrl-C reaches every process of the foreground group — and is ignored: it
/// used to end the process at once and leave its run `running` with no worker. The signals are counted here,
/// not read from the run's stop request: a worker already stopping for a lost database lease still drains on the first.
final class SignalTrap {
    private let sources: [any DispatchSourceSignal]
    private let received: Counter

    /// Signals received so far, and when the first came, shared with the handlers.
    private final class Counter: Sendable {
        let value = Mutex(0)
        let first = Mutex<ContinuousClock.Instant?>(nil)
    }

    /// How long after the first signal another one is taken as the same request.
    static let repeatWindow = Duration.seconds(1)

    /// Whether a signal came: the operator wants the command to end, not to go on after a database outage.
    var interrupted: Bool { received.value.withLock { $0 > 0 } }

    /// ``interrupted``, to be asked from any task.
    var interruptedProbe: @Sendable () -> Bool {
        { [received] in received.value.withLock { $0 > 0 } }
    }

    init(control: RunControl) {
        var sources: [any DispatchSourceSignal] = []
        let received = Counter()
        for signo in [SIGINT, SIGTERM] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: .global())
            let name = signo == SIGINT ? "SIGINT" : "SIGTERM"
            source.setEventHandler {
                let now = ContinuousClock.now
                if let first = received.first.withLock({ $0 }), now - first < Self.repeatWindow { return }
                if received.value.withLock({ count in
                    count += 1
                    return count > 1
                }) {
                    FileHandle.standardError.write(Data("bugle: second \(name): exiting now\n".utf8))
                    exit(130)
                }
                received.first.withLock { $0 = now }
                FileHandle.standardError.write(Data("bugle: \(name): stopping — waiting for in-flight answers (again to force)\n".utf8))
                control.requestStop(.interrupted("interrupted by \(name)"))
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
        self.received = received
    }

    /// Restores default signal handling.
    func cancel() {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
