import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a FIFO to the end of its data on a thread of its own (never on one of the few threads of Swift's
/// cooperative pool), for tests of what writes to it.
///
/// The read end opens at once, without waiting for a writer, and close-on-exec, so that no child process another
/// test starts meanwhile inherits it. Reading must start (``start()``) only once a writer holds the FIFO open: before
/// that, a read sees the end of the data at once.
final class FIFOReader: Sendable {
    private let descriptor: Int32
    private let received = NIOLockedValueBox([UInt8]())
    private let done = DispatchSemaphore(value: 0)

    /// Opens the read end of the FIFO at `path`.
    /// - Throws: `POSIXError` when it cannot be opened.
    init(path: String) throws {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // Reads block from here on: until data comes, or every writer has closed its end.
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        self.descriptor = descriptor
    }

    /// Starts reading, until every writer has closed the FIFO.
    func start() {
        let (descriptor, received, done) = (self.descriptor, self.received, self.done)
        Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                received.withLockedValue { $0 += buffer[..<count] }
            }
            close(descriptor)
            done.signal()
        }.start()
    }

    /// Waits for the end of the data (on a dispatch thread) and returns every byte read.
    func bytes() async -> [UInt8] {
        let done = self.done
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                done.wait()
                continuation.resume()
            }
        }
        return received.withLockedValue { $0 }
    }
}
