import BugleCore

/// The pacing each lane gets: the providers file's `rate` and `concurrency`, lowered by the campaign's
/// `delivery.rate`, with FCM's documented project quota (600,000 messages a minute) as FCM's default ceiling.
///
/// The limits hold for the run: with several workers on it (`bugle worker`), each paces at its share, the rate
/// divided by the live workers, re-read at every lease renewal (``LanePacer/setWorkerShare(_:)``).
public enum LanePacing {
    /// FCM's default downstream quota per project, per second (600,000 per minute).
    public static let fcmDefaultRate = 10_000.0

    /// The limits of one lane.
    /// - Parameters:
    ///   - kind: The lane.
    ///   - settings: The providers file.
    ///   - campaign: The campaign (its `delivery.rate` may lower the rate).
    /// - Returns: The limits.
    public static func limits(for kind: ProviderKind, settings: ProviderSettings, campaign: Campaign) -> LanePacer.Limits {
        var rate: RateLimit?
        // Defaults: what the connections can carry at once (APNs announces 1000 streams per connection,
        // Google's front ends 100), so waiting happens in the pacer — where pauses are checked — and not in a
        // connection's stream queue.
        var concurrency = 1000
        switch kind {
        case .apns:
            rate = settings.apns?.rate
            concurrency = settings.apns?.concurrency ?? (settings.apns?.connections ?? 1) * 1000
        case .fcm:
            rate = settings.fcm?.rate ?? RateLimit(perSecond: fcmDefaultRate, burst: Int(fcmDefaultRate / 50))
            concurrency = settings.fcm?.concurrency ?? (settings.fcm?.connections ?? 1) * 100
        case .legacyAPNs:
            rate = settings.legacyAPNs?.rate
            concurrency = settings.legacyAPNs?.concurrency ?? concurrency
        case .none:
            break
        }
        var perSecond = rate?.perSecond
        if let lowered = campaign.delivery.rateLimits[kind] {
            perSecond = min(perSecond ?? lowered, lowered)
        }
        var burst = rate?.burst
        if let perSecond, let configured = burst {
            // A campaign that lowers the rate lowers the burst with it.
            burst = min(configured, max(1, Int((perSecond / 50).rounded(.up))))
        }
        return LanePacer.Limits(perSecond: perSecond, burst: burst, concurrency: concurrency)
    }

    /// Lanes ready for a run: each behind its pacer and instrumented.
    public struct Lanes: Sendable {
        /// What the runner sends through.
        public var providers: [ProviderKind: any PushProvider]
        /// Each lane's pacer (for the progress display).
        public var pacers: [ProviderKind: LanePacer]
        /// The lanes themselves, unwrapped (for lane-specific work such as the legacy feedback poll).
        public var unpaced: [ProviderKind: any PushProvider]

        /// Closes every lane.
        public func shutdown() async {
            for provider in providers.values { await provider.shutdown() }
        }
    }

    /// Wraps every lane in its pacer and its metrics.
    /// - Parameters:
    ///   - lanes: The lanes.
    ///   - settings: The providers file.
    ///   - campaign: The campaign.
    /// - Returns: The lanes to run with.
    public static func wrap(_ lanes: [ProviderKind: any PushProvider], settings: ProviderSettings, campaign: Campaign) -> Lanes {
        var result = Lanes(providers: [:], pacers: [:], unpaced: lanes)
        for (kind, lane) in lanes {
            let pacer = LanePacer(limits: limits(for: kind, settings: settings, campaign: campaign))
            result.pacers[kind] = pacer
            // The metrics inside the pacer: `bugle_in_flight` and `bugle_send_duration_seconds` count requests on the
            // wire, not sends waiting for the rate (a lane at 20/s showed 152 in flight and 2.3 s per send).
            result.providers[kind] = PacedProvider(InstrumentedProvider(lane, pacer: pacer), pacer: pacer)
        }
        return result
    }
}
