import Foundation
import Testing

@testable import BugleStore

@Suite("ProcessRunner (helper programs such as pg_ctl)")
struct ProcessRunnerTests {
    /// `pg_ctl start` leaves a server running with whatever it inherited; a caller's pipe held open there would
    /// keep the caller's reader from ever seeing EOF.
    @Test("a child gets no descriptor of ours beyond its standard three")
    func childInheritsNoDescriptors() async throws {
        let pipe = Pipe()
        defer {
            try? pipe.fileHandleForReading.close()
            try? pipe.fileHandleForWriting.close()
        }
        let writeEnd = pipe.fileHandleForWriting.fileDescriptor
        // Foundation's pipes are inheritable: this is exactly the descriptor a careless spawn would hand on.
        #expect(fcntl(writeEnd, F_GETFD) & FD_CLOEXEC == 0)

        let inherited = try await ProcessRunner.run("/usr/bin/readlink", ["/proc/self/fd/\(writeEnd)"], as: nil)
        #expect(inherited.status != 0, "the child could see our pipe: \(inherited.output)")

        let standard = try await ProcessRunner.run("/usr/bin/readlink", ["/proc/self/fd/1"], as: nil)
        #expect(standard.status == 0, "the child's standard output is missing: \(standard.output)")
    }
}
