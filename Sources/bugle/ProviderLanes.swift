import BugleAPNs
import BugleCore
import Logging

/// Wiring: builds the provider lanes a campaign needs from the providers file.
enum ProviderLanes {
    /// The lanes available for `settings` (each provider section present → its lane). Keys are loaded and
    /// checked here, before the database is touched, so a bad key file is a usage error (exit 1).
    static func make(settings: ProviderSettings, allowReadableKeys: Bool, logger: Logger) throws -> [ProviderKind: any PushProvider] {
        var lanes: [ProviderKind: any PushProvider] = [:]
        if let apns = settings.apns {
            var apnsLogger = logger
            apnsLogger[metadataKey: "provider"] = "apns"
            do {
                lanes[.apns] = try APNSProvider(settings: apns, options: APNSProvider.Options(allowReadableKeys: allowReadableKeys), logger: apnsLogger)
            } catch {
                throw UsageError("providers file \(settings.sourcePath ?? ""): apns: \(error)")
            }
        }
        return lanes
    }
}
