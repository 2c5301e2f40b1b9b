import Foundation
import Testing

/// tinyproxy (Debian package `tinyproxy`), an HTTP proxy Bugle's `CONNECT` client was not written against, on
/// 127.0.0.1 with Basic credentials and its log at the `Connect` level (one line per tunnel asked for).
///
/// `.ci/run` installs it and sets `BUGLE_REQUIRE_TINYPROXY=1`, which turns a missing proxy into a failure; elsewhere a
/// suite that needs it is skipped and says why.
struct Tinyproxy {
    /// The tinyproxy binary: `PATH`, then the Debian location.
    static let executable = ExternalServer.locate("tinyproxy", also: ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"])

    /// Whether a suite that needs tinyproxy runs: it is installed, or its absence must fail the run.
    static var enabled: Bool { ExternalServer.enabled(executable, requirement: "BUGLE_REQUIRE_TINYPROXY") }
    static let reason: Comment = "tinyproxy is not installed (apt-get install -y tinyproxy); .ci/run installs it"

    /// The port it listens on.
    let port: Int
    private let server: ExternalServer
    private let logFile: String

    /// Its own log: a `CONNECT … Request (file descriptor N): CONNECT host:port HTTP/1.1` line per tunnel asked for.
    func log() -> String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// The tunnels it was asked for, by target (`host:port`).
    func connectRequests(to target: String) -> Int {
        log().split(separator: "\n").filter { $0.contains("Request (file descriptor") && $0.contains("CONNECT \(target) ") }.count
    }

    /// The tunnels it opened (to any target).
    func establishedTunnels() -> Int {
        log().split(separator: "\n").filter { $0.contains("Established connection to host") }.count
    }

    /// Starts tinyproxy wanting `user`:`password` (Basic), runs `body`, and stops it however `body` ends.
    static func with<T>(user: String, password: String, _ body: (Tinyproxy) async throws -> T) async throws -> T {
        try await ExternalServer.using(try await start(user: user, password: password), stop: { $0.server.stop() }, body)
    }

    private static func start(user: String, password: String) async throws -> Tinyproxy {
        guard let executable else {
            throw ExternalServer.Failure(description: "tinyproxy is required (BUGLE_REQUIRE_TINYPROXY=1) but not installed")
        }
        let directory = NSTemporaryDirectory() + "bugle-tinyproxy-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let port = try freeLoopbackPort()
        // No ConnectPort line: CONNECT to any port (the simulators' are ephemeral).
        let configuration = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            MaxClients 64
            LogFile "\(directory)/tinyproxy.log"
            LogLevel Connect
            PidFile "\(directory)/tinyproxy.pid"
            Allow 127.0.0.1
            BasicAuth \(user) \(password)

            """
        try configuration.write(toFile: directory + "/tinyproxy.conf", atomically: true, encoding: .utf8)
        let server = try await ExternalServer.start(
            executable, ["-d", "-c", directory + "/tinyproxy.conf"], port: port, directory: directory, log: "stdout.log", what: "tinyproxy")
        return Tinyproxy(port: port, server: server, logFile: directory + "/tinyproxy.log")
    }
}
