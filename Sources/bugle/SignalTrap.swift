import BugleRunner
import Dispatch
import Foundation
import Synchronization

/// Ctrl-C / SIGTERM: the first asks the run to stop claiming, drain in-flight answers and end paused (exit 3);
/// a second one exits at once (the ledger's in-flight window bounds what is ambiguous). The signals are counted here,
/// not read from the run's stop request: a worker already stopping for a lost database lease still drains on the first.
final class SignalTrap {
    private let sources: [any DispatchSourceSignal]
    private let received: Counter

    /// Signals received so far, shared with the handlers.
    private final class Counter: Sendable {
        let value = Mutex(0)
    }

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
                if received.value.withLock({ count in
                    count += 1
                    return count > 1
                }) {
                    FileHandle.standardError.write(Data("bugle: second \(name): exiting now\n".utf8))
                    exit(130)
                }
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
