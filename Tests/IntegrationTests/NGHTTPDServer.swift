import BugleSimulator
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// nghttpd, nghttp2's HTTP/2 server (Debian package `nghttp2-server`), on 127.0.0.1 over TLS with ALPN `h2` and a
/// certificate from a fresh simulator CA: an HTTP/2 implementation Bugle's client was not written against.
///
/// `.ci/run` installs it and sets `BUGLE_REQUIRE_NGHTTPD=1`, which turns a missing server into a failure; elsewhere a
/// suite that needs it is skipped and says why.
struct NGHTTPDServer {
    /// The nghttpd binary: `PATH`, then the Debian location (`/usr/sbin` is not on every user's `PATH`).
    static let executable: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = path.split(separator: ":").map { "\($0)/nghttpd" } + ["/usr/sbin/nghttpd", "/usr/local/sbin/nghttpd"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Whether a suite that needs nghttpd runs: it is installed, or its absence must fail the run.
    static var enabled: Bool {
        executable != nil || ProcessInfo.processInfo.environment["BUGLE_REQUIRE_NGHTTPD"] == "1"
    }
    static let reason: Comment = "nghttpd is not installed (apt-get install -y nghttp2-server); .ci/run installs it"

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The TCP port it listens on.
    let port: Int
    /// The CA that signed its certificate (`caFile`).
    let material: SimulatorCertificates
    /// Its document root (empty unless a test writes files there).
    let htdocs: String
    private let directory: String
    private let process: Process

    /// What nghttpd printed so far (with `--verbose`: every frame and every header field it decoded).
    func output() -> String {
        (try? String(contentsOfFile: directory + "/nghttpd.log", encoding: .utf8)) ?? ""
    }

    /// Starts nghttpd with `options` (its own flags, before the port), runs `body`, and stops it however `body` ends.
    static func with<T>(_ options: [String], _ body: (NGHTTPDServer) async throws -> T) async throws -> T {
        let server = try await start(options)
        do {
            let result = try await body(server)
            server.stop()
            return result
        } catch {
            server.stop()
            throw error
        }
    }

    private static func start(_ options: [String]) async throws -> NGHTTPDServer {
        guard let executable else { throw Failure(description: "nghttpd is required (BUGLE_REQUIRE_NGHTTPD=1) but not installed") }
        let directory = NSTemporaryDirectory() + "bugle-nghttpd-" + UUID().uuidString
        let htdocs = directory + "/htdocs"
        try FileManager.default.createDirectory(atPath: htdocs, withIntermediateDirectories: true)
        let material = try SimulatorCertificates.generate(in: directory + "/certs", port: 0)
        let port = try freeLoopbackPort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--address=127.0.0.1", "--htdocs=\(htdocs)"] + options
            + [String(port), material.directory + "/server.key", material.directory + "/server.pem"]
        let log = directory + "/nghttpd.log"
        FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let server = NGHTTPDServer(port: port, material: material, htdocs: htdocs, directory: directory, process: process)
        // Ready once it accepts a connection (or failed once it exited).
        let deadline = ContinuousClock.now + .seconds(10)
        while !Self.accepts(port: port) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                server.stop()
                let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw Failure(description: "nghttpd \(options.joined(separator: " ")) did not start on port \(port): \(output.suffix(500))")
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

    private func stop() {
        if process.isRunning {
            // SIGKILL: the child inherits the test process's signal mask, in which SIGTERM is blocked.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}
