import BugleAPNs
import BugleHTTP2
import BugleCore
import BugleFCM
import BugleLegacyAPNs
import BugleRunner
import Foundation
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
        if let apns = settings.apns {
            // Only a regular file of key size is probed (a FIFO held the probe, and Bugle, for ever); anything else is
            // refused by the lane's own checks below.
            if case .certificate(let bundle, nil, let passphraseEnv) = apns.auth, SecretFile.check(bundle, allowReadableByOthers: true) == nil,
                try PKCS12Probe.check(path: bundle, passphraseEnv: passphraseEnv) == .incomplete
            {
                throw UsageError(settings.locating(
                    "\(bundle) holds no certificate or no private key: certificate auth needs both in one bundle (made with "
                        + "`openssl pkcs12 -export -in cert.pem -inkey key.pem`), or cert_file with key_file", section: "apns"))
            }
            do {
                lanes[.apns] = try APNSProvider(
                    settings: apns,
                    options: APNSProvider.Options(allowReadableKeys: allowReadableKeys),
                    logger: laneLogger(logger, "apns")
                )
            } catch {
                throw UsageError(settings.locating("\(error)", section: "apns"))
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
                throw UsageError(settings.locating("\(error)", section: "fcm"))
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
                throw UsageError(settings.locating("\(error)", section: "legacy_apns"))
            }
        }
        return lanes
    }

    /// Refuses a campaign whose `ios_transport` names a lane the providers file does not configure: every iOS
    /// recipient would halt the run (the default, `http2`, is not checked here: a providers file without `apns:` is
    /// fine for a segment with no iOS device).
    /// - Throws: ``UsageError`` naming the campaign's key and the section the providers file lacks.
    static func checkTransport(_ campaign: Campaign, lanes: LanePacing.Lanes, providersPath: String) throws {
        let lane = campaign.iosTransport.provider
        guard campaign.iosTransport != .http2, lanes.providers[lane] == nil else { return }
        let disabled = lane == .legacyAPNs ? " (or its `enabled:` is false)" : ""
        throw UsageError(
            "\(campaign.sourcePath ?? campaign.name): ios_transport: \(campaign.iosTransport.rawValue) sends iOS devices through "
                + "its \(lane.providersSection) lane, but \(providersPath) has no `\(lane.providersSection):` section\(disabled)")
    }

    /// Lanes a platform of the campaign would need that the providers file does not configure, as notes: a run halts
    /// before sending when its segment holds such a device.
    static func missingLaneNotes(_ campaign: Campaign, lanes: LanePacing.Lanes) -> [String] {
        var needs: [ProviderKind: [Platform]] = [:]
        for platform in Platform.allCases where lanes.providers[campaign.provider(for: platform)] == nil {
            needs[campaign.provider(for: platform), default: []].append(platform)
        }
        return needs.sorted { $0.key.rawValue < $1.key.rawValue }.map { lane, platforms in
            "no `\(lane.providersSection):` section: \(platforms.map(\.rawValue).joined(separator: " and ")) devices in the segment "
                + "would halt the run before sending"
        }
    }

    private static func laneLogger(_ logger: Logger, _ provider: String) -> Logger {
        var logger = logger
        logger[metadataKey: "provider"] = "\(provider)"
        return logger
    }
}
