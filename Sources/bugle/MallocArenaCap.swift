import CBugleMalloc
import Foundation

/// Caps glibc's malloc arenas for the `bugle` process.
///
/// glibc gives each thread that contends for the heap its own arena, up to eight per core, and keeps each arena's
/// freed memory. Bugle's event loops and task threads all allocate per notification, so over a long run the arenas
/// fill one after another and the resident size climbs, although what Bugle holds is bounded (one page, the in-flight
/// window, bounded caches). Two arenas keep the resident size flat at the same CPU per notification (README,
/// "Where the resident memory goes over a run").
enum MallocArenaCap {
    /// The cap applied when the operator chose none.
    static let defaultArenas: Int32 = 2

    /// Applies ``defaultArenas`` unless the environment already chooses (`MALLOC_ARENA_MAX`, or `arena_max` in
    /// `GLIBC_TUNABLES`): glibc applied that choice at process start. Call before the first thread starts.
    /// - Returns: whether this call set the cap.
    @discardableResult
    static func apply(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        if environment["MALLOC_ARENA_MAX"] != nil { return false }
        if let tunables = environment["GLIBC_TUNABLES"], tunables.contains("arena_max") { return false }
        return bugle_limit_malloc_arenas(defaultArenas) == 1
    }
}
