import BugleCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Gets the subject token of an executable source (``FCMExecutableSource``): from its output file while the response
/// there is still valid, else by running the program and reading its response from standard output.
///
/// A program that reports failure, exits with another status than 0, prints no usable response, or hands back a token
/// of another type than the configuration's, is a refusal (the lane halts with the reason: the program's `code` and
/// `message`, never its output or token). A program still running at its timeout is killed, and the exchange retried.
struct FCMExecutableSubjectToken: Sendable {
    /// Longest response read from the program.
    static let outputLimit = 65_536

    let source: FCMExecutableSource
    /// The configuration's `audience` and `subject_token_type`, and the service account it impersonates, if any: passed
    /// to the program.
    let audience: String
    let tokenType: String
    let impersonatedEmail: String?
    /// The environment the program inherits.
    let environment: [String: String]
    /// Now, in seconds since 1970 (for `expiration_time`).
    var now: @Sendable () -> Double = { Date().timeIntervalSince1970 }

    /// The subject token.
    func make() async throws(FCMAuthError) -> String {
        if let file = source.outputFile, let data = FileManager.default.contents(atPath: file),
            let cached = try? response(data, from: "output_file \(file)", requireExpiry: true)
        {
            return cached
        }
        let output = try await run()
        return try response(output, from: "the executable", requireExpiry: source.outputFile != nil)
    }

    /// The token of one response, or why there is none.
    func response(_ data: Data, from origin: String, requireExpiry: Bool) throws(FCMAuthError) -> String {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw .rejected("\(origin) printed no JSON response", from: .federation)
        }
        guard object["version"] as? Int == 1 else {
            throw .rejected("\(origin): the response's \"version\" is not 1", from: .federation)
        }
        guard let success = object["success"] as? Bool else {
            throw .rejected("\(origin): the response has no \"success\"", from: .federation)
        }
        guard success else {
            let code = Self.printable(object["code"] as? String ?? "")
            let message = Self.printable(object["message"] as? String ?? "")
            throw .rejected("\(origin) reported failure: \(code): \(message)", from: .federation)
        }
        guard object["token_type"] as? String == tokenType else {
            throw .rejected("\(origin): the response's token_type is not the configuration's subject_token_type \(tokenType)", from: .federation)
        }
        if let expiry = object["expiration_time"] as? Double {
            guard expiry > now() else { throw .rejected("\(origin): the response has expired", from: .federation) }
        } else if requireExpiry {
            throw .rejected("\(origin): a response with output_file must have \"expiration_time\"", from: .federation)
        }
        let field = tokenType.hasSuffix(":saml2") ? "saml_response" : "id_token"
        guard let token = object[field] as? String, !token.isEmpty else {
            throw .rejected("\(origin): the response has no \"\(field)\"", from: .federation)
        }
        return token
    }

    /// Runs the program, returning what it printed.
    private func run() async throws(FCMAuthError) -> Data {
        var variables = environment
        variables["GOOGLE_EXTERNAL_ACCOUNT_AUDIENCE"] = audience
        variables["GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE"] = tokenType
        variables["GOOGLE_EXTERNAL_ACCOUNT_INTERACTIVE"] = "0"
        if let impersonatedEmail { variables["GOOGLE_EXTERNAL_ACCOUNT_IMPERSONATED_EMAIL"] = impersonatedEmail }
        if let file = source.outputFile { variables["GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE"] = file }
        let program = source.command[0]
        let command = source.command
        let timeout = source.timeout
        let inherited = variables
        let result: Result<(status: Int32, output: Data, timedOut: Bool), any Error> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result { try Self.runBlocking(command, environment: inherited, timeout: timeout) })
            }
        }
        switch result {
        case .failure(let error):
            throw .rejected("cannot run the executable \(program): \(error.localizedDescription)", from: .federation)
        case .success(let run) where run.timedOut:
            throw .unavailable("the executable \(program) did not finish within \(source.timeout)", from: .federation)
        case .success(let run) where run.status != 0:
            throw .rejected("the executable \(program) exited with status \(run.status)", from: .federation)
        case .success(let run):
            return run.output
        }
    }

    /// Runs `command` to its end or its timeout (then killed), on the calling thread.
    private static func runBlocking(
        _ command: [String], environment: [String: String], timeout: Duration
    ) throws -> (status: Int32, output: Data, timedOut: Bool) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.environment = environment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        let finished = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in finished.signal() }
        try process.run()
        let collected = OutputBox()
        let read = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            var chunk = out.fileHandleForReading.availableData
            while !chunk.isEmpty, collected.append(chunk) <= outputLimit {
                chunk = out.fileHandleForReading.availableData
            }
            read.signal()
        }
        let timedOut = finished.wait(timeout: .now() + timeout.inSeconds) == .timedOut
        if timedOut {
            kill(process.processIdentifier, SIGKILL)
            finished.wait()
        }
        // A grandchild that kept the pipe open must not hold the exchange: what arrived within a few seconds is the
        // output. Not one second: on a starved machine the reader had not yet run by then, and a program that had
        // printed its whole response was read as printing nothing. Output closed at the program's exit ends the wait at once.
        _ = read.wait(timeout: .now() + 5)
        return (process.terminationStatus, collected.data, timedOut)
    }

    /// A program's `code` or `message` kept to one printable line.
    private static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { (0x20...0x7E).contains($0.value) }).prefix(200))
    }
}

/// The program's output as it arrives, read on another thread.
private final class OutputBox: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes = Data()

    /// Appends `chunk`; returns the length so far.
    func append(_ chunk: Data) -> Int {
        lock.lock()
        defer { lock.unlock() }
        bytes.append(chunk)
        return bytes.count
    }

    var data: Data {
        lock.lock()
        defer { lock.unlock() }
        return bytes
    }
}
