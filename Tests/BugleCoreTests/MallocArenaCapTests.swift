import CBugleMalloc
import Testing

@Suite("Malloc arena cap (the C shim the bugle executable calls at start)")
struct MallocArenaCapTests {
    #if os(Linux)
    @Test("glibc accepts an arena cap through the shim")
    func glibcAcceptsTheCap() {
        // A generous cap: this process's allocator is shared with every other test. The shim answers 0 wherever it
        // does not reach glibc's mallopt (it once tested __GLIBC__ before any header had defined it).
        #expect(bugle_limit_malloc_arenas(64) == 1)
    }
    #endif
}
