import BugleStore
import BugleTesting
import Foundation
import Testing

#if canImport(Glibc)
// `struct stat`'s members come through CoreFoundation's module in this test target (MemberImportVisibility).
import CoreFoundation
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `--csv PATH` does to what is at PATH: a regular file is replaced atomically through its symlinks, keeping its
/// permissions; anything else is written to, never replaced.
@Suite("report writer: symlinks, permissions, FIFOs, standard output (no database)")
struct ReportFileWriterTests {
    static let report = Array("run_id,device_id\r\n1,2\r\n".utf8)

    static func write(_ bytes: [UInt8], to destination: ReportDestination) throws {
        let writer = try ReportFileWriter(destination)
        try writer.write(bytes)
        try writer.commit()
    }

    /// Whether `path` itself (not what it links to) is a FIFO.
    static func isFIFO(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO
    }

    static func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test("a symlink is followed: its target gets the report (relative and absolute links, a dangling one creates its target), the link stays a link")
    func symlinks() throws {
        let directory = try TestScratch.directory(prefix: "report-writer")
        try Data("old".utf8).write(to: URL(fileURLWithPath: directory + "/target.csv"))
        try FileManager.default.createSymbolicLink(atPath: directory + "/link.csv", withDestinationPath: "target.csv")
        try FileManager.default.createSymbolicLink(atPath: directory + "/absolute.csv", withDestinationPath: directory + "/link.csv")
        try Self.write(Self.report, to: .path(directory + "/absolute.csv"))
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/link.csv") == "target.csv")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/absolute.csv") == directory + "/link.csv")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: directory + "/target.csv"))) == Self.report)

        try FileManager.default.createSymbolicLink(atPath: directory + "/dangling.csv", withDestinationPath: "new.csv")
        try Self.write(Self.report, to: .path(directory + "/dangling.csv"))
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/dangling.csv") == "new.csv")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: directory + "/new.csv"))) == Self.report)
        // Nothing left beside the files but what was there and what was asked for.
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(names == ["absolute.csv", "dangling.csv", "link.csv", "new.csv", "target.csv"])
    }

    /// A writer killed (`kill -9`) while writing left its `REPORT.tmp-PID` beside the report for good, one per try.
    @Test("the temporary file of a killed writer is removed by the next write; a live process's, a fresh one and other names are left")
    func abandonedTemporaryFiles() throws {
        let directory = try TestScratch.directory(prefix: "report-writer")
        let finished = Process()
        finished.executableURL = URL(fileURLWithPath: "/bin/true")
        try finished.run()
        finished.waitUntilExit()
        let dead = finished.processIdentifier
        let old = Date(timeIntervalSinceNow: -120)
        func make(_ name: String, at date: Date) throws {
            #expect(FileManager.default.createFile(atPath: directory + "/" + name, contents: Data("half".utf8)))
            try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: directory + "/" + name)
        }
        try make("r.csv.tmp-\(dead)", at: old)  // abandoned: removed
        try make("r.csv.tmp-1", at: old)  // PID 1 is alive
        try make("r.csv.tmp-x\(dead)", at: old)  // not a writer's name
        try make("other.csv.tmp-\(dead)", at: old)  // another report's
        try Self.write(Self.report, to: .path(directory + "/r.csv"))
        try make("r.csv.tmp-\(dead)", at: Date())  // written to a moment ago: maybe a writer on another machine
        try Self.write(Self.report, to: .path(directory + "/r.csv"))
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(names == ["other.csv.tmp-\(dead)", "r.csv", "r.csv.tmp-1", "r.csv.tmp-\(dead)", "r.csv.tmp-x\(dead)"], "\(names)")
    }

    @Test("an existing file keeps its permission bits; a new one is created 0644 at most (less the umask)")
    func permissions() throws {
        let directory = try TestScratch.directory(prefix: "report-writer")
        for mode in [0o600, 0o640, 0o664] {
            let path = directory + "/report-\(String(mode, radix: 8)).csv"
            #expect(FileManager.default.createFile(atPath: path, contents: Data("old".utf8), attributes: [.posixPermissions: mode]))
            try Self.write(Self.report, to: .path(path))
            #expect(try Self.mode(path) == mode, "\(path)")
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == Self.report)
        }
        let fresh = directory + "/fresh.csv"
        try Self.write(Self.report, to: .path(fresh))
        #expect(try Self.mode(fresh) & ~0o644 == 0)
    }

    @Test("a FIFO is written to, not replaced: a reading thread gets every byte, and the FIFO is still a FIFO")
    func fifo() async throws {
        let directory = try TestScratch.directory(prefix: "report-writer")
        let path = directory + "/report.fifo"
        #expect(mkfifo(path, 0o600) == 0)
        // The reader is there first, so the writer's open does not wait; the writer is there before reading starts.
        let reader = try FIFOReader(path: path)
        let writer = try ReportFileWriter(.path(path))
        reader.start()
        // More than a pipe holds, so the writer only gets through while the thread reads.
        let bytes = Array(repeating: Self.report, count: 20_000).flatMap { $0 }
        try writer.write(bytes)
        try writer.commit()
        #expect(await reader.bytes() == bytes)
        #expect(Self.isFIFO(path))
    }

    @Test("standard output: written to its descriptor, which stays open; a directory is refused, and abandoning a file leaves it untouched")
    func descriptorDirectoryAbandon() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        try Self.write(Self.report, to: .standardOutput(descriptor: ends[1]))
        #expect(fcntl(ends[1], F_GETFD) >= 0, "the descriptor is left open")
        close(ends[1])
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
        close(ends[0])
        #expect(Array(buffer[..<max(0, count)]) == Self.report)

        let directory = try TestScratch.directory(prefix: "report-writer")
        #expect(throws: FileWriteError.self) { try ReportFileWriter(.path(directory)) }

        let path = directory + "/kept.csv"
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        let writer = try ReportFileWriter(.path(path))
        try writer.write(Self.report)
        writer.abandon()
        writer.abandon()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "old")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["kept.csv"])
    }
}
