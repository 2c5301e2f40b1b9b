import BugleHTTP2
import Foundation
import Testing

@Suite("Secret files: only a regular file of key size is read")
struct SecretFileTests {
    @Test("a FIFO is refused without opening it (reading one waited for ever for a writer); a directory is a directory, not a key readable by others; a file over 1 MiB is refused; a symlink to a 0600 key is read")
    func onlyRegularFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bugle-secret-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/key.p8"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(SecretFile.read(fifo, allowReadableByOthers: false) == .failure(.unreadable))
        #expect(SecretFile.unreadableReason(fifo)?.hasPrefix("not a regular file") == true)
        #expect(SecretFile.check(directory, allowReadableByOthers: false) == .unreadable)
        #expect(SecretFile.unreadableReason(directory) == "Is a directory")
        let large = directory + "/large.p8"
        #expect(FileManager.default.createFile(atPath: large, contents: Data(count: SecretFile.maximumSize + 1), attributes: [.posixPermissions: 0o600]))
        #expect(SecretFile.check(large, allowReadableByOthers: false) == .unreadable)
        #expect(SecretFile.unreadableReason(large)?.hasPrefix("larger than 1 MiB") == true)
        let key = directory + "/real.p8"
        #expect(FileManager.default.createFile(atPath: key, contents: Data("key".utf8), attributes: [.posixPermissions: 0o600]))
        try FileManager.default.createSymbolicLink(atPath: directory + "/link.p8", withDestinationPath: key)
        #expect(SecretFile.read(directory + "/link.p8", allowReadableByOthers: false) == .success(Data("key".utf8)))
        #expect(SecretFile.check(key, allowReadableByOthers: false) == nil)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        #expect(SecretFile.check(directory + "/link.p8", allowReadableByOthers: false) == .readableByOthers(mode: 0o644))
    }
}
