import BugleCore
import Synchronization

/// A ``SendGate`` a test closes: open until ``close()``.
public final class SwitchGate: SendGate {
    private let open = Mutex(true)

    public init() {}

    public var isOpen: Bool { open.withLock { $0 } }

    public func close() { open.withLock { $0 = false } }
}
