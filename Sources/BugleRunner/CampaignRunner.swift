import BugleCore
import Foundation
import Logging
import Synchronization

/// Drives one run: lease, claim (at most W in flight), send through the provider lanes, group-commit outcomes.
///
/// Depends only on the ``CampaignStore`` and ``PushProvider`` protocols; the CLI wires concrete types in.
public struct CampaignRunner: Sendable {
    /// Tuning knobs; defaults suit production.
    public struct Configuration: Sendable {
        /// Lease time-to-live; renewed every sixth of it, so a renewal has a third of the TTL to answer before the
        /// worker self-fences at TTL/2.
        public var leaseTTLSeconds: Int = 30
        /// Outcomes per group commit.
        public var flushSize: Int = 500
        /// Longest time an outcome waits in the group-commit buffer.
        public var flushInterval: Duration = .milliseconds(100)
        /// Most recipients claimed per claim statement.
        public var claimBatch: Int = 500
        /// Longest idle wait between checks for due retries.
        public var idlePoll: Duration = .milliseconds(500)
        /// Told the number of live workers on the run at the start and at every renewal (to split lane rates).
        public var onWorkerCount: (@Sendable (Int) -> Void)?
        /// Longest wait for one ledger operation before it is abandoned and retried (see ``OperationDeadline``).
        public var databaseDeadline: Duration = .seconds(30)
        /// When set, a run whose next due recipient is further away than this (and has nothing in flight) is left
        /// paused with a reason starting `scheduled`, instead of waiting (`bugle run --no-wait`, `bugle tick`).
        public var leaveWhenIdle: Duration?
        /// A signal (Ctrl-C, SIGTERM) leaves the run paused with a reason starting `scheduled`, which the next `bugle
        /// tick` takes, instead of paused for `bugle resume`: a tick stopped by cron's timeout or a shutdown used to
        /// leave its scheduled campaign paused, and no later tick sent the rest.
        public var interruptionLeavesScheduled = false
        /// A crash point for tests (debug builds; see ``Failpoint``).
        public var failpoint: Failpoint = .none
        /// How long a lane may answer nothing but provider errors (5xx, quota) before the run halts
        /// (``ProviderOutageBreaker``).
        public var providerOutageLimit: Duration = .seconds(600)
        /// How the warnings of a failed ledger operation describe its error. The store's errors may hide their detail
        /// from `String(describing:)` (postgres-nio's do, so no query or bind can leak), so the caller that knows the
        /// store supplies a description that is both safe and useful (for PostgreSQL: the SQLSTATE and the server's
        /// message).
        public var describeError: @Sendable (any Error) -> String = { String(describing: $0) }
        /// Once the worker has stopped for want of lease renewals, stop waiting on connections the outage broke: the
        /// ledger operation under way fails within a second instead of waiting and retrying for minutes, and the run
        /// ends with what the worker held in ``RunResult/handover``, for the caller to write through a new session once
        /// the database answers (the CLI waits for it itself, within `--database-outage-limit`). False: keep retrying.
        public var handsOverWhenFenced = false
        /// Asked when the worker stopped for want of lease renewals: true to leave the run `running` and the lease to
        /// lapse instead of pausing the run as its last worker, for a caller that goes on with the run itself once the
        /// database answers again (a paused run would turn away its workers rejoining it).
        public var goesOnAfterDatabaseLoss: @Sendable () -> Bool = { false }
        /// UNIX seconds at which claimed recipients are sent: relative expirations, and quiet hours checked at send
        /// time (``QuietHoursGate``). Injectable for tests.
        public var wallClock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
        /// Start with at most ``CampaignRunner/probeWindow`` recipients in flight until a provider answers, and halt if
        /// a lane's first that many are all lost (`bugle resume` of a run halted because its answers were lost: each
        /// resume used to send the whole window again into a path that still lost every answer — under `resend`,
        /// one more copy to each of W devices per resume).
        public var probeFirst = false
        public init() {}
    }

    private let store: any CampaignStore
    private let providers: [ProviderKind: any PushProvider]
    private let runID: Int64
    private let window: Int
    private let notAfter: Instant?
    private let configuration: Configuration
    private let control: RunControl
    private let progress: RunProgressBoard?
    private let sender: RecipientSender
    private let quietHours: QuietHoursGate?
    /// Recipients in flight while probing (``Configuration/probeFirst``).
    public static let probeWindow = 20
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
        let composer = NotificationComposer(campaign: campaign, runID: runID)
        let mapper = OutcomeMapper(maxAttempts: campaign.delivery.maxAttempts, ambiguousPolicy: campaign.delivery.ambiguousPolicy)
        self.runID = runID
        self.window = campaign.delivery.inFlightWindow
        self.notAfter = campaign.delivery.notAfter
        self.configuration = configuration
        self.control = control
        self.progress = progress
        self.sender = RecipientSender(
            campaign: campaign, composer: composer, mapper: mapper, providers: providers,
            gate: LeaseGate(control: control, limitSeconds: Double(configuration.leaseTTLSeconds) / 2)
        )
        self.quietHours = QuietHoursGate(campaign: campaign)
        var logger = logger
        logger[metadataKey: "run_id"] = "\(runID)"
        self.logger = logger
    }

    /// The lane for a platform.
    public func lane(for platform: Platform) -> ProviderKind {
        sender.lane(for: platform)
    }

    /// Runs until every recipient is terminal, a stop is requested, a provider halts the run, or the lease is lost.
    /// - Parameters:
    ///   - owner: this worker's lease owner id (host:pid:random).
    ///   - mode: `.exclusive` to start or resume the run alone, `.join` to add a worker to a running run.
    public func run(owner: String, mode: LeaseMode = .exclusive) async throws -> RunResult {
        let ttl = configuration.leaseTTLSeconds
        let granted = try await withDatabaseRetry("taking the lease") {
            try await store.acquireLease(runID: runID, owner: owner, ttlSeconds: ttl, mode: mode)
        }
        guard let lease = granted else {
            return RunResult(runID: runID, ending: .notGranted, attempted: 0)
        }
        control.leaseRenewed()
        configuration.onWorkerCount?(lease.liveWorkers)
        logger.info(
            "lease acquired",
            metadata: ["epoch": "\(lease.epoch)", "recovered_in_flight": "\(lease.recoveredInFlight)", "workers": "\(lease.liveWorkers)"]
        )
        return try await withThrowingTaskGroup(of: RunResult?.self) { group in
            // Renewals start with the lease, before the lanes' warm-up: a connection pool warming up for longer than the
            // TTL (a slow endpoint or proxy, a `timeout` at or above it) let the lease lapse before the first renewal,
            // and a peer reaped the worker before it sent anything.
            group.addTask { [self] in
                await heartbeat(lease)
                return nil
            }
            await withTaskGroup(of: Void.self) { prepared in
                for provider in providers.values { prepared.addTask { await provider.prepare() } }
            }
            if let progress {
                // Counting what is left reads every unfinished row (seconds for a resumed 10,000,000-recipient run):
                // the display learns it beside the first sends instead of before them, and never fails the run. The
                // sends wait only for the count's snapshot (one round trip), so none of them is missing from it.
                let (snapshot, taken) = AsyncStream<Never>.makeStream()
                group.addTask { [self] in
                    defer { taken.finish() }
                    let left = try? await withDatabaseRetry("reading progress") {
                        try await store.progress(runID: runID, snapshotTaken: { taken.finish() })
                    }
                    if let left { progress.start(remaining: left.pending + left.inFlight + left.retryWait) }
                    return nil
                }
                for await _ in snapshot {}
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

    /// Renews the lease every TTL/6 (reaping peers whose leases expired, and passing the live worker count on);
    /// self-fences when no renewal succeeded for TTL/2 or the lease was lost.
    private func heartbeat(_ lease: Lease) async {
        let ttl = configuration.leaseTTLSeconds
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .milliseconds(max(500, ttl * 1000 / 6)))
            } catch {
                return
            }
            do {
                // A renewal that hangs (a killed backend) counts as failed after TTL/3, like one that errors.
                let renewal = try await OperationDeadline.run(within: .milliseconds(ttl * 1000 / 3)) { [store] in
                    try await store.renewLease(lease, ttlSeconds: ttl)
                }
                guard renewal.held else {
                    switch renewal.runStatus {
                    case .completed:
                        logger.info("the run was completed by another worker")
                    case .paused, .cancelled:
                        // An operator's `bugle pause`/`cancel` (or another worker's halt) is no error: it was logged as
                        // a lost lease when it came at a renewal rather than at a claim.
                        logger.notice("the run was \(renewal.runStatus?.rawValue ?? "stopped") elsewhere; stopping")
                    default:
                        logger.error("lease lost: the run was taken over or finished elsewhere")
                    }
                    control.requestStop(.leaseLost(renewal.runStatus))
                    return
                }
                control.leaseRenewed()
                configuration.onWorkerCount?(renewal.liveWorkers)
                if renewal.recoveredInFlight > 0 {
                    logger.notice("took over an expired worker's recipients", metadata: ["recovered_in_flight": "\(renewal.recoveredInFlight)"])
                }
            } catch {
                logger.warning("lease renewal failed", metadata: ["error": "\(configuration.describeError(error))"])
                if control.secondsSinceRenewal > Double(ttl) / 2 {
                    logger.error("lease not renewed for half its TTL: no more requests")
                    control.requestStop(.leaseLost(nil))
                    return
                }
            }
        }
    }

    /// A ledger operation given up on the worker's old connections, for a new session to make.
    private struct HandedOver: Error {}

    private enum Stop {
        /// `signalled`: by the operator (Ctrl-C, SIGTERM), not by `delivery.not_after`.
        case interrupted(String, signalled: Bool)
        case halted(code: String, message: String)
        case fenced(RunStatus?)
    }

    /// What the send loop's child tasks report (through an ``EventMailbox``, each exactly once).
    private enum Event: Sendable {
        case claimed(ClaimResult, requested: [ProviderKind: Int], lost: [Int64])
        /// `startedAtOnce`: the lane took the request without a task (``ParkedSends`` counts those per lane).
        case answered(RecipientOutcome, SendOutcome, Platform, startedAtOnce: Bool)
        case recorded(Bool)
        /// An outcome write was given up on the worker's old connections: the batch is handed over.
        case handedOver([RecipientOutcome])
        /// A stop was requested (``RunControl/onStopRequest(_:)``): look at it now, not at the next answer.
        case stopRequested
        /// A claim or an outcome write gave up (``withDatabaseRetry(_:giveUpOnStop:slow:_:)``): the run fails.
        case failed(any Error)
    }

    /// The claim → send → record pipeline. One claim and one group commit may run while sends are in flight,
    /// so database round trips overlap with provider round trips; the window W bounds every recipient that is
    /// claimed and not yet recorded (being claimed, sending, buffered or being recorded).
    ///
    /// Child tasks post what they learn to a mailbox and end; the loop wakes once for every event posted while it
    /// was busy, not once per child.
    private func sendLoop(_ lease: Lease) async throws -> RunResult {
        let clock = ContinuousClock()
        let claimThreshold = max(1, min(configuration.claimBatch, window / 4))
        let mailbox = EventMailbox<Event>()
        control.onStopRequest { mailbox.post(.stopRequested) }
        defer { control.onStopRequest(nil) }
        return try await withThrowingDiscardingTaskGroup(returning: RunResult.self) { group in
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
            // Set once the lanes' waiting sends were withdrawn for the stop.
            var withdrawn = false
            // Per lane (``ProviderKind/laneSlot``), recipients claimed and not yet answered: what a lane with a claim
            // capacity (a paced lane's second of sends) already holds.
            var outstanding = [Int](repeating: 0, count: ProviderKind.laneSlots)
            var attempted = 0
            // One per lane (``ProviderKind/laneSlot``): only a lane's own delivery confirms its environment and topic.
            var breakers = [WrongEnvironmentBreaker](repeating: WrongEnvironmentBreaker(), count: ProviderKind.laneSlots)
            // Probing (a resume after lost answers): a small window until something is answered.
            var probing = configuration.probeFirst
            var lostAnswers = LostAnswerBreaker(window: window, probe: probing ? Self.probeWindow : nil)
            var outage = ProviderOutageBreaker(limit: configuration.providerOutageLimit)
            var oversized = OversizedPayloadBreaker()
            // Claim attempts whose answers never arrived (failed or abandoned): their rows, if they committed, are
            // in flight under this lease and held by nobody.
            var lostClaims: [Int64] = []
            // Set once a write was handed over to a new session: so is everything left to write.
            var handedOver: [RecipientOutcome]?
            var nextClaimID: Int64 = 1
            // Failpoints (tests): passes of each point, and the point that is draining towards its crash.
            var passes: [Failpoint.Point: Int] = [:]
            var crashing: Failpoint.Point?
            var heldBack = 0
            // Sends whose lane had no free slot at claim time; started as the lane's answers free slots.
            var parked = ParkedSends<(RecipientSender.Prepared, ClaimedRecipient)>()
            let sender = self.sender
            /// Starts a send on its lane at once (its answer is posted from the connection's event loop), or false.
            func startAtOnce(_ send: (RecipientSender.Prepared, ClaimedRecipient)) -> Bool {
                let (prepared, recipient) = send
                return sender.start(prepared, for: recipient) { outcome, raw in
                    mailbox.post(.answered(outcome, raw, recipient.platform, startedAtOnce: true))
                }
            }
            /// Sends in a child task that waits for the lane as long as needed.
            func sendInTask(_ send: (RecipientSender.Prepared, ClaimedRecipient)) {
                let (prepared, recipient) = send
                group.addTask {
                    let (outcome, raw) = await sender.finish(prepared, for: recipient)
                    mailbox.post(.answered(outcome, raw, recipient.platform, startedAtOnce: false))
                }
            }

            while true {
                if stop == nil, let request = control.stopRequest {
                    switch request {
                    case .interrupted(let why): stop = .interrupted(why, signalled: true)
                    case .leaseLost(let status): stop = .fenced(status)
                    }
                }
                if stop == nil, let notAfter, Date().timeIntervalSince1970 >= notAfter.secondsSince1970 {
                    logger.notice("delivery.not_after reached: no more claims")
                    stop = .interrupted("delivery.not_after reached", signalled: false)
                }
                if stop != nil, !withdrawn {
                    // Recipients claimed but not yet sent go back unsent instead of going out after the stop (at a slow
                    // rate the window's last sends would go out minutes later, and after a lost lease another worker
                    // may already be sending them): those waiting for their lane in a task come back `withdrawn`, the
                    // parked ones are handed back here. Requests already written are answered and recorded as usual.
                    withdrawn = true
                    for provider in providers.values { provider.withdrawWaitingSends() }
                    for (_, recipient) in parked.withdrawAll() {
                        sending -= 1
                        outstanding[sender.lane(for: recipient.platform).laneSlot] -= 1
                        attempted -= 1
                        buffer.append(Self.notSent(recipient))
                    }
                }
                let now = clock.now
                let committed = sending + claiming + recording + buffer.count
                let room = (probing ? min(window, Self.probeWindow) : window) - committed
                if stop == nil, crashing == nil, claiming == 0, now >= nextClaim, room >= claimThreshold || (committed == 0 && room > 0) {
                    // Each lane that can use more work soon gets its share of the claim, taken from its own oldest
                    // recipients; paused or backlogged lanes, and lanes that just came back empty, sit it out. A
                    // slow or paused lane therefore never fills the window another lane needs.
                    let limits = claimLimits(
                        room: min(room, configuration.claimBatch), dryUntil: dryUntil, outstanding: outstanding, now: now, idle: committed == 0)
                    if limits.isEmpty {
                        // Look again soon: within 2 ms while work is under way (a lane whose slots were full is fed
                        // as they free up, not after it has emptied), 20 ms when idle.
                        nextClaim = now + .milliseconds(committed == 0 ? 20 : 2)
                    } else {
                        claiming = limits.values.reduce(0, +)
                        let firstID = nextClaimID
                        nextClaimID += 1000  // ids for this claim's retries
                        group.addTask { [self] in
                            do {
                                let (result, lost) = try await claimWithRetry(lease, limits: limits, firstID: firstID)
                                mailbox.post(.claimed(result, requested: limits, lost: lost))
                            } catch {
                                mailbox.post(.failed(error))
                            }
                        }
                    }
                }
                if handedOver != nil, !buffer.isEmpty {
                    handedOver? += buffer
                    buffer.removeAll()
                }
                if recording == 0, !buffer.isEmpty, crashing != .afterResponse,
                    buffer.count >= configuration.flushSize || now - lastFlush >= configuration.flushInterval
                        || sending == 0 || buffer.count >= claimThreshold || stop != nil
                {
                    let batch = buffer
                    buffer.removeAll(keepingCapacity: true)
                    recording = batch.count
                    group.addTask { [self] in
                        do {
                            mailbox.post(.recorded(try await recordWithRetry(lease, batch)))
                        } catch is HandedOver {
                            mailbox.post(.handedOver(batch))
                        } catch {
                            mailbox.post(.failed(error))
                        }
                    }
                }
                if let point = crashing, sending == 0, claiming == 0, recording == 0, point == .afterResponse || buffer.isEmpty {
                    switch point {
                    case .afterClaim: configuration.failpoint.crash("\(heldBack) recipient(s) claimed and never sent")
                    case .afterResponse:
                        let delivered = buffer.filter { $0.state == .sent }.count
                        configuration.failpoint.crash("\(buffer.count) outcome(s) unrecorded, \(delivered) delivered")
                    case .afterRecord, .inMaterialize: configuration.failpoint.crash("nothing in flight")
                    }
                }
                if sending == 0 && claiming == 0 && recording == 0 && buffer.isEmpty {
                    if let handedOver {
                        logger.notice("handing the ledger writes over to a new database session", metadata: ["outcomes": "\(handedOver.count)"])
                        let handover = Handover(lease: lease, outcomes: handedOver, lostClaimIDs: lostClaims)
                        return RunResult(runID: lease.runID, ending: .fenced(nil), attempted: attempted, handover: handover)
                    }
                    if !lostClaims.isEmpty {
                        // Kept for the whole run: an abandoned attempt may still commit later.
                        let ids = lostClaims
                        let released = try await withDatabaseRetry("handing back lost claims") { try await store.releaseUnheld(lease, claimIDs: ids) }
                        if released > 0 { logger.notice("handed back recipients of a claim whose answer was lost", metadata: ["count": "\(released)"]) }
                    }
                    if let stop { return try await end(lease, stop, attempted: attempted) }
                    if lastClaimShort {
                        let left = try await withDatabaseRetry("reading the backlog") { try await store.backlog(runID: lease.runID) }
                        if left.isDone {
                            try await withDatabaseRetry("finishing the run", slow: true) {
                                try await store.finish(lease, status: .completed, reason: nil, lastWorkerOnly: false)
                            }
                            return RunResult(runID: lease.runID, ending: .completed, attempted: attempted)
                        }
                        // Nothing due for a while: the progress display says until when, instead of a silent 0/s.
                        if let due = left.secondsUntilNextDue, due > 2, !left.hasInFlight {
                            progress?.waiting(until: configuration.wallClock() + due)
                        }
                        if let notAfter, !left.hasInFlight, let due = left.secondsUntilNextDue,
                            configuration.wallClock() + due >= notAfter.secondsSince1970
                        {
                            // What is left comes due only after the deadline (quiet hours, a later local time): close
                            // the run now rather than leave it scheduled, or wait, for nothing.
                            logger.notice("delivery.not_after comes before the next recipients are due: no more claims")
                            return try await end(lease, .interrupted("delivery.not_after reached", signalled: false), attempted: attempted)
                        }
                        if let leave = configuration.leaveWhenIdle, !left.hasInFlight, let due = left.secondsUntilNextDue,
                            due > Double(leave.components.seconds)
                        {
                            // An instant, not "due in N s", which was stale as soon as it was written.
                            let dueAt = Date(timeIntervalSince1970: (configuration.wallClock() + due).rounded())
                            let reason = "scheduled: next recipients due at " + dueAt.formatted(.iso8601)
                            try await withDatabaseRetry("leaving the run scheduled", slow: true) {
                                try await store.finish(lease, status: .paused, reason: reason, lastWorkerOnly: true)
                            }
                            return RunResult(runID: lease.runID, ending: .scheduled(secondsUntilNextDue: due), attempted: attempted)
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
                // Something is under way here (a claim, a send or a write), and each posts exactly once.
                for event in await mailbox.next() {
                    switch event {
                    case .claimed(.fenced(let status), _, let lost):
                        claiming = 0
                        lostClaims += lost
                        if stop == nil { stop = .fenced(status) }
                    case .claimed(.claimed(let recipients), let requested, let lost):
                        claiming = 0
                        lostClaims += lost
                        // A lane that came back short has nothing more due right now: leave it out for a moment. When
                        // every lane came back short, look again a little later.
                        var got: [ProviderKind: Int] = [:]
                        for recipient in recipients { got[lane(for: recipient.platform), default: 0] += 1 }
                        for (kind, asked) in requested where got[kind, default: 0] < asked {
                            dryUntil[kind] = clock.now + .milliseconds(200)
                        }
                        lastClaimShort = recipients.count < requested.values.reduce(0, +)
                        if !recipients.isEmpty { progress?.waiting(until: nil) }
                        // Only when no lane can use a claim: a lane left out of this one because its slots were full
                        // (in a mixed run's tail, FCM after APNs has emptied) must not wait behind the empty lanes.
                        let answered = clock.now
                        if providers.keys.allSatisfy({ (dryUntil[$0] ?? answered) > answered }) {
                            nextClaim = answered + .milliseconds(50)
                        }
                        passes[.afterClaim, default: 0] += 1
                        if crashing == nil, configuration.failpoint.fires(.afterClaim, count: passes[.afterClaim, default: 0]) {
                            crashing = .afterClaim
                            heldBack = recipients.count
                            continue
                        }
                        if stop != nil || crashing != nil {
                            // Claimed after the stop: never sent, so handed back unspent.
                            for recipient in recipients { buffer.append(Self.notSent(recipient)) }
                            continue
                        }
                        let wallNow = configuration.wallClock()
                        let sendTime = Int(wallNow)
                        for recipient in recipients {
                            var sendBy: Double?
                            switch quietHours?.check(recipient, now: wallNow) {
                            case .notNow(let held)?:
                                // Its own clock reached quiet hours since the audience was read: not sent now.
                                buffer.append(held)
                                if held.state == .skippedQuietHours { progress?.record(held.state, platform: recipient.platform) }
                                continue
                            case .sendBy(let by)?:
                                sendBy = by
                            case nil:
                                break
                            }
                            sending += 1
                            attempted += 1
                            outstanding[sender.lane(for: recipient.platform).laneSlot] += 1
                            let send = (sender.prepare(recipient, now: sendTime, sendBy: sendBy), recipient)
                            // A lane with a free slot, token and stream takes the request at once. Otherwise the
                            // send waits behind the lane's earlier ones for a slot its started sends free, or, when
                            // none is out, in a task that waits for the lane.
                            let lane = sender.lane(for: recipient.platform)
                            guard case .request = send.0 else {
                                sendInTask(send)
                                continue
                            }
                            if parked.hasWaiting(lane) {
                                parked.park(send, on: lane)
                            } else if startAtOnce(send) {
                                parked.started(lane)
                            } else if parked.canPark(lane) {
                                parked.park(send, on: lane)
                            } else {
                                sendInTask(send)
                            }
                        }
                    case .answered(let answered, let raw, let platform, let startedAtOnce):
                        sending -= 1
                        outstanding[sender.lane(for: platform).laneSlot] -= 1
                        if startedAtOnce { parked.answered(sender.lane(for: platform)) }
                        if raw == .withdrawn {
                            attempted -= 1
                            buffer.append(answered)
                            continue
                        }
                        var outcome = answered
                        if probing, raw.isAnswer { probing = false }
                        if let verdict = breakers[sender.lane(for: platform).laneSlot].observe(raw, seq: answered.seq) {
                            outcome = RecipientOutcome(seq: answered.seq, state: .retryWait, code: answered.code + "_unconfirmed", retryAfterSeconds: 0, refundAttempt: true)
                            if case .trip(let code, let message) = verdict, stop == nil {
                                logger.error("wrong-environment/topic breaker tripped", metadata: ["code": "\(code)"])
                                stop = .halted(code: code, message: message)
                            }
                        }
                        buffer.append(outcome)
                        progress?.record(outcome.state, platform: platform)
                        passes[.afterResponse, default: 0] += 1
                        if crashing == nil, configuration.failpoint.fires(.afterResponse, count: passes[.afterResponse, default: 0]) {
                            crashing = .afterResponse
                        }
                        if case .halt(let code, let message) = raw, stop == nil {
                            logger.error("provider halted the run", metadata: ["code": "\(code)"])
                            stop = .halted(code: code, message: message)
                        }
                        if let message = lostAnswers.observe(raw, lane: sender.lane(for: platform), seq: answered.seq), stop == nil {
                            logger.error("lost-answer breaker tripped", metadata: ["lane": "\(sender.lane(for: platform).rawValue)"])
                            stop = .halted(code: "AnswersLost", message: message)
                        }
                        if let message = oversized.observe(raw, platform: platform), stop == nil {
                            logger.error("oversized-payload breaker tripped", metadata: ["platform": "\(platform.rawValue)"])
                            stop = .halted(code: SkipReason.payloadTooLarge.rawValue, message: message)
                        }
                        if let message = outage.observe(raw, lane: sender.lane(for: platform), now: clock.now), stop == nil {
                            logger.error("provider-outage breaker tripped", metadata: ["limit": "\(configuration.providerOutageLimit)"])
                            stop = .halted(code: "ProviderUnavailable", message: message)
                        }
                    case .recorded(let ok):
                        recording = 0
                        lastFlush = clock.now
                        if !ok {
                            logger.error("outcome write fenced: this worker's lease was taken over; stopping")
                            if stop == nil { stop = .fenced(nil) }
                        }
                        passes[.afterRecord, default: 0] += 1
                        if crashing == nil, configuration.failpoint.fires(.afterRecord, count: passes[.afterRecord, default: 0]) {
                            crashing = .afterRecord
                        }
                    case .handedOver(let batch):
                        recording = 0
                        handedOver = (handedOver ?? []) + batch
                    case .stopRequested:
                        break
                    case .failed(let error):
                        throw error
                    }
                }
                if parked.count > 0, stop == nil {
                    for send in parked.unpark(providers.keys, start: startAtOnce) { sendInTask(send) }
                }
            }
        }
    }

    /// The outcome of a claimed recipient that was never sent: back to wait, due at once, its attempt given back.
    private static func notSent(_ recipient: ClaimedRecipient) -> RecipientOutcome {
        RecipientOutcome(seq: recipient.seq, state: .retryWait, code: SendOutcome.withdrawn.code, retryAfterSeconds: 0, refundAttempt: true)
    }

    private func end(_ lease: Lease, _ stop: Stop, attempted: Int) async throws -> RunResult {
        switch stop {
        case .interrupted(let cause, signalled: false):
            // `delivery.not_after`: nothing may send the rest any more, so the last worker out closes the run.
            try await withDatabaseRetry("closing the run at its deadline", slow: true) {
                try await store.closeAtDeadline(lease, reason: "delivery.not_after passed")
            }
            return RunResult(runID: lease.runID, ending: .closedAtDeadline(cause), attempted: attempted)
        case .interrupted(let cause, let signalled):
            let why = signalled && configuration.interruptionLeavesScheduled ? "scheduled: \(cause); the next `bugle tick` goes on" : cause
            // With other workers still on the run, this one just leaves; the last one out pauses the run.
            try await withDatabaseRetry("pausing the run", slow: true) {
                try await store.finish(lease, status: .paused, reason: why, lastWorkerOnly: true)
            }
            return RunResult(runID: lease.runID, ending: .paused(why), attempted: attempted)
        case .halted(let code, let message):
            try await withDatabaseRetry("halting the run", slow: true) {
                try await store.finish(lease, status: .paused, reason: "halted: \(code): \(message)", lastWorkerOnly: false)
            }
            return RunResult(runID: lease.runID, ending: .halted(code: code, message: message), attempted: attempted)
        case .fenced(let status):
            // Leave the run (best effort: the database may be what fenced us). A lease lost while no other worker
            // is live pauses the run, so it can be resumed; unless the caller goes on with it after a database outage.
            if !(control.stopRequest == .leaseLost(nil) && configuration.goesOnAfterDatabaseLoss()) {
                _ = try? await store.finish(lease, status: .paused, reason: "lease lost", lastWorkerOnly: true)
            }
            return RunResult(runID: lease.runID, ending: .fenced(status), attempted: attempted)
        }
    }

    /// Splits a claim of `room` between the lanes that can use work now: lanes accepting work and not known
    /// to be dry, each given no more than its claim capacity leaves beside what it already holds (`outstanding`). When every accepting lane is dry and nothing is under way (`idle`), all of them, to learn when
    /// work is due again; with work under way, none until a lane's dry spell ends. Probing empty lanes while
    /// another lane's slots were full emptied that lane before it was fed again: late in a 10,000,000-recipient
    /// run, the send loop drained completely at least 1,921 times.
    private func claimLimits(
        room: Int, dryUntil: [ProviderKind: ContinuousClock.Instant], outstanding: [Int], now: ContinuousClock.Instant, idle: Bool
    ) -> [ProviderKind: Int] {
        var capacity: [ProviderKind: Int] = [:]
        for (kind, provider) in providers {
            if let most = provider.claimCapacity { capacity[kind] = most - outstanding[kind.laneSlot] }
        }
        let accepting = providers.filter { $0.value.isAcceptingWork && capacity[$0.key].map { $0 > 0 } ?? true }.map(\.key)
        guard !accepting.isEmpty, room > 0 else { return [:] }
        let wet = accepting.filter { (dryUntil[$0] ?? now) <= now }
        let lanes = wet.isEmpty && idle ? accepting : wet
        guard !lanes.isEmpty else { return [:] }
        let share = max(1, room / lanes.count)
        var limits: [ProviderKind: Int] = [:]
        for kind in lanes { limits[kind] = min(share, capacity[kind] ?? share) }
        return limits
    }

    /// Claims, retrying database errors (restart, killed backend, deadlock) with backoff; attempt k uses claim id
    /// `firstID + k`. A failed attempt claimed nothing unless its commit landed and only the answer was lost (or it
    /// was abandoned and ran late); `lost` lists the ids of the attempts that failed, for the loop to hand back.
    ///
    /// Once a stop is requested (the lease could not be renewed, say, because the database stopped answering) the
    /// retries end and the claim counts as empty, every attempt lost: the loop then records the outcomes it holds
    /// and ends as the stop says, instead of failing the run on the database error that caused the stop.
    private func claimWithRetry(_ lease: Lease, limits: [ProviderKind: Int], firstID: Int64) async throws -> (ClaimResult, lost: [Int64]) {
        let attempts = Mutex(0)
        do {
            let (result, failures) = try await retrying("claiming", giveUpOnStop: true) { [store] attempt in
                attempts.withLock { $0 = attempt + 1 }
                return try await store.claim(lease, limits: limits, claimID: firstID + Int64(attempt))
            }
            return (result, (0..<Int64(failures)).map { firstID + $0 })
        } catch where control.stopRequest != nil {
            logger.warning("claim abandoned: the run is stopping", metadata: ["error": "\(configuration.describeError(error))"])
            return (.claimed([]), (0..<Int64(attempts.withLock { $0 })).map { firstID + $0 })
        }
    }

    /// Records a batch, retrying database errors with backoff so outcomes already held are never lost.
    private func recordWithRetry(_ lease: Lease, _ outcomes: [RecipientOutcome]) async throws -> Bool {
        try await withDatabaseRetry("recording outcomes") { try await store.record(lease, outcomes: outcomes) }
    }

    /// Runs a ledger operation, retrying database errors (a restarted server, a killed backend, a deadlock) with
    /// exponential backoff from 100 ms to 5 s, for about two and a half minutes before giving up.
    /// - Parameters:
    ///   - what: For the log line.
    ///   - giveUpOnStop: Stop retrying once a stop was requested (claims; never outcome writes).
    /// - Parameter slow: The operation rebuilds the run's summary (finishing): it gets ten minutes, not the deadline.
    @discardableResult
    private func withDatabaseRetry<T: Sendable>(
        _ what: String,
        giveUpOnStop: Bool = false,
        slow: Bool = false,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await retrying(what, giveUpOnStop: giveUpOnStop, deadline: slow ? .seconds(600) : nil) { _ in try await body() }.0
    }

    /// True once the worker has stopped for want of lease renewals, when ``Configuration/handsOverWhenFenced``; nil
    /// without it.
    private var handOverNow: (@Sendable () async -> Bool)? {
        guard configuration.handsOverWhenFenced else { return nil }
        return { [control] in control.stopRequest == .leaseLost(nil) }
    }

    /// ``withDatabaseRetry(_:giveUpOnStop:_:)``, also telling how many attempts failed. Each attempt has
    /// `databaseDeadline` to answer, and is abandoned sooner once a new session would work after the self-fence.
    private func retrying<T: Sendable>(
        _ what: String,
        giveUpOnStop: Bool = false,
        deadline: Duration? = nil,
        _ body: @escaping @Sendable (_ attempt: Int) async throws -> T
    ) async throws -> (T, Int) {
        var delay = Duration.milliseconds(100)
        var attempt = 0
        while true {
            do {
                let current = attempt
                return (
                    try await OperationDeadline.run(within: deadline ?? configuration.databaseDeadline, abandonWhen: handOverNow) {
                        try await body(current)
                    }, attempt
                )
            } catch {
                attempt += 1
                if attempt >= 35 || (giveUpOnStop && control.stopRequest != nil) { throw error }
                if let handOverNow, await handOverNow() {
                    logger.error("\(what) abandoned: handing it over to a new database session", metadata: ["error": "\(configuration.describeError(error))"])
                    throw HandedOver()
                }
                logger.warning("\(what) failed; retrying", metadata: ["error": "\(configuration.describeError(error))", "attempt": "\(attempt)"])
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }
}
