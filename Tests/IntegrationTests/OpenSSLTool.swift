import Foundation

/// The `openssl` command, for key files the tests need in forms Bugle's own certificate code does not write
/// (encrypted PEM keys, PKCS#12 bundles).
enum OpenSSLTool {
    /// Runs `/usr/bin/openssl` with `arguments`; `passphrase` reaches it as `PASS` in its environment (`env:PASS`),
    /// never on the command line.
    /// - Returns: openssl's exit status.
    static func run(_ arguments: [String], passphrase: String) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.environment = ["PASS": passphrase]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Writes `key` (a PEM private key) to `output` as an encrypted PKCS#8 PEM key (AES-256-CBC), mode 0600.
    /// - Returns: openssl's exit status.
    static func encrypt(key: String, to output: String, passphrase: String) throws -> Int32 {
        let status = try run(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", key, "-out", output, "-passout", "env:PASS"], passphrase: passphrase)
        if status == 0 { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: output) }
        return status
    }
}
