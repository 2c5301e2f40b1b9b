import BugleCore
import BugleHTTP2
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// One gateway connection at a time, with its queue of notifications to write and its
/// ``LegacyAPNSResendBuffer`` of written, unconfirmed ones.
///
/// Every send waits on a continuation that is resumed exactly once, when its fate is known: delivered
/// (quiet period passed, or an error response named a later identifier), the classified status of an error
/// response that named it, ambiguous (the connection closed silently while it was unconfirmed), or a
/// retry when it could not be written.
///
/// `@unchecked Sendable`: apart from the `inbox` (behind a lock, filled from any thread), every stored
/// `var` is read and written only on `eventLoop`, which also runs every channel callback of the slot's
/// connections; methods that touch that state assert it.
final class LegacyAPNSConnectionSlot: @unchecked Sendable {
    /// A notification waiting to be written, or written and unconfirmed.
    struct Pending {
        var identifier: UInt32
        var frame: ByteBuffer
        var continuation: CheckedContinuation<SendOutcome, Never>
        /// How many times it was written again after the gateway discarded it.
        var resends: Int
    }

    /// Slot settings.
    struct Configuration {
        var host: String
        var port: Int
        var sslContext: NIOSSLContext
        /// The proxy tunnel every connection opens first (nil: connect directly).
        var tunnel: ProxyTunnel?
        var connectTimeout: TimeAmount
        var quietPeriod: TimeAmount
        var resendLimit: Int
        /// A write batch that has not reached the socket by then means the gateway stopped reading: the
        /// connection is closed (its unconfirmed notifications become ambiguous).
        var writeTimeout: TimeAmount = .seconds(30)
        /// After an error response the new connection ramps up: at most `rampStart` frames in the first
        /// `rampInterval`, doubling each interval without an error until `rampLimit`. Everything written after a
        /// failing notification is discarded by the gateway, so a smaller burst after an error means fewer
        /// resends when the next invalid token is near (an efficiency heuristic; correctness does not depend on it).
        var rampStart = 32
        var rampInterval: TimeAmount = .milliseconds(5)
        var rampLimit = 4096
        var backoffBase: TimeAmount = .milliseconds(100)
        var backoffCap: TimeAmount = .seconds(30)
        /// Consecutive connect failures after which queued sends are failed instead of waiting.
        var failFastAfter: Int = 3
    }

    private enum ConnectionState {
        case idle
        case connecting(generation: Int, channel: (any Channel)?)
        case ready(generation: Int, channel: any Channel)
    }

    let eventLoop: any EventLoop
    private let configuration: Configuration
    private let serverHostname: String?
    private let statistics: NIOLockedValueBox<LegacyAPNSLaneStatistics>
    private let logger: Logger
    private let inbox = NIOLockedValueBox<[Pending]>([])

    // Event-loop state.
    private var connection = ConnectionState.idle
    private var generation = 0
    private var pending = CircularBuffer<Pending>()
    private var buffer = LegacyAPNSResendBuffer<Pending>()
    private var tick: Scheduled<Void>?
    /// Frames allowed in the current ramp interval (nil = no ramp: write everything queued).
    private var rampWindow: Int?
    private var rampBudget = 0
    private var rampTimer: Scheduled<Void>?
    private var reconnect: Scheduled<Void>?
    private var consecutiveConnectFailures = 0
    private var notBefore = NIODeadline.uptimeNanoseconds(0)
    private var lastConnectError = ""
    /// Why the last connection was refused in a way no reconnect fixes (a certificate in the handshake, a proxy's
    /// refusal of the tunnel); cleared by a handshake that succeeds.
    private var refusal: LegacyAPNSConnectionHandler.Refusal?
    private var isShutDown = false
    private var shutdownPromise: EventLoopPromise<Void>?
    private var random = SystemRandomNumberGenerator()

    init(
        eventLoop: any EventLoop,
        configuration: Configuration,
        statistics: NIOLockedValueBox<LegacyAPNSLaneStatistics>,
        logger: Logger
    ) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.serverHostname = LegacyAPNSClientTLS.serverHostname(for: configuration.host)
        self.statistics = statistics
        self.logger = logger
    }

    // MARK: Entry points (any thread)

    /// Queues a notification; its continuation is resumed once its fate is known.
    /// - Parameter pending: The encoded frame and the caller's continuation.
    func enqueue(_ pending: Pending) {
        let first = inbox.withLockedValue { inbox -> Bool in
            inbox.append(pending)
            return inbox.count == 1
        }
        // One hop per batch: sends arriving while a hop is queued ride along and share one flush.
        if first {
            eventLoop.execute { self.takeInbox() }
        }
    }

    /// Stops taking notifications: queued ones are handed back as safe retries, written ones are given the
    /// quiet period to be confirmed (at most twice the quiet period plus a second), then the connection closes.
    /// - Returns: A future that completes when the slot is closed.
    func shutdown() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            self.isShutDown = true
            self.takeInbox()
            self.failPending(.retry(.safe, code: "shutdown", after: nil))
            self.reconnect?.cancel()
            self.reconnect = nil
            if self.buffer.isEmpty {
                self.closeConnection()
                return self.eventLoop.makeSucceededVoidFuture()
            }
            let promise = self.shutdownPromise ?? self.eventLoop.makePromise(of: Void.self)
            self.shutdownPromise = promise
            let grace = self.configuration.quietPeriod * 2 + .seconds(1)
            self.eventLoop.scheduleTask(in: grace) { self.finishShutdown() }
            return promise.futureResult
        }
    }

    // MARK: Queue and writes (event loop)

    private func takeInbox() {
        eventLoop.assertInEventLoop()
        let items = inbox.withLockedValue { inbox -> [Pending] in
            defer { inbox.removeAll(keepingCapacity: true) }
            return inbox
        }
        guard !items.isEmpty else { return }
        if isShutDown {
            for item in items { item.continuation.resume(returning: .retry(.safe, code: "shutdown", after: nil)) }
            return
        }
        pending.append(contentsOf: items)
        drain()
    }

    /// Writes everything queued when a connection is ready, or gets one.
    private func drain() {
        eventLoop.assertInEventLoop()
        guard !pending.isEmpty else { return }
        switch connection {
        case .ready(let generation, let channel):
            write(to: channel, generation: generation)
        case .connecting:
            return
        case .idle:
            if isShutDown {
                failPending(.retry(.safe, code: "shutdown", after: nil))
                return
            }
            let now = NIODeadline.now()
            if now < notBefore {
                if let outcome = hopelessOutcome() {
                    failPending(outcome)
                } else if reconnect == nil {
                    reconnect = eventLoop.scheduleTask(deadline: notBefore) {
                        self.reconnect = nil
                        self.drain()
                    }
                }
                return
            }
            connect()
        }
    }

    private func write(to channel: any Channel, generation: Int) {
        var lastSequence = -1
        var count = pending.count
        if rampWindow != nil {
            count = min(count, rampBudget)
            rampBudget -= count
            if rampTimer == nil { startRampInterval() }
            guard count > 0 else { return }
        }
        let promise = eventLoop.makePromise(of: Void.self)
        for index in 0..<count {
            let item = pending.removeFirst()
            lastSequence = buffer.append(identifier: item.identifier, element: item)
            channel.write(item.frame, promise: index == count - 1 ? promise : nil)
        }
        channel.flush()
        let through = lastSequence
        let stalled = eventLoop.scheduleTask(in: configuration.writeTimeout) {
            guard case .ready(let current, let channel) = self.connection, current == generation else { return }
            self.logger.warning("legacy APNs gateway stopped reading; closing the connection")
            channel.close(promise: nil)
        }
        promise.futureResult.whenComplete { result in
            stalled.cancel()
            guard case .success = result, case .ready(let current, _) = self.connection, current == generation else { return }
            self.buffer.markWritten(through: through, at: .now())
            self.scheduleTick()
        }
    }

    /// Ends the current ramp interval after `rampInterval`: no error meanwhile doubles the allowance (or ends
    /// the ramp at `rampLimit`), then queued frames are written.
    private func startRampInterval() {
        rampTimer = eventLoop.scheduleTask(in: configuration.rampInterval) {
            self.rampTimer = nil
            guard let window = self.rampWindow else { return }
            let doubled = window * 2
            self.rampWindow = doubled >= self.configuration.rampLimit ? nil : doubled
            self.rampBudget = doubled
            self.drain()
        }
    }

    /// Arms the quiet-period timer for the oldest written entry (at most ten wake-ups per quiet period).
    private func scheduleTick() {
        guard tick == nil, let oldest = buffer.oldestWrite else { return }
        let now = NIODeadline.now()
        let granularity = TimeAmount.nanoseconds(max(configuration.quietPeriod.nanoseconds / 10, 1_000_000))
        let deadline = max(oldest + configuration.quietPeriod, now + granularity)
        tick = eventLoop.scheduleTask(deadline: deadline) {
            self.tick = nil
            self.confirmQuiet()
        }
    }

    private func confirmQuiet() {
        let confirmed = buffer.confirm(now: .now(), quietPeriod: configuration.quietPeriod)
        if !confirmed.isEmpty {
            statistics.withLockedValue { $0.delivered += confirmed.count }
            for item in confirmed { item.continuation.resume(returning: .delivered(providerMessageID: nil)) }
        }
        if isShutDown && buffer.isEmpty {
            finishShutdown()
        } else {
            scheduleTick()
        }
    }

    // MARK: Connection events (event loop)

    private func connect() {
        generation += 1
        let generation = self.generation
        connection = .connecting(generation: generation, channel: nil)
        let sslContext = configuration.sslContext
        let serverHostname = self.serverHostname
        let tunnel = configuration.tunnel
        let (host, port) = (configuration.host, configuration.port)
        let proxyTimeout = configuration.connectTimeout
        ClientBootstrap(group: eventLoop)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let events = LegacyAPNSConnectionHandler.Events(
                        ready: { channel in self.connectionReady(generation: generation, channel: channel) },
                        errorResponse: { response in self.errorResponse(response, generation: generation) },
                        failed: { message in self.connectionFailed(message, generation: generation) },
                        refused: { refusal in self.refused(refusal, generation: generation) },
                        closed: { self.connectionClosed(generation: generation) }
                    )
                    let sync = channel.pipeline.syncOperations
                    try tunnel?.addHandlers(to: sync, host: host, port: port, timeout: proxyTimeout)
                    try sync.addHandler(TLSClientHandlers.make(context: sslContext, serverHostname: serverHostname))
                    try sync.addHandler(ByteToMessageHandler(LegacyAPNSErrorResponseDecoder()))
                    try sync.addHandler(LegacyAPNSConnectionHandler(events: events))
                }
            }
            .connect(host: host, port: port, through: tunnel)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    guard case .connecting(let current, _) = self.connection, current == generation else { return }
                    self.connection = .connecting(generation: generation, channel: channel)
                    // The TCP connect timeout does not cover the proxy's answer or the TLS handshake.
                    self.eventLoop.scheduleTask(in: self.configuration.connectTimeout * (tunnel == nil ? 1 : 2)) {
                        if case .connecting(let current, _) = self.connection, current == generation {
                            self.lastConnectError = "TLS handshake timed out"
                            channel.close(promise: nil)
                        }
                    }
                case .failure(let error):
                    self.connectFailed(NetworkErrorText.describe(error), generation: generation)
                }
            }
    }

    private func connectionReady(generation: Int, channel: any Channel) {
        guard case .connecting(let current, _) = connection, current == generation else { return }
        connection = .ready(generation: generation, channel: channel)
        consecutiveConnectFailures = 0
        refusal = nil
        statistics.withLockedValue { $0.connections += 1 }
        logger.debug("legacy APNs connection ready", metadata: ["connection": "\(generation)"])
        if isShutDown {
            closeConnection()
            return
        }
        drain()
    }

    private func connectionFailed(_ message: String, generation: Int) {
        if case .connecting(let current, _) = connection, current == generation {
            lastConnectError = message
        } else {
            logger.debug("legacy APNs connection error", metadata: ["connection": "\(generation)", "error": "\(message)"])
        }
    }

    private func refused(_ refusal: LegacyAPNSConnectionHandler.Refusal, generation: Int) {
        guard case .connecting(let current, _) = connection, current == generation else { return }
        self.refusal = refusal
        lastConnectError = refusal.reason
    }

    /// What pending sends fail with instead of waiting for the next connect: a certificate refused in the handshake, or
    /// a proxy refusing the tunnel for its configuration, halts the run (no reconnect can fix it, and nothing was
    /// written); enough failed connects in a row hand them back unsent, free, to be tried again after the next connect
    /// is due (at least a second: the lane pauses till then). They used to go back as provider retries, which an open
    /// lane charges to the recipient: a gateway down for 20 s failed most of a run for good. Nil: wait.
    private func hopelessOutcome() -> SendOutcome? {
        if let refusal {
            return .halt(code: refusal.code, message: "cannot connect to the legacy APNs gateway: \(refusal.reason)")
        }
        guard consecutiveConnectFailures >= configuration.failFastAfter else { return nil }
        return .retry(.safe, code: "connect_failed", after: .nanoseconds(max((notBefore - .now()).nanoseconds, 1_000_000_000)))
    }

    private func connectFailed(_ message: String, generation: Int) {
        guard case .connecting(let current, _) = connection, current == generation else { return }
        connection = .idle
        consecutiveConnectFailures += 1
        notBefore = .now() + backoff(failures: consecutiveConnectFailures)
        statistics.withLockedValue { $0.connectFailures += 1 }
        // The first failure of a streak and then the 2nd, 4th, 8th…: a gateway down for long is a few warnings per
        // slot, not one per retry; the others are debug lines.
        let failures = consecutiveConnectFailures
        logger.log(
            level: failures & (failures - 1) == 0 ? .warning : .debug,
            "legacy APNs connect failed",
            metadata: ["error": "\(message)", "consecutive_failures": "\(failures)"]
        )
        if let outcome = hopelessOutcome() { failPending(outcome) }
        drain()
    }

    /// The gateway named a notification: settle the whole buffer, then resend what it discarded on a new
    /// connection.
    private func errorResponse(_ response: LegacyAPNSErrorResponse, generation: Int) {
        guard case .ready(let current, let channel) = connection, current == generation else { return }
        connection = .idle
        channel.close(promise: nil)
        rampTimer?.cancel()
        rampTimer = nil
        if configuration.rampStart > 0 {
            rampWindow = configuration.rampStart
            rampBudget = configuration.rampStart
        }
        let resolution = buffer.errorResponse(response)
        let outcome = LegacyAPNSErrorClassifier.classify(response.status)
        var resent = 0
        var exhausted: [Pending] = []
        for item in resolution.resend.reversed() {
            if item.resends >= configuration.resendLimit {
                exhausted.append(item)
            } else {
                var again = item
                again.resends += 1
                pending.prepend(again)
                resent += 1
            }
        }
        statistics.withLockedValue {
            $0.errorResponses[response.status.name, default: 0] += 1
            $0.resent += resent
            $0.resendLimitReached += exhausted.count
            $0.delivered += resolution.delivered.count
        }
        let level: Logger.Level = response.status == .invalidToken ? .debug : .info
        logger.log(
            level: level,
            "legacy APNs error response",
            metadata: [
                "status": "\(response.status)", "identifier": "\(response.identifier)",
                "delivered": "\(resolution.delivered.count)", "resend": "\(resent)",
                "identifier_unknown": "\(resolution.identifierUnknown)",
            ]
        )
        for item in resolution.delivered { item.continuation.resume(returning: .delivered(providerMessageID: nil)) }
        resolution.failed?.continuation.resume(returning: outcome)
        for item in exhausted { item.continuation.resume(returning: .retry(.safe, code: "resend_limit", after: nil)) }
        if isShutDown && buffer.isEmpty { finishShutdown() }
        drain()
    }

    private func connectionClosed(generation: Int) {
        switch connection {
        case .connecting(let current, _) where current == generation:
            connectFailed(lastConnectError.isEmpty ? "connection closed during the TLS handshake" : lastConnectError, generation: generation)
        case .ready(let current, _) where current == generation:
            connection = .idle
            let lost = buffer.connectionClosed()
            if !lost.isEmpty {
                statistics.withLockedValue {
                    $0.silentCloses += 1
                    $0.ambiguous += lost.count
                }
                logger.warning("legacy APNs connection closed without an error response", metadata: ["unconfirmed": "\(lost.count)"])
            }
            for item in lost { item.continuation.resume(returning: .ambiguous(code: "connection_closed")) }
            if isShutDown {
                finishShutdown()
            } else {
                drain()
            }
        default:
            return
        }
    }

    // MARK: Helpers (event loop)

    private func failPending(_ outcome: SendOutcome) {
        while let item = pending.popFirst() {
            item.continuation.resume(returning: outcome)
        }
    }

    private func closeConnection() {
        switch connection {
        case .ready(_, let channel), .connecting(_, .some(let channel)):
            channel.close(promise: nil)
        case .connecting(_, .none), .idle:
            break
        }
    }

    /// Ends a shutdown: whatever is still unconfirmed is ambiguous.
    private func finishShutdown() {
        let lost = buffer.connectionClosed()
        for item in lost { item.continuation.resume(returning: .ambiguous(code: "shutdown")) }
        failPending(.retry(.safe, code: "shutdown", after: nil))
        closeConnection()
        connection = .idle
        tick?.cancel()
        tick = nil
        shutdownPromise?.succeed()
        shutdownPromise = nil
    }

    private func backoff(failures: Int) -> TimeAmount {
        let ceiling = min(configuration.backoffCap.nanoseconds, configuration.backoffBase.nanoseconds << Int64(min(failures, 30)))
        return .nanoseconds(Int64.random(in: 0...max(ceiling, 1), using: &random))
    }
}
