import BugleAPNs
import BugleCore
import BugleSimulator
import BugleTesting
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the built `bugle-sim` executable as a script or a test in another process would: option checks, the printed
/// addresses, `--counters-port` answering while it serves, and SIGTERM stopping it.
@Suite("bugle-sim (built executable)")
struct BugleSimCLITests {
    /// The `bugle-sim` executable built beside `bugle`.
    static let executable = CLITests.executable.deletingLastPathComponent().appendingPathComponent("bugle-sim").path

    @Test(
        "an option out of range exits non-zero before anything is written, naming the option and what it allows",
        arguments: [
            (["serve", "--apns-port", "70000"], "--apns-port must be within 0...65535 (0 = ephemeral), not 70000"),
            (["serve", "--max-streams", "0"], "--max-streams must be within 1...4294967295, not 0"),
            (["serve", "--threads", "0"], "--threads must be within 1...256, not 0"),
            (["serve", "--threads", "100000"], "--threads must be within 1...256, not 100000"),
            (["serve", "--latency-ms", "99999999999"], "--latency-ms must be within 0...3600000, not 99999999999"),
            (["serve", "--counters-port=-1"], "--counters-port must be within 0...65535 (0 = ephemeral), not -1"),
            (["serve", "--fcm-port", "65536"], "--fcm-port must be within 0...65535 (0 = ephemeral), not 65536"),
            (["serve", "--metadata-port", "99999"], "--metadata-port must be within 0...65535 (0 = ephemeral), not 99999"),
            (["serve", "--goaway-every", "0"], "--goaway-every must be at least 1, not 0"),
            (["serve", "--drop-every", "0"], "--drop-every must be at least 1, not 0"),
            (["serve", "--latency-ms=-5"], "--latency-ms must be within 0...3600000, not -5"),
            (["serve", "--fcm-latency-ms=-1"], "--fcm-latency-ms must be within 0...3600000, not -1"),
            (["serve", "--streams-before-auth=-1"], "--streams-before-auth must be within 0...4294967295, not -1"),
            (["serve", "--streams-after-rejection", "4294967296"], "--streams-after-rejection must be within 0...4294967295, not 4294967296"),
            (["serve", "--jwt-max-age", "0"], "--jwt-max-age must be at least 1, not 0"),
            (["serve", "--token-update-interval=-1"], "--token-update-interval must be at least 0, not -1"),
            (["legacy", "--port", "70000"], "--port must be within 0...65535 (0 = ephemeral), not 70000"),
            (["legacy", "--feedback-port", "65536"], "--feedback-port must be within 0...65535 (0 = ephemeral), not 65536"),
            (["legacy", "--counters-port", "70000"], "--counters-port must be within 0...65535 (0 = ephemeral), not 70000"),
            (["legacy", "--threads", "0"], "--threads must be within 1...256, not 0"),
        ]
    )
    func optionOutOfRange(arguments: [String], message: String) async throws {
        let directory = try TestScratch.directory(prefix: "bugle-sim-cli") + "/sim"
        let output = await SimulatorProcess.run(Self.executable, [arguments[0], "--dir", directory] + arguments.dropFirst())
        #expect(output.status != 0, "\(output.stdout)")
        #expect(output.stderr.contains(message), "\(output.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory), "the simulator directory was written")
    }

    @Test(
        "a port already in use exits 1 naming the option and the port, not the networking library's bind error",
        arguments: ["--apns-port", "--counters-port", "legacy --port"]
    )
    func portInUse(option: String) async throws {
        let directory = try TestScratch.directory(prefix: "bugle-sim-cli") + "/sim"
        let taken = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(taken.localAddress?.port)
        let words = option.split(separator: " ").map(String.init)
        let command = words.count == 2 ? words[0] : "serve"
        let flag = words.last ?? option
        var arguments = [command, "--dir", directory, flag, String(port)]
        if command == "serve", flag != "--apns-port" { arguments += ["--apns-port", "0"] }
        if command == "legacy" { arguments += ["--feedback-port", "0"] }
        let output = await SimulatorProcess.run(Self.executable, arguments)
        try await taken.close()
        #expect(output.status == 1, "\(output.stderr)")
        let expected = command == "legacy"
            ? "--port \(port) or --feedback-port 0: one of these ports is already in use; choose another port (0 picks a free one)"
            : "\(flag) \(port): 127.0.0.1:\(port) is already in use; choose another port (0 picks a free one)"
        #expect(output.stderr.contains(expected), "\(output.stderr)")
        #expect(!output.stderr.contains("bind(descriptor"), "\(output.stderr)")
    }

    @Test("certs refuses a port out of range")
    func certsPortOutOfRange() async throws {
        let directory = try TestScratch.directory(prefix: "bugle-sim-cli") + "/sim"
        let output = await SimulatorProcess.run(Self.executable, ["certs", directory, "--port", "70000"])
        #expect(output.status != 0)
        #expect(output.stderr.contains("--port must be within 0...65535 (0 = ephemeral), not 70000"), "\(output.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory))
    }

    @Test("certs into a relative directory: providers.yaml names every file by an absolute path that exists")
    func certsRelativeDirectory() async throws {
        let workingDirectory = try TestScratch.directory(prefix: "bugle-sim-cli")
        defer { try? FileManager.default.removeItem(atPath: workingDirectory) }
        let output = await SimulatorProcess.run(Self.executable, ["certs", "sim/", "--fcm-port", "8443"], in: URL(fileURLWithPath: workingDirectory))
        #expect(output.status == 0, "\(output.stderr)")
        let providers = try String(contentsOfFile: workingDirectory + "/sim/providers.yaml", encoding: .utf8)
        let paths = providers.split(separator: "\n").compactMap { line -> String? in
            for key in ["ca_file: ", "key_file: ", "service_account_file: "] {
                if let range = line.range(of: key) { return String(line[range.upperBound...].prefix { $0 != " " && $0 != "}" }) }
            }
            return nil
        }
        #expect(paths.count == 4, "\(providers)")
        for path in paths {
            #expect(path.hasPrefix(workingDirectory + "/sim/"), "\(path) in \(providers)")
            #expect(FileManager.default.fileExists(atPath: path), "\(path)")
        }
    }

    @Test("serve --counters-port 0 prints a counters URL that counts deliveries as they happen; SIGTERM stops everything")
    func serveCounters() async throws {
        let directory = try TestScratch.directory(prefix: "bugle-sim-cli")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let simulator = try SimulatorProcess(
            Self.executable, ["serve", "--dir", directory, "--apns-port", "0", "--counters-port", "0", "--threads", "1"]
        )
        var provider: APNSProvider?
        do {
            let apnsPort = try Self.port(in: await simulator.line(startingWith: "apns https://127.0.0.1:"), after: "apns https://127.0.0.1:")
            let countersLine = try await simulator.line(startingWith: "counters http://127.0.0.1:")
            #expect(countersLine.hasSuffix("/counters"), "\(countersLine)")
            let countersPort = try Self.port(in: countersLine, after: "counters http://127.0.0.1:")

            let idle = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/counters")
            #expect(idle.status == 200, "\(idle)")
            let idleObject = try #require(idle.json, "\(idle)")
            #expect(Set(idleObject.keys) == ["apns"], "only APNs is served: \(idleObject.keys)")
            #expect((idleObject["apns"] as? [String: Any])?["accepted"] as? Int == 0)

            // Five notifications through the child's APNs port, with the material it wrote.
            let material = try SimulatorCertificates.load(from: directory)
            let settings = APNsSettings(
                endpoint: Endpoint(host: "127.0.0.1", port: apnsPort),
                caFile: material.caFile,
                topic: material.topic,
                auth: .token(teamID: material.teamID, keyID: material.keyID, keyFile: material.keyFile),
                connections: 1,
                timeoutSeconds: 60
            )
            let apnsProvider = try APNSProvider(settings: settings, logger: APNsTestEnvironment.logger)
            provider = apnsProvider
            let requests = (0..<5).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
                + [APNsTestEnvironment.request(token: APNsTestEnvironment.scriptedToken(prefix: "dead", 0), seq: 5)]
            _ = await sendAll(apnsProvider, requests, concurrency: 6)
            await apnsProvider.shutdown()
            provider = nil

            let counted = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/counters")
            let apns = try #require(counted.json?["apns"] as? [String: Any], "\(counted)")
            #expect(apns["accepted"] as? Int == 5, "\(apns)")
            #expect(apns["rejectedByReason"] as? [String: Int] == ["Unregistered": 1], "\(apns)")
            let missing = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/nothing")
            #expect(missing.status == 404)
            let post = try await LoopbackHTTPResponse.fetch("POST", port: countersPort, path: "/counters")
            #expect(post.status == 405)

            let output = await simulator.terminate()
            #expect(output.status == 0, "\(output.stderr)")
            #expect(output.stdout.contains("accepted 5 rejected 1"), "\(output.stdout)")
            #expect(connectedLoopbackSocket(port: countersPort) == nil, "the counters port still accepts after exit")
            #expect(connectedLoopbackSocket(port: apnsPort) == nil, "the APNs port still accepts after exit")
        } catch {
            await provider?.shutdown()
            _ = await simulator.terminate()
            throw error
        }
    }

    /// `--client-ca` serves certificate auth from the command line (it was reachable in-process only): a client with a
    /// certificate of that CA is served without a JWT, one without a certificate is turned away in the handshake.
    @Test("serve --client-ca: certificate auth with the client certificate certs writes; a token-auth client without one is refused")
    func certificateMode() async throws {
        let directory = try TestScratch.directory(prefix: "bugle-sim-cli")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let simulator = try SimulatorProcess(
            Self.executable, ["serve", "--dir", directory, "--apns-port", "0", "--client-ca", directory + "/ca.pem", "--threads", "1"]
        )
        var providers: [APNSProvider] = []
        do {
            let apnsPort = try Self.port(in: await simulator.line(startingWith: "apns https://127.0.0.1:"), after: "apns https://127.0.0.1:")
            let material = try SimulatorCertificates.load(from: directory)
            let client = try SimulatorCertificates.generateLegacyClient(in: directory, commonName: material.topic)
            func provider(_ auth: APNsSettings.Auth) throws -> APNSProvider {
                let settings = APNsSettings(
                    endpoint: Endpoint(host: "127.0.0.1", port: apnsPort), caFile: material.caFile, topic: material.topic, auth: auth,
                    connections: 1, timeoutSeconds: 30)
                let made = try APNSProvider(settings: settings, logger: APNsTestEnvironment.logger)
                providers.append(made)
                return made
            }
            let requests = (0..<3).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
            let certified = await sendAll(
                try provider(.certificate(certFile: client.certificateFile, keyFile: client.keyFile, passphraseEnv: nil)), requests, concurrency: 3)
            func delivered(_ outcome: SendOutcome) -> Bool { if case .delivered = outcome { true } else { false } }
            #expect(certified.count == 3 && certified.allSatisfy(delivered), "\(certified)")
            let tokenOnly = await sendAll(
                try provider(.token(teamID: material.teamID, keyID: material.keyID, keyFile: material.keyFile)), [requests[0]], concurrency: 1)
            // TLS 1.3 (token auth): the refusal comes after the client's handshake, and was taken for a lost connection.
            if case .halt(let code, let message)? = tokenOnly.first {
                #expect(code == "TLSCertificateRejected" && message.contains("TLSV1_ALERT_CERTIFICATE_REQUIRED"), "\(code): \(message)")
            } else {
                Issue.record("a client without a certificate should halt: \(tokenOnly)")
            }
            for made in providers { await made.shutdown() }
            providers = []

            let output = await simulator.terminate()
            #expect(output.status == 0, "\(output.stderr)")
            #expect(output.stdout.contains("accepted 3 rejected 0"), "\(output.stdout)")
        } catch {
            for made in providers { await made.shutdown() }
            _ = await simulator.terminate()
            throw error
        }
    }

    @Test("legacy --counters-port 0 serves the legacy simulator's counters; SIGTERM stops it")
    func legacyCounters() async throws {
        let directory = try TestScratch.directory(prefix: "bugle-sim-cli")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let simulator = try SimulatorProcess(
            Self.executable, ["legacy", "--dir", directory, "--port", "0", "--feedback-port", "0", "--counters-port", "0"]
        )
        do {
            let countersPort = try Self.port(in: await simulator.line(startingWith: "counters http://127.0.0.1:"), after: "counters http://127.0.0.1:")
            let answer = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/counters")
            #expect(answer.status == 200, "\(answer)")
            let object = try #require(answer.json, "\(answer)")
            #expect(Set(object.keys) == ["legacy"])
            #expect((object["legacy"] as? [String: Any])?["accepted"] as? Int == 0)
            let output = await simulator.terminate()
            #expect(output.status == 0, "\(output.stderr)")
            #expect(output.stdout.contains("providers file: "), "\(output.stdout)")
            #expect(connectedLoopbackSocket(port: countersPort) == nil)
        } catch {
            _ = await simulator.terminate()
            throw error
        }
    }

    /// The port in a printed `line` after `prefix` (`… 127.0.0.1:PORT[/path]`).
    static func port(in line: String, after prefix: String) throws -> Int {
        let digits = line.dropFirst(prefix.count).prefix { $0.isNumber }
        return try #require(Int(digits), "no port in \(line.debugDescription)")
    }
}

/// A `bugle-sim` process started by a test: its stdout read line by line as it prints (from a dispatch thread, never
/// one of the cooperative pool's), stopped with SIGTERM as an operator would.
final class SimulatorProcess: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// How long a wait for a line, or for the exit after SIGTERM, may take before the process is killed (SIGKILL) so
    /// the test fails instead of hanging.
    static let patience: DispatchTimeInterval = .seconds(120)

    let process: Process
    private let stdout: FileHandle
    private let printed = NIOLockedValueBox(Data())
    private let stderrTask: Task<Data, Never>

    /// Starts `executable` with `arguments` in `directory` (default: the package root).
    init(_ executable: String, _ arguments: [String], in directory: URL = CLITests.packageRoot) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        self.process = process
        self.stdout = out.fileHandleForReading
        stderrTask = Task {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: err.fileHandleForReading.readDataToEndOfFile()) }
            }
        }
    }

    /// Runs `executable` with `arguments` in `directory` (default: the package root) to its end.
    static func run(_ executable: String, _ arguments: [String], in directory: URL = CLITests.packageRoot) async -> CLITests.Output {
        do {
            let started = try SimulatorProcess(executable, arguments, in: directory)
            return await started.finish()
        } catch {
            return CLITests.Output(status: -1, stdout: "", stderr: "could not start \(executable): \(error)")
        }
    }

    /// The first whole line of stdout that starts with `prefix`, reading until it is printed.
    /// - Throws: ``Failure`` with what was printed when stdout ends first (the process exited, or was killed after
    ///   ``patience``).
    func line(startingWith prefix: String) async throws -> String {
        let watchdog = killAfterPatience()
        defer { watchdog.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try self.readLine(startingWith: prefix) })
            }
        }
    }

    /// Sends SIGTERM (nothing when it has exited), reads stdout and stderr to their ends and waits for the exit.
    func terminate() async -> CLITests.Output {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        return await finish()
    }

    /// Reads stdout and stderr to their ends and waits for the exit (SIGKILL after ``patience``).
    func finish() async -> CLITests.Output {
        let watchdog = killAfterPatience()
        defer { watchdog.cancel() }
        let (stdout, printed, process) = (self.stdout, self.printed, self.process)
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let rest = stdout.readDataToEndOfFile()
                printed.withLockedValue { $0.append(rest) }
                process.waitUntilExit()
                continuation.resume()
            }
        }
        let stderr = await stderrTask.value
        return CLITests.Output(
            status: process.terminationStatus,
            stdout: String(decoding: printed.withLockedValue { $0 }, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self)
        )
    }

    private func readLine(startingWith prefix: String) throws -> String {
        while true {
            let text = String(decoding: printed.withLockedValue { $0 }, as: UTF8.self)
            // The last piece is a line not yet ended.
            if let line = text.components(separatedBy: "\n").dropLast().first(where: { $0.hasPrefix(prefix) }) {
                return line
            }
            let chunk = stdout.availableData
            guard !chunk.isEmpty else {
                throw Failure(description: "stdout ended without a line starting \(prefix.debugDescription); it printed: \(text)")
            }
            printed.withLockedValue { $0.append(chunk) }
        }
    }

    /// Kills the process (SIGKILL) unless cancelled within ``patience``.
    private func killAfterPatience() -> DispatchWorkItem {
        let process = self.process
        let item = DispatchWorkItem {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.patience, execute: item)
        return item
    }
}
