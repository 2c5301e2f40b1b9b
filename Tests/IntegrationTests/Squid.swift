import Foundation
import Testing

/// Squid (Debian package `squid`), the proxy most egress networks run, on 127.0.0.1 with Basic credentials checked by
/// a small helper program, and two listening ports: `http_port` (plain HTTP to the proxy) and `https_port` (TLS to the
/// proxy, with a certificate for 127.0.0.1 the caller provides). Its access log has one line per `CONNECT`, written
/// when the tunnel ends.
///
/// `.ci/run` installs it and sets `BUGLE_REQUIRE_SQUID=1`, which turns a missing proxy into a failure; elsewhere a
/// suite that needs it is skipped and says why.
struct Squid {
    /// The squid binary: `PATH`, then the Debian location.
    static let executable = ExternalServer.locate("squid", also: ["/usr/sbin/squid"])

    /// Whether a suite that needs squid runs: it is installed, or its absence must fail the run.
    static var enabled: Bool { ExternalServer.enabled(executable, requirement: "BUGLE_REQUIRE_SQUID") }
    static let reason: Comment = "squid is not installed (apt-get install -y squid); .ci/run installs it"

    /// The plain-HTTP port and the TLS port.
    let httpPort: Int
    let httpsPort: Int
    private let server: ExternalServer
    private let accessLog: String

    /// Access log lines for `CONNECT`s to `target` (`host:port`): `TCP_TUNNEL/200` for a tunnel it opened,
    /// `TCP_DENIED/407` for refused credentials.
    func connectLines(to target: String) -> [String] {
        let log = (try? String(contentsOfFile: accessLog, encoding: .utf8)) ?? ""
        return log.split(separator: "\n").map(String.init).filter { $0.contains(" CONNECT \(target) ") }
    }

    /// Waits (up to 10 s) until squid logged `count` tunnels to `target` (it logs each when the tunnel closes), and
    /// returns how many it logged.
    func tunnels(to target: String, reaching count: Int) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let logged = connectLines(to: target).filter { $0.contains("TCP_TUNNEL/200") }.count
            if logged >= count || ContinuousClock.now >= deadline { return logged }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Starts squid wanting `user`:`password`, its `https_port` serving `certificatePEM`/`keyPEM`; runs `body`, and
    /// stops it however `body` ends.
    static func with<T>(
        user: String, password: String, certificatePEM: String, keyPEM: String, _ body: (Squid) async throws -> T
    ) async throws -> T {
        let squid = try await start(user: user, password: password, certificatePEM: certificatePEM, keyPEM: keyPEM)
        return try await ExternalServer.using(squid, stop: { $0.server.stop() }, body)
    }

    private static func start(user: String, password: String, certificatePEM: String, keyPEM: String) async throws -> Squid {
        guard let executable else {
            throw ExternalServer.Failure(description: "squid is required (BUGLE_REQUIRE_SQUID=1) but not installed")
        }
        // Started as root, squid runs as its own user (`proxy` on Debian): everything it reads or writes is open to it.
        let directory = NSTemporaryDirectory() + "bugle-squid-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        func write(_ text: String, _ name: String, permissions: Int) throws {
            try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: directory + "/" + name)
        }
        // Basic credentials arrive on the helper's stdin as "user password" lines; it answers OK or ERR.
        try write(
            """
            #!/bin/sh
            while read -r user pass; do
              if [ "$user" = "\(user)" ] && [ "$pass" = "\(password)" ]; then echo OK; else echo ERR; fi
            done

            """, "auth.sh", permissions: 0o755)
        try write(certificatePEM, "proxy.pem", permissions: 0o644)
        try write(keyPEM, "proxy.key", permissions: 0o644)
        let httpPort = try freeLoopbackPort()
        let httpsPort = try freeLoopbackPort()
        // No SSL_ports rule: CONNECT to any port (the simulators' are ephemeral).
        try write(
            """
            http_port 127.0.0.1:\(httpPort)
            https_port 127.0.0.1:\(httpsPort) tls-cert=\(directory)/proxy.pem tls-key=\(directory)/proxy.key
            pid_filename \(directory)/squid.pid
            cache_log \(directory)/cache.log
            access_log stdio:\(directory)/access.log
            coredump_dir \(directory)
            cache deny all
            pinger_enable off
            visible_hostname bugle-test
            shutdown_lifetime 0 seconds
            auth_param basic program \(directory)/auth.sh
            auth_param basic children 2
            auth_param basic realm bugle-test
            acl loopback src 127.0.0.1
            acl authenticated proxy_auth REQUIRED
            http_access allow loopback authenticated
            http_access deny all

            """, "squid.conf", permissions: 0o644)
        let server = try await ExternalServer.start(
            executable, ["-N", "-f", directory + "/squid.conf"], port: httpsPort, directory: directory, log: "stdout.log", what: "squid")
        return Squid(httpPort: httpPort, httpsPort: httpsPort, server: server, accessLog: directory + "/access.log")
    }
}
