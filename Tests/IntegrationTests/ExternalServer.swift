import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A third-party server program a suite starts on loopback (nghttpd, PgBouncer): where its binary is, whether the
/// suite runs without it, and the process's start, readiness and stop.
///
/// `.ci/run` installs each program and sets its `BUGLE_REQUIRE_…=1`, which turns a missing program into a failure;
/// elsewhere a suite that needs it is skipped and says why.
struct ExternalServer {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The program `name`: `PATH`, then the given locations (`/usr/sbin` is not on every user's `PATH`).
    static func locate(_ name: String, also locations: [String]) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = path.split(separator: ":").map { "\($0)/\(name)" } + locations
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Whether a suite that needs the program runs: it is installed, or `requirement` says its absence must fail.
    static func enabled(_ executable: String?, requirement: String) -> Bool {
        executable != nil || ProcessInfo.processInfo.environment[requirement] == "1"
    }

    /// The running process, its log file and the directory it was given (removed by ``stop()``).
    let process: Process
    let log: String
    let directory: String

    /// What the program printed so far.
    func output() -> String {
        (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    }

    /// Starts `executable` with `arguments`, its output into `directory/log`, and waits (up to 10 s) until something
    /// accepts connections on 127.0.0.1:`port`; stops it and throws with the end of its output if it exits first.
    static func start(_ executable: String, _ arguments: [String], port: Int, directory: String, log: String, what: String) async throws -> ExternalServer {
        let logPath = directory + "/" + log
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let server = ExternalServer(process: process, log: logPath, directory: directory)
        let deadline = ContinuousClock.now + .seconds(10)
        while !Self.accepts(port: port) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                let output = server.output()
                server.stop()
                throw Failure(description: "\(what) did not start on port \(port): \(output.suffix(500))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return server
    }

    private static func accepts(port: Int) -> Bool {
        guard let fd = connectedLoopbackSocket(port: port) else { return false }
        close(fd)
        return true
    }

    /// Kills the process (SIGKILL: the child inherits the test process's signal mask, in which SIGTERM is blocked)
    /// and removes its directory.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `body` with `server`, stopping it however `body` ends.
    static func using<S, T>(_ server: S, stop: (S) -> Void, _ body: (S) async throws -> T) async throws -> T {
        do {
            let result = try await body(server)
            stop(server)
            return result
        } catch {
            stop(server)
            throw error
        }
    }
}
