import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One `bugle demo` at a time per `$BUGLE_HOME`: demos share its `sim/` directory, where each rewrote the providers
/// file and service account with its own simulators' ports while another read them (one demo sent to the other's
/// simulators, or to Google's real token endpoint from a half-rewritten file). A second demo waits for the first.
final class DemoLock {
    private let descriptor: Int32

    /// Takes the lock, waiting (and saying so through `say`) while another demo holds it.
    init(home: String, say: (String) -> Void) throws {
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = home + "/demo.lock"
        let descriptor = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw UsageError("cannot open \(path) (errno \(errno))") }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            say("demo: another `bugle demo` runs on \(home); waiting for it to finish")
            guard flock(descriptor, LOCK_EX) == 0 else {
                close(descriptor)
                throw UsageError("cannot lock \(path) (errno \(errno))")
            }
        }
        self.descriptor = descriptor
    }

    deinit {
        _ = flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
