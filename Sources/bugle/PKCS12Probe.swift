import ArgumentParser
import Foundation
import NIOSSL

/// Opens a PKCS#12 bundle in a child process before Bugle opens it itself: swift-nio-ssl stops the whole process
/// (a trap, exit 132 and a register dump) when a bundle decrypts but lacks its certificate or its private key, as
/// `openssl pkcs12 -export -nokeys` or `-nocerts` make them. The child takes that fall instead, and the parent says
/// what is wrong with the file.
enum PKCS12Probe {
    /// The hidden subcommand the child runs.
    static let commandName = "__open-pkcs12"

    /// What the child found.
    enum Verdict: Equatable {
        /// The bundle opened with a certificate and a key, or failed in a way Bugle's own loading reports (a wrong
        /// passphrase, not a PKCS#12 file): either way, loading it in this process is safe.
        case safeToOpen
        /// The bundle opened but has no certificate or no private key.
        case incomplete
    }

    /// Runs the probe on `path` with the passphrase in `passphraseEnv` (the child inherits the environment; the
    /// passphrase is never on a command line).
    static func check(path: String, passphraseEnv: String?) throws -> Verdict {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [commandName, path] + (passphraseEnv.map { ["--passphrase-env", $0] } ?? [])
        var environment = ProcessInfo.processInfo.environment
        // The crash is expected: no backtrace (it takes seconds and would be written to the null device anyway).
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? .incomplete : .safeToOpen
    }

    /// `bugle __open-pkcs12 PATH [--passphrase-env VAR]`: opens the bundle and exits 0; a bundle without its
    /// certificate or key ends this process with a signal, which ``check(path:passphraseEnv:)`` reads.
    struct Command: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: PKCS12Probe.commandName, shouldDisplay: false)

        @Argument var path: String
        @Option(name: .customLong("passphrase-env")) var passphraseEnv: String?

        func run() throws {
            let passphrase = passphraseEnv.flatMap { ProcessInfo.processInfo.environment[$0] }.map { Array($0.utf8) } ?? []
            // Any thrown error is one Bugle's own loading reports better; only the trap matters here.
            _ = try? NIOSSLPKCS12Bundle(file: path, passphrase: passphrase)
        }
    }
}
