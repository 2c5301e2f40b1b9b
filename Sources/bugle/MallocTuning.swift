import CBugleMalloc
import Foundation

/// The glibc malloc settings the `bugle` process applies at start, each only where the environment chose none
/// (glibc applied an environment choice at process start).
enum MallocTuning {
    /// One setting: the environment variable and the `GLIBC_TUNABLES` name that choose it instead, and the call that
    /// applies Bugle's value (1 when applied).
    struct Setting: Sendable {
        var variable: String
        var tunable: String
        var apply: @Sendable () -> Int32
    }

    /// Two arenas. glibc gives each thread that contends for the heap its own arena, up to eight per core, and keeps
    /// each arena's freed memory. Bugle's event loops and task threads all allocate per notification, so over a long
    /// run the arenas fill one after another and the resident size climbs, although what Bugle holds is bounded (one
    /// page, the in-flight window, bounded caches). Two arenas keep the resident size flat at the same CPU per
    /// notification (README, "Where the resident memory goes over a run").
    static let arenaCap = Setting(variable: "MALLOC_ARENA_MAX", tunable: "arena_max") { bugle_limit_malloc_arenas(2) }

    /// A fixed mmap threshold of 1 MiB. glibc otherwise raises its threshold to the size of the largest mapped block
    /// freed (up to 32 MiB): once materialization freed its 16 MiB duplicate-token sieve, later blocks of up to that
    /// size came from the arenas and stayed resident. Measured on one 1,000,000-recipient pipeline run each way: peak
    /// RSS 92.2 MB against 101.3 MB, at the same CPU (README, "Measured again (2026-11-26, later)").
    static let mmapThreshold = Setting(variable: "MALLOC_MMAP_THRESHOLD_", tunable: "mmap_threshold") { bugle_set_mmap_threshold(1 << 20) }

    /// Applies ``arenaCap`` and ``mmapThreshold`` where the environment chose neither. Call before the first thread
    /// starts.
    /// - Returns: per setting, in that order, whether this call applied it.
    @discardableResult
    static func apply(environment: [String: String] = ProcessInfo.processInfo.environment) -> [Bool] {
        [arenaCap, mmapThreshold].map { setting in
            if environment[setting.variable] != nil { return false }
            if let tunables = environment["GLIBC_TUNABLES"], tunables.contains(setting.tunable) { return false }
            return setting.apply() == 1
        }
    }
}
