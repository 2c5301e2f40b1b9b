import Foundation
import Testing

/// microsocks (Debian package `microsocks`), a SOCKS5 server Bugle's SOCKS client was not written against, on
/// 127.0.0.1 with a user name and password (RFC 1929). It logs one line per tunnel it opened
/// (`client[N] 127.0.0.1: connected to host:port`).
///
/// `.ci/run` installs it and sets `BUGLE_REQUIRE_MICROSOCKS=1`, which turns a missing server into a failure; elsewhere a
/// suite that needs it is skipped and says why.
struct Microsocks {
    static let executable = ExternalServer.locate("microsocks", also: ["/usr/bin/microsocks"])
    static var enabled: Bool { ExternalServer.enabled(executable, requirement: "BUGLE_REQUIRE_MICROSOCKS") }
    static let reason: Comment = "microsocks is not installed (apt-get install -y microsocks); .ci/run installs it"

    /// The port it listens on.
    let port: Int
    private let server: ExternalServer

    /// The tunnels it opened to `target` (`host:port`).
    func tunnels(to target: String) -> Int {
        server.output().split(separator: "\n").filter { $0.hasSuffix("connected to \(target)") }.count
    }

    /// What it logged.
    func log() -> String { server.output() }

    /// Starts microsocks wanting `user`:`password`, runs `body`, and stops it however `body` ends.
    static func with<T>(user: String, password: String, _ body: (Microsocks) async throws -> T) async throws -> T {
        try await ExternalServer.using(try await start(user: user, password: password), stop: { $0.server.stop() }, body)
    }

    private static func start(user: String, password: String) async throws -> Microsocks {
        guard let executable else {
            throw ExternalServer.Failure(description: "microsocks is required (BUGLE_REQUIRE_MICROSOCKS=1) but not installed")
        }
        let directory = NSTemporaryDirectory() + "bugle-microsocks-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let port = try freeLoopbackPort()
        let server = try await ExternalServer.start(
            executable, ["-i", "127.0.0.1", "-p", String(port), "-u", user, "-P", password], port: port, directory: directory,
            log: "microsocks.log", what: "microsocks")
        return Microsocks(port: port, server: server)
    }
}
