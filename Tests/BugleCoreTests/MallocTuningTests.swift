import CBugleMalloc
import Testing

@Suite("Malloc settings (the C shims the bugle executable calls at start)")
struct MallocTuningTests {
    #if os(Linux)
    @Test("glibc accepts an arena cap through the shim")
    func glibcAcceptsTheCap() {
        // A generous cap: this process's allocator is shared with every other test. The shim answers 0 wherever it
        // does not reach glibc's mallopt (it once tested __GLIBC__ before any header had defined it).
        #expect(bugle_limit_malloc_arenas(64) == 1)
    }

    @Test("glibc accepts a fixed mmap threshold through the shim")
    func glibcAcceptsTheThreshold() {
        // The value bugle sets; this test process's allocator then maps blocks of 1 MiB and more, which is harmless.
        #expect(bugle_set_mmap_threshold(1 << 20) == 1)
    }
    #endif
}
