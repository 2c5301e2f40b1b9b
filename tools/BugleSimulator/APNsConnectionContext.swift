import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2

/// Per-connection state of the simulator: stream accounting (concurrency, GOAWAY and drop faults) and the
/// provider token currently bound to the connection. It is the connection's `NIOHTTP2StreamDelegate`.
/// All callbacks arrive on the connection's event loop; the lock keeps it `Sendable` without
/// `@unchecked` and costs an uncontended lock per call.
final class APNsConnectionContext: NIOHTTP2StreamDelegate, Sendable {
    private struct State {
        var channel: (any Channel)?
        var openStreams = 0
        var totalStreams = 0
        var highestStreamID = 0
        var goAwayLastStreamID: Int?
        var closing = false
        var currentJWT: String?
        var jwtSince: Double = 0
        /// The `MAX_CONCURRENT_STREAMS` last sent, and the connection's full limit.
        var advertised: Int
        var full: Int
        var authenticated: Bool
        var lowered = false
        /// Turned away at its first stream (`goAwayOnFirstStream`): nothing on it is processed.
        var turnedAway = false
    }

    /// The stream limits of a connection (see ``APNsSimulatorConfiguration``).
    struct StreamLimits: Sendable {
        /// The limit of an authenticated connection.
        var full: Int
        /// Token auth: the limit until a request carries a valid JWT (nil: `full` from the start).
        var beforeAuthentication: Int?
        /// The limit after a rejected request, until the next success (nil: never lowered).
        var afterRejection: Int?

        /// The limit a new connection advertises in its first SETTINGS.
        var initial: Int { beforeAuthentication ?? full }
    }

    /// 1-based connection id (in accept order).
    let id: Int
    private let ledger: APNsSimulatorLedger
    private let faults: APNsSimulatorConfiguration.Faults
    private let limits: StreamLimits
    private let state: NIOLockedValueBox<State>

    /// Creates the context of a new connection.
    /// - Parameters:
    ///   - id: Connection id.
    ///   - ledger: Shared counters.
    ///   - faults: Fault settings.
    ///   - limits: Its stream limits; the first SETTINGS carries `limits.initial`.
    init(id: Int, ledger: APNsSimulatorLedger, faults: APNsSimulatorConfiguration.Faults, limits: StreamLimits) {
        self.id = id
        self.ledger = ledger
        self.faults = faults
        self.limits = limits
        self.state = NIOLockedValueBox(State(advertised: limits.initial, full: limits.full, authenticated: limits.beforeAuthentication == nil))
    }

    /// Binds the parent (TCP) channel.
    func bind(_ channel: any Channel) {
        state.withLockedValue { $0.channel = channel }
    }

    func streamCreated(_ id: HTTP2StreamID, channel: any Channel) {
        let streamID = Int(id)
        let (open, unauthenticated, action): (Int, Bool, Action) = state.withLockedValue { state in
            let (open, action) = Self.opened(streamID, &state, faults: faults)
            return (open, !state.authenticated, action)
        }
        ledger.updateCounters { counters in
            counters.maxConcurrentStreamsObserved = max(counters.maxConcurrentStreamsObserved, open)
            if unauthenticated {
                counters.maxConcurrentStreamsBeforeAuthentication = max(counters.maxConcurrentStreamsBeforeAuthentication, open)
            }
        }
        switch action {
        case .none:
            break
        case .drop(let parent):
            ledger.updateCounters { $0.connectionsDropped += 1 }
            parent.eventLoop.execute { parent.close(promise: nil) }
        case .goAway(let parent):
            // Deferred so we do not re-enter NIOHTTP2Handler mid-frame; the last-stream-id is the highest
            // stream seen when the GOAWAY is actually written, and only those streams get processed.
            parent.eventLoop.execute { self.sendGoAway(on: parent, debugData: Self.shutdownReason) }
        case .turnAway(let parent, let debugData):
            parent.eventLoop.execute { self.sendGoAway(on: parent, lastStreamID: 0, debugData: debugData) }
        }
    }

    /// The debug data of a routine GOAWAY, as APNs writes it.
    static let shutdownReason = #"{"reason":"Shutdown"}"#

    private enum Action { case none, goAway(any Channel), drop(any Channel), turnAway(any Channel, String) }

    /// Counts a new stream and decides the faults it triggers. - Returns: the streams open now, and the fault.
    private static func opened(_ streamID: Int, _ state: inout State, faults: APNsSimulatorConfiguration.Faults) -> (Int, Action) {
        state.openStreams += 1
        state.totalStreams += 1
        state.highestStreamID = max(state.highestStreamID, streamID)
        guard !state.closing, let parent = state.channel else { return (state.openStreams, .none) }
        if let debugData = faults.goAwayOnFirstStream, state.totalStreams == 1 {
            state.turnedAway = true
            return (state.openStreams, .turnAway(parent, debugData))
        }
        if let every = faults.dropConnectionEvery, every > 0, state.totalStreams % every == 0 {
            state.closing = true
            return (state.openStreams, .drop(parent))
        }
        if let every = faults.goAwayEvery, every > 0, state.totalStreams % every == 0,
            state.goAwayLastStreamID == nil
        {
            return (state.openStreams, .goAway(parent))
        }
        return (state.openStreams, .none)
    }

    func streamClosed(_ id: HTTP2StreamID, channel: any Channel) {
        let closeNow: (any Channel)? = state.withLockedValue { state in
            state.openStreams -= 1
            guard state.goAwayLastStreamID != nil, state.openStreams == 0, !state.closing else { return nil }
            state.closing = true
            return state.channel
        }
        if let closeNow {
            // Let the client close first: closing with its late HEADERS unread would make the kernel send a
            // TCP RST, and a RST can discard the GOAWAY the client has not read yet.
            closeNow.eventLoop.scheduleTask(in: .seconds(1)) { closeNow.close(promise: nil) }
        }
    }

    /// Whether a stream may be processed (false for streams above a sent GOAWAY's last-stream-id).
    func mayProcess(streamID: Int) -> Bool {
        state.withLockedValue { state in
            guard !state.turnedAway else { return false }
            guard let last = state.goAwayLastStreamID else { return true }
            return streamID <= last
        }
    }

    /// Applies the "new token on one connection" rule.
    /// - Parameters:
    ///   - jwt: The (verified, unexpired) token of this request.
    ///   - now: Wall-clock seconds.
    ///   - minInterval: Minimum seconds between token changes.
    /// The connection's first valid token also authenticates it: its stream limit is raised to the full one.
    /// - Returns: false when the change comes too soon (429 TooManyProviderTokenUpdates).
    func bindToken(_ jwt: Substring, now: Double, minInterval: Double) -> Bool {
        let (allowed, isNew, raise): (Bool, Bool, Int?) = state.withLockedValue { state in
            let raise = state.authenticated ? nil : Self.authenticate(&state)
            guard let current = state.currentJWT else {
                state.currentJWT = String(jwt)
                state.jwtSince = now
                return (true, true, raise)
            }
            if current.utf8.elementsEqual(jwt.utf8) { return (true, false, raise) }
            guard now - state.jwtSince >= minInterval else { return (false, false, raise) }
            state.currentJWT = String(jwt)
            state.jwtSince = now
            return (true, true, raise)
        }
        if let raise { send(maxConcurrentStreams: raise) }
        if isNew { ledger.updateCounters { $0.providerTokensAccepted += 1 } }
        return allowed
    }

    /// Makes the connection deaf: from now on every byte that arrives is dropped before TLS sees it, so the peer
    /// stays connected but nothing is answered, PINGs included.
    func stopReading() async {
        guard let parent = state.withLockedValue({ $0.channel }) else { return }
        try? await parent.pipeline.addHandler(InboundBlackhole(), position: .first).get()
    }

    /// Marks the connection authenticated. - Returns: the full limit to send, unless already advertised (or lowered
    /// after a rejection).
    private static func authenticate(_ state: inout State) -> Int? {
        state.authenticated = true
        return state.lowered ? nil : advertise(state.full, &state)
    }

    /// A request was answered: with ``StreamLimits/afterRejection`` set, a rejection lowers the limit and the next
    /// success restores it.
    func answered(success: Bool) {
        guard let lowered = limits.afterRejection else { return }
        let change: Int? = state.withLockedValue { state in
            guard state.authenticated else { return nil }
            state.lowered = !success
            return Self.advertise(success ? state.full : lowered, &state)
        }
        if let change { send(maxConcurrentStreams: change) }
    }

    /// The value to send, when it differs from the one advertised.
    private static func advertise(_ value: Int, _ state: inout State) -> Int? {
        guard state.advertised != value else { return nil }
        state.advertised = value
        return value
    }

    /// Sets the connection's full limit and sends it (a mid-run change by the test or operator).
    func sendSettings(maxConcurrentStreams: Int) {
        state.withLockedValue { state in
            state.full = maxConcurrentStreams
            state.advertised = maxConcurrentStreams
        }
        send(maxConcurrentStreams: maxConcurrentStreams)
    }

    /// Writes SETTINGS with a new `MAX_CONCURRENT_STREAMS`.
    private func send(maxConcurrentStreams: Int) {
        guard let parent = state.withLockedValue({ $0.channel }) else { return }
        ledger.updateCounters { $0.streamLimitChanges += 1 }
        let frame = HTTP2Frame(
            streamID: .rootStream,
            payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams)]))
        )
        parent.writeAndFlush(frame, promise: nil)
    }

    /// Sends GOAWAY NO_ERROR with `debugData`; the last-stream-id is `lastStreamID`, or the highest stream seen.
    private func sendGoAway(on parent: any Channel, lastStreamID: Int? = nil, debugData: String) {
        let decision: (last: Int, closeNow: Bool)? = state.withLockedValue { state in
            guard state.goAwayLastStreamID == nil, !state.closing else { return nil }
            let last = lastStreamID ?? state.highestStreamID
            state.goAwayLastStreamID = last
            let closeNow = state.openStreams == 0
            if closeNow { state.closing = true }
            return (last, closeNow)
        }
        guard let decision else { return }
        ledger.updateCounters { $0.goAwaysSent += 1 }
        let frame = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(
                lastStreamID: HTTP2StreamID(decision.last), errorCode: .noError,
                opaqueData: debugData.isEmpty ? nil : ByteBuffer(string: debugData))
        )
        parent.writeAndFlush(frame, promise: nil)
        if decision.closeNow {
            parent.eventLoop.scheduleTask(in: .seconds(1)) { parent.close(promise: nil) }
        }
        // Safety net: hung streams must not keep a drained connection open forever.
        parent.eventLoop.scheduleTask(in: .seconds(10)) { parent.close(promise: nil) }
    }
}

/// Drops everything a connection receives (``APNsSimulator/silenceOpenConnections()``).
private final class InboundBlackhole: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
