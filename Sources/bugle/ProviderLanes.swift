import BugleCore
import Logging

/// Wiring: builds the provider lanes a campaign needs from the providers file.
enum ProviderLanes {
    /// The lanes available for `settings` (each provider section present → its lane).
    static func make(settings: ProviderSettings, allowReadableKeys: Bool, logger: Logger) throws -> [ProviderKind: any PushProvider] {
        let lanes: [ProviderKind: any PushProvider] = [:]
        return lanes
    }
}
