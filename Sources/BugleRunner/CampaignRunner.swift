import BugleCore
import Foundation
import Logging

/// Drives one run: lease, claim (at most W in flight), send through the provider lanes, group-commit outcomes.
///
/// Depends only on the ``CampaignStore`` and ``PushProvider`` protocols; the CLI wires concrete types in.
public struct CampaignRunner: Sendable {
    /// Tuning knobs; defaults suit production.
    public struct Configuration: Sendable {
        /// Lease time-to-live; renewed every third of it.
        public var leaseTTLSeconds: Int = 30
        /// Outcomes per group commit.
        public var flushSize: Int = 500
        /// Longest time an outcome waits in the group-commit buffer.
        public var flushInterval: Duration = .milliseconds(100)
        /// Most recipients claimed per claim statement.
        public var claimBatch: Int = 500
        /// Longest idle wait between checks for due retries.
        public var idlePoll: Duration = .milliseconds(500)
        public init() {}
    }

    private let store: any CampaignStore
    private let providers: [ProviderKind: any PushProvider]
    private let composer: NotificationComposer
    private let mapper: OutcomeMapper
    private let window: Int
    private let notAfter: Instant?
    private let iosLane: ProviderKind
    private let configuration: Configuration
    private let control: RunControl
    private let progress: RunProgressBoard?
    private let logger: Logger

    /// - Parameters:
    ///   - campaign: the validated campaign (window, attempts, ambiguous policy, iOS transport).
    ///   - runID: the run to drive.
    ///   - store: the ledger.
    ///   - providers: one lane per provider kind the segment needs.
    ///   - control: stop requests from signals or the heartbeat.
    public init(
        campaign: Campaign,
        runID: Int64,
        store: any CampaignStore,
        providers: [ProviderKind: any PushProvider],
        control: RunControl,
        progress: RunProgressBoard? = nil,
        configuration: Configuration = Configuration(),
        logger: Logger
    ) {
        self.store = store
        self.providers = providers
        self.composer = NotificationComposer(campaign: campaign, runID: runID)
        self.mapper = OutcomeMapper(maxAttempts: campaign.delivery.maxAttempts, ambiguousPolicy: campaign.delivery.ambiguousPolicy)
        self.window = campaign.delivery.inFlightWindow
        self.notAfter = campaign.delivery.notAfter
        self.iosLane = campaign.iosTransport == .legacy ? .legacyAPNs : .apns
        self.configuration = configuration
        self.control = control
        self.progress = progress
        var logger = logger
        logger[metadataKey: "run_id"] = "\(runID)"
        self.logger = logger
    }

    /// The lane for a platform.
    public func lane(for platform: Platform) -> ProviderKind {
        platform == .ios ? iosLane : .fcm
    }

    /// Runs until every recipient is terminal, a stop is requested, a provider halts the run, or the lease is lost.
    /// - Parameter owner: this worker's lease owner id (host:pid:random).
    public func run(owner: String) async throws -> RunResult {
        let runID = composer.runID
        guard let lease = try await store.acquireLease(runID: runID, owner: owner, ttlSeconds: configuration.leaseTTLSeconds) else {
            return RunResult(runID: runID, ending: .fenced(nil), attempted: 0)
        }
        logger.info("lease acquired", metadata: ["epoch": "\(lease.epoch)", "recovered_in_flight": "\(lease.recoveredInFlight)"])
        await withTaskGroup(of: Void.self) { group in
            for provider in providers.values { group.addTask { await provider.prepare() } }
        }
        if let progress {
            let left = try await store.progress(runID: runID)
            progress.start(remaining: left.pending + left.inFlight + left.retryWait)
        }
        return try await withThrowingTaskGroup(of: RunResult?.self) { group in
            group.addTask { [self] in
                await heartbeat(lease)
                return nil
            }
            group.addTask { [self] in
                try await sendLoop(lease)
            }
            var result: RunResult?
            while let next = try await group.next() {
                if let next {
                    result = next
                    group.cancelAll()
                }
            }
            return result ?? RunResult(runID: runID, ending: .fenced(nil), attempted: 0)
        }
    }

    /// Renews the lease every TTL/3; self-fences when no renewal succeeded for TTL/2 or the lease was lost.
    private func heartbeat(_ lease: Lease) async {
        let ttl = configuration.leaseTTLSeconds
        let clock = ContinuousClock()
        var lastSuccess = clock.now
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .milliseconds(ttl * 1000 / 3))
            } catch {
                return
            }
            do {
                if try await store.renewLease(lease, ttlSeconds: ttl) {
                    lastSuccess = clock.now
                } else {
                    logger.error("lease lost: another worker took the run over")
                    control.requestStop(.leaseLost)
                    return
                }
            } catch {
                logger.warning("lease renewal failed", metadata: ["error": "\(error)"])
                if clock.now - lastSuccess > .milliseconds(ttl * 500) {
                    control.requestStop(.leaseLost)
                    return
                }
            }
        }
    }

    private enum Stop {
        case interrupted(String)
        case halted(code: String, message: String)
        case fenced(RunStatus?)
    }

    /// What the send loop's child tasks report.
    private enum Event: Sendable {
        case claimed(ClaimResult, requested: [ProviderKind: Int])
        case answered(RecipientOutcome, SendOutcome, Platform)
        case recorded(Bool)
    }

    /// The claim → send → record pipeline. One claim and one group commit may run while sends are in flight,
    /// so database round trips overlap with provider round trips; the window W bounds every recipient that is
    /// claimed and not yet recorded (being claimed, sending, buffered or being recorded).
    private func sendLoop(_ lease: Lease) async throws -> RunResult {
        let clock = ContinuousClock()
        let claimThreshold = max(1, min(configuration.claimBatch, window / 4))
        return try await withThrowingTaskGroup(of: Event.self) { group in
            var sending = 0
            var claiming = 0
            var recording = 0
            var buffer: [RecipientOutcome] = []
            buffer.reserveCapacity(configuration.flushSize)
            var lastFlush = clock.now
            var nextClaim = clock.now
            var lastClaimShort = false
            var dryUntil: [ProviderKind: ContinuousClock.Instant] = [:]
            var stop: Stop?
            var attempted = 0
            var breaker = WrongEnvironmentBreaker()

            while true {
                if stop == nil, let request = control.stopRequest {
                    switch request {
                    case .interrupted(let why): stop = .interrupted(why)
                    case .leaseLost: stop = .fenced(nil)
                    }
                }
                if stop == nil, let notAfter, Date().timeIntervalSince1970 >= notAfter.secondsSince1970 {
                    logger.notice("delivery.not_after reached: no more claims")
                    stop = .interrupted("delivery.not_after reached")
                }
                let now = clock.now
                let committed = sending + claiming + recording + buffer.count
                let room = window - committed
                if stop == nil, claiming == 0, now >= nextClaim, room >= claimThreshold || (committed == 0 && room > 0) {
                    // Each lane that can use more work soon gets its share of the claim, taken from its own oldest
                    // recipients; paused or backlogged lanes, and lanes that just came back empty, sit it out. A
                    // slow or paused lane therefore never fills the window another lane needs.
                    let limits = claimLimits(room: min(room, configuration.claimBatch), dryUntil: dryUntil, now: now)
                    if limits.isEmpty {
                        nextClaim = now + .milliseconds(20)
                    } else {
                        claiming = limits.values.reduce(0, +)
                        group.addTask { [self] in .claimed(try await claimWithRetry(lease, limits: limits), requested: limits) }
                    }
                }
                if recording == 0, !buffer.isEmpty,
                    buffer.count >= configuration.flushSize || now - lastFlush >= configuration.flushInterval
                        || sending == 0 || buffer.count >= claimThreshold || stop != nil
                {
                    let batch = buffer
                    buffer.removeAll(keepingCapacity: true)
                    recording = batch.count
                    group.addTask { [self] in .recorded(try await recordWithRetry(lease, batch)) }
                }
                if sending == 0 && claiming == 0 && recording == 0 && buffer.isEmpty {
                    if let stop { return try await end(lease, stop, attempted: attempted) }
                    if lastClaimShort {
                        let left = try await store.progress(runID: lease.runID)
                        if left.isDone {
                            try await store.finish(lease, status: .completed, reason: nil)
                            return RunResult(runID: lease.runID, ending: .completed, attempted: attempted)
                        }
                        let wait = min(left.secondsUntilNextDue ?? 0.5, 0.5)
                        if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
                        lastClaimShort = false
                        nextClaim = clock.now
                    } else if nextClaim > now {
                        try await Task.sleep(until: nextClaim, clock: clock)
                    }
                    continue
                }
                guard let event = try await group.next() else { continue }
                switch event {
                case .claimed(.fenced(let status), _):
                    claiming = 0
                    if stop == nil { stop = .fenced(status) }
                case .claimed(.claimed(let recipients), let requested):
                    claiming = 0
                    // A lane that came back short has nothing more due right now: leave it out for a moment. When
                    // every lane came back short, look again a little later.
                    var got: [ProviderKind: Int] = [:]
                    for recipient in recipients { got[lane(for: recipient.platform), default: 0] += 1 }
                    for (kind, asked) in requested where got[kind, default: 0] < asked {
                        dryUntil[kind] = clock.now + .milliseconds(200)
                    }
                    lastClaimShort = recipients.count < requested.values.reduce(0, +)
                    if requested.keys.allSatisfy({ got[$0, default: 0] < requested[$0, default: 0] }) {
                        nextClaim = clock.now + .milliseconds(50)
                    }
                    if stop != nil {
                        // Claimed after the stop: never sent, so handed back unspent.
                        for recipient in recipients {
                            buffer.append(RecipientOutcome(seq: recipient.seq, state: .retryWait, code: "not_sent", retryAfterSeconds: 0, refundAttempt: true))
                        }
                        continue
                    }
                    let sendTime = Int(Date().timeIntervalSince1970)
                    for recipient in recipients {
                        sending += 1
                        attempted += 1
                        group.addTask { [self] in
                            let (outcome, raw) = await sendOne(recipient, now: sendTime)
                            return .answered(outcome, raw, recipient.platform)
                        }
                    }
                case .answered(let answered, let raw, let platform):
                    sending -= 1
                    var outcome = answered
                    if let verdict = breaker.observe(raw) {
                        outcome = RecipientOutcome(seq: answered.seq, state: .retryWait, code: answered.code + "_unconfirmed", retryAfterSeconds: 0, refundAttempt: true)
                        if case .trip(let message) = verdict, stop == nil {
                            logger.error("wrong-environment breaker tripped", metadata: ["code": "BadDeviceToken"])
                            stop = .halted(code: "BadDeviceToken", message: message)
                        }
                    }
                    buffer.append(outcome)
                    progress?.record(outcome.state, platform: platform)
                    if case .halt(let code, let message) = raw, stop == nil {
                        logger.error("provider halted the run", metadata: ["code": "\(code)"])
                        stop = .halted(code: code, message: message)
                    }
                case .recorded(let ok):
                    recording = 0
                    lastFlush = clock.now
                    if !ok, stop == nil { stop = .fenced(nil) }
                }
            }
        }
    }

    private func end(_ lease: Lease, _ stop: Stop, attempted: Int) async throws -> RunResult {
        switch stop {
        case .interrupted(let why):
            try await store.finish(lease, status: .paused, reason: why)
            return RunResult(runID: lease.runID, ending: .paused(why), attempted: attempted)
        case .halted(let code, let message):
            try await store.finish(lease, status: .paused, reason: "halted: \(code): \(message)")
            return RunResult(runID: lease.runID, ending: .halted(code: code, message: message), attempted: attempted)
        case .fenced(let status):
            return RunResult(runID: lease.runID, ending: .fenced(status), attempted: attempted)
        }
    }

    /// Splits a claim of `room` between the lanes that can use work now: lanes accepting work and not known
    /// to be dry; when every accepting lane is dry, all of them (to learn when work is due again).
    private func claimLimits(room: Int, dryUntil: [ProviderKind: ContinuousClock.Instant], now: ContinuousClock.Instant) -> [ProviderKind: Int] {
        let accepting = providers.filter { $0.value.isAcceptingWork }.map(\.key)
        guard !accepting.isEmpty, room > 0 else { return [:] }
        let wet = accepting.filter { (dryUntil[$0] ?? now) <= now }
        let lanes = wet.isEmpty ? accepting : wet
        let share = max(1, room / lanes.count)
        var limits: [ProviderKind: Int] = [:]
        for kind in lanes { limits[kind] = share }
        return limits
    }

    /// Claims, retrying database errors (restart, killed backend, deadlock) with backoff; nothing was claimed when
    /// a claim transaction fails, so a retry is always safe.
    private func claimWithRetry(_ lease: Lease, limits: [ProviderKind: Int]) async throws -> ClaimResult {
        var delay = Duration.milliseconds(100)
        var attempt = 0
        while true {
            do {
                return try await store.claim(lease, limits: limits)
            } catch {
                attempt += 1
                if attempt >= 30 || control.stopRequest != nil { throw error }
                logger.warning("claiming failed; retrying", metadata: ["error": "\(error)", "attempt": "\(attempt)"])
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }

    /// Records a batch, retrying database errors with backoff so outcomes already held are never lost.
    private func recordWithRetry(_ lease: Lease, _ outcomes: [RecipientOutcome]) async throws -> Bool {
        var delay = Duration.milliseconds(100)
        var attempt = 0
        while true {
            do {
                return try await store.record(lease, outcomes: outcomes)
            } catch {
                attempt += 1
                if attempt >= 30 { throw error }
                logger.warning("recording outcomes failed; retrying", metadata: ["error": "\(error)", "attempt": "\(attempt)"])
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }

    private func sendOne(_ recipient: ClaimedRecipient, now: Int) async -> (RecipientOutcome, SendOutcome) {
        let composed = composer.compose(
            seq: recipient.seq, deviceID: recipient.deviceID, token: recipient.token, platform: recipient.platform,
            locale: recipient.locale, attempt: recipient.attempts, now: now
        )
        let raw: SendOutcome
        switch composed {
        case .failure:
            raw = .rejected(code: SkipReason.payloadTooLarge.rawValue)
        case .success(let request):
            if let provider = providers[lane(for: recipient.platform)] {
                raw = await provider.send(request)
            } else {
                raw = .halt(code: "provider_not_configured", message: "no \(lane(for: recipient.platform).rawValue) provider is configured for \(recipient.platform.rawValue) devices")
            }
        }
        var random = SystemRandomNumberGenerator()
        let mapped = mapper.map(raw, seq: recipient.seq, deviceID: recipient.deviceID, attempts: recipient.attempts, using: &random)
        return (mapped, raw)
    }
}
