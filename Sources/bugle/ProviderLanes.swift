import BugleAPNs
import BugleCore
import BugleFCM
import BugleLegacyAPNs
import BugleRunner
import Logging

/// Wiring: builds the provider lanes a campaign needs from the providers file.
enum ProviderLanes {
    /// The lanes available for `settings` (each provider section present → its lane), each behind its pacer
    /// (``LanePacing``). Keys are loaded and checked here, before the database is touched, so a bad key file is
    /// a usage error (exit 1).
    static func make(settings: ProviderSettings, campaign: Campaign, allowReadableKeys: Bool, logger: Logger) throws -> LanePacing.Lanes {
        LanePacing.wrap(try unpaced(settings: settings, allowReadableKeys: allowReadableKeys, logger: logger), settings: settings, campaign: campaign)
    }

    private static func unpaced(settings: ProviderSettings, allowReadableKeys: Bool, logger: Logger) throws -> [ProviderKind: any PushProvider] {
        var lanes: [ProviderKind: any PushProvider] = [:]
        let source = settings.sourcePath ?? "providers file"
        if let apns = settings.apns {
            do {
                lanes[.apns] = try APNSProvider(
                    settings: apns,
                    options: APNSProvider.Options(allowReadableKeys: allowReadableKeys),
                    logger: laneLogger(logger, "apns")
                )
            } catch {
                throw UsageError("\(source): apns: \(error)")
            }
        }
        if let fcm = settings.fcm {
            do {
                lanes[.fcm] = try FCMProvider(
                    settings: fcm,
                    options: FCMProvider.Options(allowReadableKeys: allowReadableKeys),
                    logger: laneLogger(logger, "fcm")
                )
            } catch {
                throw UsageError("\(source): fcm: \(error)")
            }
        }
        if let legacy = settings.legacyAPNs, legacy.enabled {
            do {
                lanes[.legacyAPNs] = try LegacyAPNSProvider(
                    settings: legacy,
                    options: LegacyAPNSProvider.Options(allowReadableKeys: allowReadableKeys),
                    logger: laneLogger(logger, "apns_legacy")
                )
            } catch {
                throw UsageError("\(source): legacy_apns: \(error)")
            }
        }
        return lanes
    }

    private static func laneLogger(_ logger: Logger, _ provider: String) -> Logger {
        var logger = logger
        logger[metadataKey: "provider"] = "\(provider)"
        return logger
    }
}
