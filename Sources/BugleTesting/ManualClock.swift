import Foundation
import Synchronization

/// A clock that moves only when a test advances it, plus the wall-clock seconds it stands for (for `iat`
/// claims and expiry checks). `sleep` returns at once: tests never wait on it.
public final class ManualClock: Clock, Sendable {
    /// An instant: the offset from the clock's creation.
    public struct Instant: InstantProtocol {
        public var offset: Duration
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let offset = Mutex(Duration.zero)
    private let epochStart: Double

    /// Creates a clock.
    /// - Parameter epochStart: Wall-clock seconds since 1970 at offset zero (default: now).
    public init(epochStart: Double = Date().timeIntervalSince1970) {
        self.epochStart = epochStart
    }

    public var now: Instant { Instant(offset: offset.withLock { $0 }) }
    public var minimumResolution: Duration { .nanoseconds(1) }

    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {}

    /// Moves the clock forward.
    /// - Parameter duration: How far.
    public func advance(by duration: Duration) {
        offset.withLock { $0 += duration }
    }

    /// Wall-clock seconds since 1970 (start + offset).
    public var wallSeconds: Double {
        let (seconds, attoseconds) = offset.withLock { $0 }.components
        return epochStart + Double(seconds) + Double(attoseconds) / 1e18
    }
}
