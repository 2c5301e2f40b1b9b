import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The outcome of a finished child process.
struct ProcessResult: Sendable {
    /// The exit status, or 128 + the signal number when the child was killed.
    var status: Int32
    /// Standard output and standard error, interleaved as the child wrote them.
    var output: String

    /// The last `limit` characters of ``output``, trimmed, for error messages.
    func outputTail(limit: Int = 2_000) -> String {
        let trimmed = self.output.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.count > limit ? "…" + String(trimmed.suffix(limit)) : trimmed
    }
}

/// Runs helper programs (`initdb`, `pg_ctl`) with argument arrays, never through a shell.
///
/// This uses `posix_spawn` and `waitpid` rather than Foundation's `Process`: on Linux, `Process` notices a child's
/// exit through a descriptor the child inherits, so `pg_ctl start` — which leaves a server running that inherits
/// it too — would never be seen to finish. For the same reason output goes to a temporary file, not a pipe, and the
/// child gets no descriptor but its standard three.
enum ProcessRunner {
    /// Where `runuser` is looked for when a command must run as another account.
    static let runuserCandidates = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser"]

    /// Runs a program to completion on a Dispatch thread, so no Swift-concurrency thread is blocked.
    /// - Parameters:
    ///   - executable: Absolute path of the program.
    ///   - arguments: Its arguments, passed verbatim.
    ///   - user: When set, the program runs as this account through `runuser -u <user> --`.
    /// - Returns: The exit status and combined output.
    /// - Throws: ``StoreError`` when the program cannot be started.
    static func run(_ executable: String, _ arguments: [String], as user: String?) async throws -> ProcessResult {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try Self.runBlocking(executable, arguments, as: user) })
            }
        }
    }

    /// Runs a program to completion, blocking the calling thread. Meant for `atexit` handlers and Dispatch threads.
    /// - Parameters:
    ///   - executable: Absolute path of the program.
    ///   - arguments: Its arguments, passed verbatim.
    ///   - user: When set, the program runs as this account through `runuser -u <user> --`.
    /// - Returns: The exit status and combined output.
    /// - Throws: ``StoreError`` when the program cannot be started.
    static func runBlocking(_ executable: String, _ arguments: [String], as user: String?) throws -> ProcessResult {
        var program = executable
        var argv = [executable] + arguments
        if let user {
            guard let runuser = Self.runuserCandidates.first(where: FileManager.default.isExecutableFile(atPath:))
            else {
                throw StoreError(
                    .clusterCommandFailed,
                    "running as root, Bugle must start PostgreSQL as the '\(user)' account, but `runuser` "
                        + "(util-linux) was not found"
                )
            }
            program = runuser
            argv = [runuser, "-u", user, "--", executable] + arguments
        }
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PG") }
        environment["LC_ALL"] = "C"
        let name = (executable as NSString).lastPathComponent

        let outputPath = NSTemporaryDirectory() + "bugle-\(getpid())-\(UUID().uuidString).out"
        let descriptor = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreError(.clusterCommandFailed, "cannot create a temporary file in \(NSTemporaryDirectory())")
        }
        defer {
            close(descriptor)
            unlink(outputPath)
        }

        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t?
        #else
        var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, descriptor, 1)
        posix_spawn_file_actions_adddup2(&actions, descriptor, 2)
        // Nothing else of ours reaches the child: `pg_ctl start` leaves a server running that would otherwise hold
        // every inherited descriptor (a caller's pipe, say) open for its lifetime, so the reader never sees EOF.
        #if canImport(Darwin)
        var attributes: posix_spawnattr_t?
        posix_spawnattr_init(&attributes)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_CLOEXEC_DEFAULT))
        #else
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        Self.closeInheritedDescriptors(&actions)
        #endif
        defer { posix_spawnattr_destroy(&attributes) }

        let cArguments = argv.map { strdup($0) }
        let cEnvironment = environment.map { strdup("\($0.key)=\($0.value)") }
        defer {
            cArguments.forEach { free($0) }
            cEnvironment.forEach { free($0) }
        }
        var pid = pid_t()
        let argumentVector = cArguments + [nil]
        let environmentVector = cEnvironment + [nil]
        let spawned = posix_spawn(&pid, program, &actions, &attributes, argumentVector, environmentVector)
        guard spawned == 0 else {
            throw StoreError(.clusterCommandFailed, "cannot start \(name) (error \(spawned))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else {
                throw StoreError(.clusterCommandFailed, "waiting for \(name) failed (errno \(errno))")
            }
        }
        let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let data = FileManager.default.contents(atPath: outputPath) ?? Data()
        return ProcessResult(status: exitStatus, output: String(decoding: data, as: UTF8.self))
    }

    #if !canImport(Darwin)
    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module does not
    /// export, looked up at run time.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// Adds actions that close every descriptor from 3 up in the child: in one step where glibc offers
    /// `closefrom`, else one `close` per descriptor open now (glibc ignores closing one that is gone by then).
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            let addCloseFrom = unsafeBitCast(symbol, to: AddCloseFrom.self)
            if addCloseFrom(&actions, 3) == 0 { return }
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap(Int32.init) where descriptor > 2 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
    }
    #endif
}
