import BugleCore
import BugleHTTP2
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// The legacy binary APNs lane: command-2 frames over a pool of TLS connections authenticated by a client
/// certificate, with resend-after-error (PROTOCOLS.md §3, RELIABILITY.md §3.5).
///
/// ``send(_:)`` returns only when the notification's fate is known:
/// - `.delivered` once the quiet period passed after it reached the socket with no error response, or as
///   soon as an error response names a later identifier (the gateway works in order);
/// - the classified status (``LegacyAPNSErrorClassifier``) when an error response names it — status 8 is
///   `.invalidToken`, so the runner deactivates the device;
/// - notifications written after the one an error response names were discarded by the gateway: they are
///   written again on a new connection, once per error (status 10: everything after the last processed
///   identifier), never returned to the runner unless ``Options/resendLimit`` is reached;
/// - `.ambiguous("connection_closed")` when the connection closed without an error response while it was
///   unconfirmed (the campaign's ambiguous policy decides);
/// - local refusals: a token that is not 32 bytes of hex (`InvalidTokenSize`), an empty payload or one
///   over `payload_limit` (`payload_too_large`), without touching the network.
///
/// Each connection lives on one event loop with its state; no lock is held across I/O.
public final class LegacyAPNSProvider: PushProvider {
    /// Lane options that are not part of the providers file.
    public struct Options: Sendable {
        /// Accept a client key that group/others can read (`--allow-readable-keys`).
        public var allowReadableKeys: Bool
        /// Override of the providers file's `quiet_period`.
        public var quietPeriod: TimeAmount?
        /// Most times one notification is written again after gateways discarded it; past that it is
        /// handed back to the runner as a free retry (`resend_limit`).
        public var resendLimit: Int
        /// TCP connect timeout, and separately the TLS handshake timeout.
        public var connectTimeout: TimeAmount
        /// Longest time written frames may wait to reach the socket before the gateway counts as stalled and the
        /// connection is closed (its unconfirmed notifications become ambiguous).
        public var writeTimeout: TimeAmount
        /// Frames a connection opened after an error response may write in its first ``rampInterval``
        /// (doubling every interval without an error; 0 = no ramp). Everything written after a failing
        /// notification is discarded and resent, so a small first burst keeps resends small.
        public var rampStart: Int
        /// Length of one ramp step.
        public var rampInterval: TimeAmount
        /// Event loops for the connections (default: the shared singleton group).
        public var eventLoopGroup: (any EventLoopGroup)?
        /// Wall clock in UNIX seconds, for the default expiry of notifications without `apns-expiration`.
        public var wallClock: @Sendable () -> Double
        /// Where `https_proxy` / `all_proxy`, `no_proxy` and `proxy_credentials_env` are looked up.
        public var environment: [String: String]

        /// Creates options.
        /// - Parameters:
        ///   - allowReadableKeys: Accept a group/other-readable key file.
        ///   - quietPeriod: Override of `quiet_period`.
        ///   - resendLimit: Most resends per notification.
        ///   - connectTimeout: Connect and TLS handshake timeout.
        ///   - writeTimeout: Stalled-gateway timeout for writes.
        ///   - rampStart: First burst after an error response (0 = no ramp).
        ///   - rampInterval: Length of one ramp step.
        ///   - eventLoopGroup: Event loops (nil = `MultiThreadedEventLoopGroup.singleton`).
        ///   - wallClock: UNIX seconds now.
        ///   - environment: Where proxy variables are looked up (default: this process's environment).
        public init(
            allowReadableKeys: Bool = false,
            quietPeriod: TimeAmount? = nil,
            resendLimit: Int = 8,
            connectTimeout: TimeAmount = .seconds(10),
            writeTimeout: TimeAmount = .seconds(30),
            rampStart: Int = 32,
            rampInterval: TimeAmount = .milliseconds(5),
            eventLoopGroup: (any EventLoopGroup)? = nil,
            wallClock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
            environment: [String: String] = ProcessInfo.processInfo.environment
        ) {
            self.allowReadableKeys = allowReadableKeys
            self.quietPeriod = quietPeriod
            self.resendLimit = resendLimit
            self.connectTimeout = connectTimeout
            self.writeTimeout = writeTimeout
            self.rampStart = rampStart
            self.rampInterval = rampInterval
            self.eventLoopGroup = eventLoopGroup
            self.wallClock = wallClock
            self.environment = environment
        }
    }

    /// Storage time the gateway is asked for when the campaign sets no expiration: APNs' own default
    /// storage policy for HTTP/2 requests without `apns-expiration` (30 days).
    public static let defaultStorageSeconds: UInt32 = 30 * 86_400

    public var kind: ProviderKind { .legacyAPNs }

    private let settings: LegacyAPNsSettings
    private let options: Options
    private let sslContext: NIOSSLContext
    /// The proxy tunnel of the gateway's and the feedback service's connections (nil: direct).
    private let tunnel: ProxyTunnel?
    private let group: any EventLoopGroup
    private let slots: [LegacyAPNSConnectionSlot]
    private let counters = NIOLockedValueBox<(identifier: UInt32, slot: Int)>((0, 0))
    private let statisticsBox = NIOLockedValueBox(LegacyAPNSLaneStatistics())
    private let allocator = ByteBufferAllocator()
    private let logger: Logger

    /// Creates the lane from the providers file's `legacy_apns:` section (connections open on first use).
    /// - Parameters:
    ///   - settings: The `legacy_apns:` section.
    ///   - options: Lane options.
    ///   - logger: Logger (never receives tokens or key material).
    /// - Throws: ``LegacyAPNSConfigurationError`` for unusable certificate, key or CA files, or an unusable proxy.
    public init(settings: LegacyAPNsSettings, options: Options = Options(), logger: Logger) throws(LegacyAPNSConfigurationError) {
        self.settings = settings
        self.options = options
        self.logger = logger
        self.sslContext = try LegacyAPNSClientTLS.makeContext(settings: settings, allowReadableKeys: options.allowReadableKeys, logger: logger)
        do throws(ProxyConfigurationError) {
            self.tunnel = try ProxyTunnel.resolve(settings.proxy, caFile: settings.proxyCAFile, host: settings.host, environment: options.environment)
        } catch {
            throw .proxy(error)
        }
        if let tunnel { logger.info("legacy APNs connections go through the proxy \(tunnel.proxy)") }
        self.group = options.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        let quietPeriod = options.quietPeriod ?? .nanoseconds(Int64(settings.quietPeriodSeconds * 1e9))
        let configuration = LegacyAPNSConnectionSlot.Configuration(
            host: settings.host,
            port: settings.port,
            sslContext: sslContext,
            tunnel: tunnel,
            connectTimeout: options.connectTimeout,
            quietPeriod: quietPeriod,
            resendLimit: max(0, options.resendLimit),
            writeTimeout: options.writeTimeout,
            rampStart: max(0, options.rampStart),
            rampInterval: options.rampInterval
        )
        let statistics = statisticsBox
        let group = self.group
        self.slots = (0..<max(1, settings.connections)).map { index in
            var slotLogger = logger
            slotLogger[metadataKey: "slot"] = "\(index)"
            return LegacyAPNSConnectionSlot(
                eventLoop: group.next(),
                configuration: configuration,
                statistics: statistics,
                logger: slotLogger
            )
        }
    }

    /// Sends one notification and waits until its fate is known. Never throws; see the type's documentation.
    /// - Parameter request: The rendered notification (`body` is the APNs payload JSON).
    public func send(_ request: PushRequest) async -> SendOutcome {
        guard let token = LegacyAPNSHex.decode(request.token), token.count == 32 else {
            return .rejected(code: LegacyAPNSStatus.invalidTokenSize.name)
        }
        guard !request.body.isEmpty else { return .rejected(code: LegacyAPNSStatus.missingPayload.name) }
        guard request.body.count <= settings.payloadLimit else {
            return .rejected(code: SkipReason.payloadTooLarge.rawValue)
        }
        let (identifier, slotIndex) = counters.withLockedValue { counters -> (UInt32, Int) in
            counters.identifier &+= 1
            if counters.identifier == 0 { counters.identifier = 1 }
            counters.slot = (counters.slot + 1) % slots.count
            return (counters.identifier, counters.slot)
        }
        let notification = LegacyAPNSNotification(
            token: token,
            payload: request.body,
            identifier: identifier,
            expiry: expiry(request.apns),
            priority: Self.priority(request.apns)
        )
        var frame = allocator.buffer(capacity: notification.encodedLength)
        notification.encode(into: &frame)
        let slot = slots[slotIndex]
        return await withCheckedContinuation { continuation in
            slot.enqueue(.init(identifier: identifier, frame: frame, continuation: continuation, resends: 0))
        }
    }

    /// Hands back queued notifications as free retries, waits for written ones to be confirmed (bounded by
    /// the quiet period), and closes every connection.
    public func shutdown() async {
        for slot in slots {
            try? await slot.shutdown().get()
        }
    }

    /// Reads the feedback service once (it sends its whole list and closes; the list is then empty).
    /// - Parameter timeout: Longest time for connecting and reading.
    /// - Returns: The tuples received, in order.
    /// - Throws: ``LegacyAPNSFeedbackError``.
    public func fetchFeedback(timeout: TimeAmount = .seconds(30)) async throws -> [LegacyAPNSFeedbackTuple] {
        try await feedbackClient(timeout: timeout).fetch()
    }

    /// Reads the feedback service once, keeping the complete tuples received even when the stream then ends badly
    /// (see ``LegacyAPNSFeedbackClient/read()``).
    /// - Parameter timeout: Longest time for connecting and reading.
    /// - Throws: ``LegacyAPNSFeedbackError/connectFailed(_:)`` when no connection was made.
    public func readFeedback(timeout: TimeAmount = .seconds(30)) async throws -> LegacyAPNSFeedbackRead {
        try await feedbackClient(timeout: timeout).read()
    }

    /// A feedback client with this lane's TLS identity.
    /// - Parameter timeout: Longest time for connecting and reading.
    public func feedbackClient(timeout: TimeAmount = .seconds(30)) -> LegacyAPNSFeedbackClient {
        LegacyAPNSFeedbackClient(
            host: settings.host,
            port: settings.feedbackPort,
            sslContext: sslContext,
            tunnel: tunnel,
            group: group,
            timeout: timeout
        )
    }

    /// A snapshot of the lane's counters.
    public func statistics() -> LegacyAPNSLaneStatistics {
        statisticsBox.withLockedValue { $0 }
    }

    /// The frame's expiry: the campaign's `apns-expiration` when set, else now plus APNs' default storage.
    private func expiry(_ headers: APNsHeaders?) -> UInt32 {
        if let expiration = headers?.expiration {
            return UInt32(clamping: expiration)
        }
        let now = UInt32(clamping: Int64(options.wallClock()))
        return now &+ Self.defaultStorageSeconds
    }

    /// The frame's priority: 10 stays 10; 5 and 1 (which the binary protocol lacks) become 5.
    static func priority(_ headers: APNsHeaders?) -> UInt8 {
        guard let priority = headers?.priority else { return 10 }
        return priority >= 10 ? 10 : 5
    }
}
