import BugleRunner
import Dispatch
import Foundation

/// Ctrl-C / SIGTERM: the first asks the run to stop claiming, drain in-flight answers and end paused (exit 3);
/// a second one exits at once (the ledger's in-flight window bounds what is ambiguous).
final class SignalTrap {
    private let sources: [any DispatchSourceSignal]

    init(control: RunControl) {
        var sources: [any DispatchSourceSignal] = []
        for signo in [SIGINT, SIGTERM] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: .global())
            let name = signo == SIGINT ? "SIGINT" : "SIGTERM"
            source.setEventHandler {
                if control.stopRequest != nil {
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
    }

    /// Restores default signal handling.
    func cancel() {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
