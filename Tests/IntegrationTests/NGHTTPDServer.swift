import BugleSimulator
import Foundation
import Testing

/// nghttpd, nghttp2's HTTP/2 server (Debian package `nghttp2-server`), on 127.0.0.1 over TLS with ALPN `h2` and a
/// certificate from a fresh simulator CA: an HTTP/2 implementation Bugle's client was not written against.
///
/// `.ci/run` installs it and sets `BUGLE_REQUIRE_NGHTTPD=1`, which turns a missing server into a failure; elsewhere a
/// suite that needs it is skipped and says why.
struct NGHTTPDServer {
    /// The nghttpd binary: `PATH`, then the Debian location.
    static let executable = ExternalServer.locate("nghttpd", also: ["/usr/sbin/nghttpd", "/usr/local/sbin/nghttpd"])

    /// Whether a suite that needs nghttpd runs: it is installed, or its absence must fail the run.
    static var enabled: Bool { ExternalServer.enabled(executable, requirement: "BUGLE_REQUIRE_NGHTTPD") }
    static let reason: Comment = "nghttpd is not installed (apt-get install -y nghttp2-server); .ci/run installs it"

    /// The TCP port it listens on.
    let port: Int
    /// The CA that signed its certificate (`caFile`).
    let material: SimulatorCertificates
    /// Its document root (empty unless a test writes files there).
    let htdocs: String
    private let server: ExternalServer

    /// What nghttpd printed so far (with `--verbose`: every frame and every header field it decoded).
    func output() -> String { server.output() }

    /// Starts nghttpd with `options` (its own flags, before the port), runs `body`, and stops it however `body` ends.
    static func with<T>(_ options: [String], _ body: (NGHTTPDServer) async throws -> T) async throws -> T {
        try await ExternalServer.using(try await start(options), stop: { $0.server.stop() }, body)
    }

    private static func start(_ options: [String]) async throws -> NGHTTPDServer {
        guard let executable else {
            throw ExternalServer.Failure(description: "nghttpd is required (BUGLE_REQUIRE_NGHTTPD=1) but not installed")
        }
        let directory = NSTemporaryDirectory() + "bugle-nghttpd-" + UUID().uuidString
        let htdocs = directory + "/htdocs"
        try FileManager.default.createDirectory(atPath: htdocs, withIntermediateDirectories: true)
        let material = try SimulatorCertificates.generate(in: directory + "/certs", port: 0)
        let port = try freeLoopbackPort()
        let arguments = ["--address=127.0.0.1", "--htdocs=\(htdocs)"] + options
            + [String(port), material.directory + "/server.key", material.directory + "/server.pem"]
        let server = try await ExternalServer.start(
            executable, arguments, port: port, directory: directory, log: "nghttpd.log", what: "nghttpd \(options.joined(separator: " "))")
        return NGHTTPDServer(port: port, material: material, htdocs: htdocs, server: server)
    }
}
