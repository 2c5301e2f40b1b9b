import BugleStore
import Foundation
import Testing

@Suite("File errors in words")
struct FileErrorDescriptionTests {
    @Test("Foundation's file errors read as the path and the system's reason, not NSCocoaErrorDomain's dump")
    func cocoaErrorInWords() {
        let readOnly = CocoaError(.fileWriteVolumeReadOnly, userInfo: [NSFilePathErrorKey: "/srv/bugle/sim", NSUnderlyingErrorKey: POSIXError(.EROFS)])
        #expect(StoreError.safeDescription(of: readOnly) == "/srv/bugle/sim: Read-only file system")
        let described = StoreError.safeDescription(of: CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "/nope"]))
        #expect(described.hasPrefix("/nope: ") && !described.contains("NSCocoaErrorDomain"), "\(described)")
    }
}
