import BugleCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL

/// A fixed number of HTTP/2 connections to one TLS endpoint (APNs, FCM, an OAuth2 token endpoint),
/// multiplexing requests across them.
///
/// - Each connection carries at most the server's `SETTINGS_MAX_CONCURRENT_STREAMS` requests (1 until the
///   server's SETTINGS arrive; decreases apply to new streams at once).
/// - A lease goes to the least-loaded ready connection; when all are full, callers wait in FIFO order
///   until a stream frees up or their deadline passes.
/// - GOAWAY: the connection takes no new streams, drains, closes; its slot reconnects at once, unless the connection
///   went away (GOAWAY or close) before answering any request: then the slot backs off as after a failed connect, so
///   a server that closes every new connection is not hammered.
/// - Connect/TLS failures back off exponentially with full jitter (`base · 2^failures`, capped) per slot;
///   waiters fail fast with a safe-retry error when no connection is up or coming.
/// - Each connection is an ``HTTP2ClientSession`` over TLS; its writes leave once per event-loop tick, so many
///   concurrent requests share TLS records and `write` calls.
/// - State lives in one `NIOLockedValueBox`; the lock is never held across I/O or an `await`.
public final class HTTP2ConnectionPool: Sendable {
    /// Pool settings.
    public struct Configuration: Sendable {
        /// Server host name or IP literal (also the SNI name and the name the certificate must carry).
        public var host: String
        /// Server port.
        public var port: Int
        /// Number of connections.
        public var connections: Int
        /// TLS client configuration (ALPN must offer `h2`).
        public var tls: TLSConfiguration
        /// Name used in errors and logs ("APNs", "FCM").
        public var serviceName: String
        /// TCP connect timeout.
        public var connectTimeout: TimeAmount = .seconds(10)
        /// First reconnect backoff ceiling.
        public var backoffBase: TimeAmount = .milliseconds(100)
        /// Largest reconnect backoff.
        public var backoffCap: TimeAmount = .seconds(30)
        /// How often each connection sends an HTTP/2 PING (nil: never).
        public var pingInterval: TimeAmount? = .seconds(60)
        /// A PING unanswered this long closes its connection, and the pool reconnects.
        public var pingTimeout: TimeAmount = .seconds(20)
        /// The HTTP proxy every connection tunnels through (`CONNECT host:port`, over TLS to the proxy for an
        /// `https://` one), or nil to connect directly. The proxy has `connectTimeout` to answer.
        public var proxy: HTTPProxy?

        /// Creates pool settings.
        /// - Parameters:
        ///   - host: Server host.
        ///   - port: Server port.
        ///   - connections: Number of connections (at least 1 is used).
        ///   - tls: TLS client configuration.
        ///   - serviceName: Name for errors and logs.
        public init(host: String, port: Int, connections: Int, tls: TLSConfiguration, serviceName: String) {
            self.host = host
            self.port = port
            self.connections = connections
            self.tls = tls
            self.serviceName = serviceName
        }

        /// Lengthens ``pingTimeout`` to `requestTimeout` when requests may wait longer: a server slow to answer a PING
        /// is slow to answer its requests too, and closing the connection sooner than a request on it would time out
        /// loses every answer in flight on it (a lane given a 60 s timeout lost two connections' 100 requests each to
        /// the 20 s PING timeout on a starved machine).
        public mutating func waitForPings(asLongAsRequests requestTimeout: TimeAmount) {
            pingTimeout = max(pingTimeout, requestTimeout)
        }
    }

    private struct Entry {
        var connection: HTTP2Connection
        var inFlight = 0
        var maxStreams = 1
        var goingAway = false
        /// Whether any request on it was answered, and whether it was ever asked one.
        var answered = false
        var leased = false
        /// Whether it served its purpose: it answered, or nobody asked it anything (a server closing an idle
        /// connection is not a failure).
        var productive: Bool { answered || !leased }
        var leasable: Bool { !goingAway && inFlight < maxStreams }
    }

    private enum Slot {
        case empty(failures: Int, notBefore: NIODeadline)
        case connecting(failures: Int)
        /// `failures`: the slot's count before this connection (kept until the connection answers a request).
        case ready(connectionID: Int, failures: Int)
    }

    private struct Waiter {
        var id: Int
        var continuation: CheckedContinuation<HTTP2Connection, any Error>
    }

    private struct State {
        var slots: [Slot]
        var entries: [Int: Entry] = [:]
        /// SETTINGS that arrived before the connection was registered.
        var earlyMaxStreams: [Int: Int] = [:]
        var waiters: [Waiter] = []
        var waiterHead = 0
        var nextID = 0
        var lastConnectError = ""
        /// Connect attempts failed since the last connection succeeded, and when a failure was last logged as a warning:
        /// an unreachable provider is one warning (again when the reason changes, and each minute with the count), not a
        /// warning per connection slot per retry (80 in 3 s for a pool of 12).
        var failedConnects = 0
        var warnedConnectAt: NIODeadline?
        /// Set when a connection was refused for its configuration (a certificate in the handshake, or the proxy's
        /// tunnel), cleared by a connection that succeeds: while set, a request with no usable connection fails at once
        /// (``HTTP2TransportError/certificateRejected(_:)``, ``HTTP2TransportError/proxyRefused(_:)``).
        var rejection: HTTP2TransportError?
        /// The connection ``rejection`` came from: its own success does not clear it (TLS 1.3 refuses a client
        /// certificate after the client's handshake completed, and under load that refusal could come first).
        var rejectedConnection: Int?
        var isShutdown = false
        /// When the next timer that starts due connects fires (nil: none scheduled).
        var kickAt: NIODeadline?
        var random = SystemRandomNumberGenerator()

        var pendingWaiters: Int { waiters.count - waiterHead }
    }

    private enum Effect {
        case resume(CheckedContinuation<HTTP2Connection, any Error>, HTTP2Connection)
        case fail(CheckedContinuation<HTTP2Connection, any Error>, HTTP2TransportError)
        case connect(slot: Int, id: Int)
        case close(HTTP2Connection)
        case kick(at: NIODeadline)
    }

    private let configuration: Configuration
    private let sslContext: NIOSSLContext
    /// The proxy's handlers (nil: no proxy).
    private let tunnel: ProxyTunnel?
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    private let serverHostname: String?

    /// The SNI and host-name-check name for `host`: nil for an IP literal (NIOSSL then verifies the IP SAN).
    public static func serverHostname(_ host: String) -> String? {
        (try? SocketAddress(ipAddress: host, port: 0)) == nil ? host : nil
    }

    /// Creates a pool (connections open lazily on first use).
    /// - Parameters:
    ///   - configuration: Endpoint, TLS and limits.
    ///   - group: Event loops for the connections.
    ///   - logger: Logger (connection events only; never tokens or JWTs).
    /// - Throws: ``BugleCore/ProxyConfigurationError`` for an unusable `proxy_ca_file`; NIOSSL errors for an unusable
    ///   TLS configuration.
    public init(configuration: Configuration, group: any EventLoopGroup, logger: Logger) throws {
        self.configuration = configuration
        self.sslContext = try NIOSSLContext(configuration: configuration.tls)
        self.tunnel = try configuration.proxy.map(ProxyTunnel.init(proxy:))
        self.group = group
        self.logger = logger
        let now = NIODeadline.now()
        self.state = NIOLockedValueBox(
            State(slots: Array(repeating: .empty(failures: 0, notBefore: now), count: max(1, configuration.connections)))
        )
        // SNI and hostname checks use the name; for an IP literal NIOSSL verifies the IP SAN instead.
        self.serverHostname = Self.serverHostname(configuration.host)
    }

    // MARK: Leasing

    /// Leases a stream, sends one request on it and returns the answer.
    /// - Parameters:
    ///   - headers: Request headers including the pseudo-headers.
    ///   - body: Request body.
    ///   - deadline: Deadline for leasing, writing and the answer together.
    /// - Returns: The answer.
    /// - Throws: ``HTTP2TransportError``.
    public func execute(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline) async throws -> HTTP2Response {
        try await execute(headers: HTTP2HeaderBlock(headers), body: body, deadline: deadline)
    }

    /// Leases a stream, sends one request on it and returns the answer.
    /// - Parameters:
    ///   - headers: Request headers including the pseudo-headers, encoded.
    ///   - body: Request body.
    ///   - deadline: Deadline for leasing, writing and the answer together.
    /// - Returns: The answer.
    /// - Throws: ``HTTP2TransportError``.
    public func execute(headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline) async throws -> HTTP2Response {
        let connection = try await lease(deadline: deadline)
        defer { release(connection) }
        return try await connection.execute(headers: headers, body: body, deadline: deadline)
    }

    /// ``execute(headers:body:deadline:)`` for a request that may stop being wanted while it waits for a stream (its
    /// worker lost its lease meanwhile): `stillWanted` is asked once a stream is leased, before anything is written.
    /// - Returns: The answer, or nil when `stillWanted` said no: the stream was released and nothing was sent.
    /// - Throws: ``HTTP2TransportError``.
    public func execute(
        headers: HTTP2HeaderBlock, body: ByteBuffer, deadline: NIODeadline, stillWanted: () -> Bool
    ) async throws -> HTTP2Response? {
        let connection = try await lease(deadline: deadline)
        defer { release(connection) }
        guard stillWanted() else { return nil }
        return try await connection.execute(headers: headers, body: body, deadline: deadline)
    }

    /// Opens the connections ahead of the first request (waits for the first one, up to `deadline`).
    /// - Parameter deadline: How long to wait.
    public func warmUp(deadline: NIODeadline) async {
        if let connection = try? await lease(deadline: deadline) {
            release(connection)
        }
    }

    /// Leases a stream slot only if one is free now and nobody waits for one; call ``release(_:)`` afterwards.
    /// - Returns: The connection, or nil (then use ``lease(deadline:)``).
    public func leaseNow() -> HTTP2Connection? {
        state.withLockedValue { state in
            guard !state.isShutdown, state.pendingWaiters == 0 else { return nil }
            return Self.leaseLocked(&state)
        }
    }

    /// Leases a stream slot on some connection.
    /// - Parameter deadline: Give up (``HTTP2TransportError/notWritten(_:)``) after this.
    /// - Returns: A connection with one stream reserved for the caller; call ``release(_:)`` afterwards.
    /// - Throws: ``HTTP2TransportError``.
    public func lease(deadline: NIODeadline) async throws -> HTTP2Connection {
        // Usually a stream is free now: take it with one lock and no suspension (unless others wait before us).
        let (free, waiterID) = state.withLockedValue { state -> (HTTP2Connection?, Int) in
            if !state.isShutdown, state.pendingWaiters == 0, let connection = Self.leaseLocked(&state) {
                return (connection, 0)
            }
            state.nextID += 1
            return (nil, state.nextID)
        }
        if let free { return free }
        return try await withCheckedThrowingContinuation { continuation in
            let effects = state.withLockedValue { state -> [Effect] in
                if state.isShutdown {
                    return [.fail(continuation, .shutdown)]
                }
                if let connection = Self.leaseLocked(&state) {
                    return [.resume(continuation, connection)]
                }
                // A refused certificate or proxy is not waited out: no usable connection means the request fails now.
                if state.rejection != nil, !Self.hasUsableConnectionLocked(state) {
                    return [.fail(continuation, Self.connectError(state, serviceName: configuration.serviceName))]
                }
                state.waiters.append(Waiter(id: waiterID, continuation: continuation))
                return Self.connectIfNeededLocked(&state)
            }
            run(effects)
            // Deadline for waiting (only armed when we actually wait).
            let stillWaiting = state.withLockedValue { state in
                state.waiters[state.waiterHead...].contains { $0.id == waiterID }
            }
            if stillWaiting {
                group.next().scheduleTask(deadline: deadline) { [self] in
                    self.timeOutWaiter(id: waiterID)
                }
            }
        }
    }

    /// Returns a stream slot.
    /// - Parameter connection: The leased connection.
    public func release(_ connection: HTTP2Connection) {
        let effects = state.withLockedValue { state -> [Effect] in
            var effects: [Effect] = []
            if var entry = state.entries[connection.id] {
                entry.inFlight -= 1
                if entry.goingAway && entry.inFlight == 0 {
                    state.entries[connection.id] = nil
                    effects.append(.close(connection))
                } else {
                    state.entries[connection.id] = entry
                }
            }
            effects += Self.serveWaitersLocked(&state)
            return effects
        }
        run(effects)
    }

    /// Closes every connection and fails waiters.
    public func shutdown() async {
        let (connections, waiters) = state.withLockedValue { state -> ([HTTP2Connection], [Waiter]) in
            state.isShutdown = true
            let waiters = Array(state.waiters[state.waiterHead...])
            state.waiters.removeAll()
            state.waiterHead = 0
            return (state.entries.values.map(\.connection), waiters)
        }
        for waiter in waiters { waiter.continuation.resume(throwing: HTTP2TransportError.shutdown) }
        for connection in connections {
            try? await connection.channel.close()
        }
    }

    /// The current per-connection stream limits (for tests and diagnostics).
    public func streamLimits() -> [Int] {
        state.withLockedValue { $0.entries.values.map(\.maxStreams) }
    }

    // MARK: Locked helpers (pure state transitions)

    private static func leaseLocked(_ state: inout State) -> HTTP2Connection? {
        var bestID: Int?
        var bestLoad = Int.max
        for (id, entry) in state.entries where entry.leasable && entry.inFlight < bestLoad {
            bestID = id
            bestLoad = entry.inFlight
        }
        guard let bestID, var entry = state.entries[bestID] else { return nil }
        entry.inFlight += 1
        entry.leased = true
        state.entries[bestID] = entry
        return entry.connection
    }

    private static func serveWaitersLocked(_ state: inout State) -> [Effect] {
        var effects: [Effect] = []
        while state.pendingWaiters > 0, let connection = leaseLocked(&state) {
            let waiter = state.waiters[state.waiterHead]
            state.waiterHead += 1
            effects.append(.resume(waiter.continuation, connection))
        }
        compactLocked(&state)
        return effects
    }

    private static func compactLocked(_ state: inout State) {
        if state.waiterHead > 1024 && state.waiterHead * 2 > state.waiters.count {
            state.waiters.removeFirst(state.waiterHead)
            state.waiterHead = 0
        } else if state.waiterHead == state.waiters.count {
            state.waiters.removeAll(keepingCapacity: true)
            state.waiterHead = 0
        }
    }

    /// Starts connects for empty slots that are due, when someone is waiting. Not while a refusal stands (a certificate
    /// or a proxy refused a connection for its configuration) and no connection works: dialling again would be refused
    /// again, and the waiters fail once the connects already on their way end
    /// (``failWaitersIfHopelessLocked(_:serviceName:)``). With a working connection, slots are dialled as before.
    private static func connectIfNeededLocked(_ state: inout State) -> [Effect] {
        guard state.pendingWaiters > 0, !state.isShutdown, state.rejection == nil || hasUsableConnectionLocked(state) else { return [] }
        let now = NIODeadline.now()
        var effects: [Effect] = []
        var earliest: NIODeadline?
        for index in state.slots.indices {
            guard case .empty(let failures, let notBefore) = state.slots[index] else { continue }
            if notBefore <= now {
                state.nextID += 1
                state.slots[index] = .connecting(failures: failures)
                effects.append(.connect(slot: index, id: state.nextID))
            } else {
                earliest = min(earliest ?? notBefore, notBefore)
            }
        }
        // A slot due sooner than the timer already set (one slot backing off 100 ms while another waits 20 s) gets a
        // timer of its own: each slot reconnects when its own backoff ends.
        if let earliest, state.kickAt.map({ earliest < $0 }) ?? true {
            state.kickAt = earliest
            effects.append(.kick(at: earliest))
        }
        return effects
    }

    /// Fails waiters when no connection is usable or on its way.
    private static func failWaitersIfHopelessLocked(_ state: inout State, serviceName: String) -> [Effect] {
        let anyUsable = hasUsableConnectionLocked(state)
        let anyConnecting = state.slots.contains {
            if case .connecting = $0 { return true }
            return false
        }
        guard !anyUsable, !anyConnecting else { return [] }
        let waiters = state.waiters[state.waiterHead...]
        state.waiters.removeAll(keepingCapacity: true)
        state.waiterHead = 0
        let error = Self.connectError(state, serviceName: serviceName)
        return waiters.map { .fail($0.continuation, error) }
    }

    /// Whether some open connection still takes new streams (now or once one frees up).
    private static func hasUsableConnectionLocked(_ state: State) -> Bool {
        state.entries.values.contains { !$0.goingAway }
    }

    /// What a request fails with when no connection can be had: the refusal, or the last connect error.
    private static func connectError(_ state: State, serviceName: String) -> HTTP2TransportError {
        switch state.rejection {
        case .certificateRejected(let reason): return .certificateRejected("cannot connect to \(serviceName): \(reason)")
        case .proxyRefused(let reason): return .proxyRefused("cannot connect to \(serviceName): \(reason)")
        default: return .notWritten("cannot connect to \(serviceName): \(state.lastConnectError)")
        }
    }

    private func backoff(failures: Int, random: inout SystemRandomNumberGenerator) -> TimeAmount {
        let base = configuration.backoffBase.nanoseconds
        let cap = configuration.backoffCap.nanoseconds
        let exponent = min(failures, 30)
        let ceiling = min(cap, base << Int64(exponent))
        return .nanoseconds(Int64.random(in: 0...max(ceiling, 1), using: &random))
    }

    // MARK: Effects

    private func run(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .resume(let continuation, let connection):
                continuation.resume(returning: connection)
            case .fail(let continuation, let error):
                continuation.resume(throwing: error)
            case .connect(let slot, let id):
                connect(slot: slot, id: id)
            case .close(let connection):
                connection.close()
            case .kick(let deadline):
                group.next().scheduleTask(deadline: deadline) { [self] in
                    let effects = self.state.withLockedValue { state -> [Effect] in
                        if state.kickAt == deadline { state.kickAt = nil }
                        return Self.connectIfNeededLocked(&state)
                    }
                    self.run(effects)
                }
            }
        }
    }

    private func timeOutWaiter(id: Int) {
        let continuation = state.withLockedValue { state -> CheckedContinuation<HTTP2Connection, any Error>? in
            guard let index = state.waiters[state.waiterHead...].firstIndex(where: { $0.id == id }) else {
                return nil
            }
            let waiter = state.waiters.remove(at: index)
            return waiter.continuation
        }
        continuation?.resume(throwing: HTTP2TransportError.timeout(written: false))
    }

    // MARK: Connections

    private func connect(slot: Int, id: Int) {
        let readyPromise = group.next().makePromise(of: Void.self)
        let readyCompleted = NIOLockedValueBox(false)
        // Why this connection failed, when a handler said so (a refused tunnel, a TLS alert) before it closed.
        let failure = NIOLockedValueBox<String?>(nil)
        // The promise is completed exactly once: by the handshake, by an early close, or by a failed connect.
        let completeReady: @Sendable (Result<Void, any Error>) -> Void = { result in
            let first = readyCompleted.withLockedValue { done -> Bool in
                defer { done = true }
                return !done
            }
            if first { readyPromise.completeWith(result) }
        }
        let events = HTTP2ConnectionHandler.Events(
            ready: { completeReady(.success(())) },
            maxConcurrentStreams: { [self] value in self.updateMaxStreams(id: id, value: value) },
            goAway: { [self] lastStreamID, code, debugData in self.goAway(id: id, lastStreamID: lastStreamID, code: code, debugData: debugData) },
            answered: { [self] in self.answered(id: id) },
            failed: { [self] message in
                failure.withLockedValue { $0 = message }
                self.state.withLockedValue { $0.lastConnectError = message }
            },
            closedUnanswered: { [self] count in
                // Those requests come back lost after their write (maybe delivered): the run records them as its
                // policy for lost answers says, and this says why.
                let why = failure.withLockedValue { $0 } ?? "closed by the server or the network"
                logger.warning(
                    "\(configuration.serviceName) connection closed with requests written and unanswered",
                    metadata: ["connection": "\(id)", "unanswered": "\(count)", "reason": "\(why)"])
            },
            rejected: { [self] rejection in
                self.state.withLockedValue {
                    $0.rejection = rejection
                    $0.rejectedConnection = id
                }
            }
        )
        let sslContext = self.sslContext
        let serverHostname = self.serverHostname
        let keepalive = configuration.pingInterval.map {
            HTTP2ConnectionHandler.Keepalive(interval: $0, timeout: configuration.pingTimeout)
        }

        let tunnel = self.tunnel
        let (host, port) = (configuration.host, configuration.port)
        let proxyTimeout = configuration.connectTimeout
        let serviceName = configuration.serviceName
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try tunnel?.addHandlers(to: sync, host: host, port: port, timeout: proxyTimeout)
                    try sync.addHandler(TLSClientHandlers.make(context: sslContext, serverHostname: serverHostname))
                    try sync.addHandler(HTTP2ClientSession(serviceName: serviceName))
                    try sync.addHandler(HTTP2ConnectionHandler(events: events, keepalive: keepalive))
                }
            }
        bootstrap.connect(host: host, port: port, through: tunnel)
            .flatMap { channel -> EventLoopFuture<HTTP2Connection> in
                channel.closeFuture.whenComplete { [self] _ in
                    let why = failure.withLockedValue { $0 } ?? "connection closed during the TLS handshake"
                    completeReady(.failure(HTTP2TransportError.notWritten(why)))
                    self.connectionClosed(id: id, slot: slot)
                }
                // The session is looked up now, while the pipeline is whole: a connection closed right after it
                // became ready has an empty pipeline by the time `ready` is read.
                let session: HTTP2ClientSession
                do {
                    session = try channel.pipeline.syncOperations.handler(type: HTTP2ClientSession.self)
                } catch {
                    // Closed before it could be looked up (a proxy that answered 502 and hung up at once): the close
                    // fails `readyPromise` with the connection's own reason, which is what to report, not `notFound`.
                    return readyPromise.futureResult.hop(to: channel.eventLoop).flatMapThrowing { _ in throw error }
                }
                // The session is a handler of this channel: read back on its event loop only.
                let bound = NIOLoopBound(session, eventLoop: channel.eventLoop)
                return readyPromise.futureResult.hop(to: channel.eventLoop).map { _ in
                    HTTP2Connection(id: id, channel: channel, session: bound.value)
                }
            }
            .whenComplete { [self] result in
                switch result {
                case .success(let connection):
                    self.connected(connection, slot: slot)
                case .failure(let error):
                    completeReady(.failure(error))
                    self.connectFailed(slot: slot, error: error)
                }
            }
    }

    private func connected(_ connection: HTTP2Connection, slot: Int) {
        var recovered = 0
        let effects = state.withLockedValue { state -> [Effect] in
            if state.isShutdown { return [.close(connection)] }
            guard connection.channel.isActive, state.rejectedConnection != connection.id else {
                // Closed, or refused, as it became ready: what waits fails now if nothing else can serve it (a refusal
                // stands, so it is not dialled again).
                state.slots[slot] = .empty(failures: 0, notBefore: .now())
                let closing: [Effect] = connection.channel.isActive ? [.close(connection)] : []
                return closing + Self.connectIfNeededLocked(&state) + Self.failWaitersIfHopelessLocked(&state, serviceName: configuration.serviceName)
            }
            state.rejection = nil
            state.rejectedConnection = nil
            if state.failedConnects > 0 { recovered = state.failedConnects }
            state.failedConnects = 0
            state.warnedConnectAt = nil
            var entry = Entry(connection: connection)
            // SETTINGS may have arrived before we got here.
            if let early = state.earlyMaxStreams.removeValue(forKey: connection.id) { entry.maxStreams = early }
            state.entries[connection.id] = entry
            var failures = 0
            if case .connecting(let before) = state.slots[slot] { failures = before }
            state.slots[slot] = .ready(connectionID: connection.id, failures: failures)
            return Self.serveWaitersLocked(&state)
        }
        logger.debug("\(configuration.serviceName) connection ready", metadata: ["connection": "\(connection.id)"])
        if recovered > 0 {
            logger.notice("\(configuration.serviceName) connected again", metadata: ["failed_attempts": "\(recovered)"])
        }
        run(effects)
    }

    private func connectFailed(slot: Int, error: any Error) {
        // This attempt's own failure (a handler's message travels as `notWritten`), never an earlier connection's.
        let message: String
        if case .notWritten(let why)? = error as? HTTP2TransportError {
            message = why
        } else {
            // Also TCP to the proxy itself (``ProxyUnreachable``); the tunnel's own failures arrive as `notWritten`.
            message = NetworkErrorText.describe(error)
        }
        let (effects, rejection, warn) = state.withLockedValue { state -> ([Effect], HTTP2TransportError?, Int?) in
            guard case .connecting(let failures) = state.slots[slot] else { return ([], nil, nil) }
            let now = NIODeadline.now()
            let delay = backoff(failures: failures, random: &state.random)
            state.slots[slot] = .empty(failures: failures + 1, notBefore: now + delay)
            state.failedConnects += 1
            var warn: Int?
            if message != state.lastConnectError || state.warnedConnectAt.map({ now - $0 >= .seconds(60) }) ?? true {
                warn = state.failedConnects
                state.warnedConnectAt = now
            }
            state.lastConnectError = message
            return (Self.failWaitersIfHopelessLocked(&state, serviceName: configuration.serviceName), state.rejection, warn)
        }
        let reason: String
        switch rejection {
        case .certificateRejected(let why)?, .proxyRefused(let why)?: reason = why
        default: reason = message
        }
        if let failed = warn {
            var metadata: Logger.Metadata = ["error": "\(reason)"]
            if failed > 1 { metadata["failed_attempts"] = "\(failed)" }
            logger.warning("\(configuration.serviceName) connect failed", metadata: metadata)
        } else {
            logger.debug("\(configuration.serviceName) connect failed", metadata: ["error": "\(reason)"])
        }
        run(effects)
    }

    private func updateMaxStreams(id: Int, value: Int) {
        let effects = state.withLockedValue { state -> [Effect] in
            if var entry = state.entries[id] {
                entry.maxStreams = value
                state.entries[id] = entry
            } else {
                state.earlyMaxStreams[id] = value
            }
            return Self.serveWaitersLocked(&state)
        }
        run(effects)
    }

    private func answered(id: Int) {
        state.withLockedValue { state in
            state.entries[id]?.answered = true
        }
    }

    /// The slot of connection `id` is free again: at once when the connection answered a request, else after a backoff
    /// (the server closed it, or is closing it, before answering anything).
    private func slotFreedLocked(_ state: inout State, slot index: Int, id: Int, answered: Bool) {
        guard case .ready(let connectionID, let failures) = state.slots[index], connectionID == id else { return }
        if answered {
            state.slots[index] = .empty(failures: 0, notBefore: .now())
        } else {
            state.slots[index] = .empty(failures: failures + 1, notBefore: .now() + backoff(failures: failures, random: &state.random))
        }
    }

    private func goAway(id: Int, lastStreamID: Int, code: UInt32, debugData: String) {
        let (effects, answered) = state.withLockedValue { state -> ([Effect], Bool) in
            var effects: [Effect] = []
            let answered = state.entries[id]?.productive ?? true
            if var entry = state.entries[id] {
                entry.goingAway = true
                if entry.inFlight == 0 {
                    state.entries[id] = nil
                    effects.append(.close(entry.connection))
                } else {
                    state.entries[id] = entry
                }
            }
            for index in state.slots.indices {
                slotFreedLocked(&state, slot: index, id: id, answered: answered)
            }
            return (effects + Self.connectIfNeededLocked(&state), answered)
        }
        // Routine (a drained connection the server retires) at debug; a GOAWAY with an error code, or before any
        // answer, at notice, with the server's debug data (APNs: `{"reason":"…"}`).
        let metadata: Logger.Metadata = ["connection": "\(id)", "code": "\(code)", "debug": "\(debugData)", "answered": "\(answered)"]
        if code == 0 && answered {
            logger.debug("\(configuration.serviceName) GOAWAY", metadata: metadata)
        } else {
            logger.notice("\(configuration.serviceName) closed the connection with GOAWAY", metadata: metadata)
        }
        run(effects)
    }

    private func connectionClosed(id: Int, slot: Int) {
        let effects = state.withLockedValue { state -> [Effect] in
            let answered = state.entries.removeValue(forKey: id)?.productive ?? true
            state.earlyMaxStreams[id] = nil
            slotFreedLocked(&state, slot: slot, id: id, answered: answered)
            return Self.connectIfNeededLocked(&state) + Self.failWaitersIfHopelessLocked(&state, serviceName: configuration.serviceName)
        }
        run(effects)
    }
}
