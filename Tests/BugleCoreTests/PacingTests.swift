import BugleCore
import BugleRunner
import BugleTesting
import Foundation
import Synchronization
import Testing

@Suite("Token bucket and AIMD rate control")
struct PacingTests {
    @Test("a full bucket gives its burst at once, then one token per 1/rate seconds, whoever asks")
    func bucket() {
        var bucket = TokenBucket(rate: 100, burst: 5, now: 0)
        for _ in 0..<5 { #expect(bucket.reserve(now: 0) == 0) }
        // Reservations queue up: the 6th waits 10 ms, the 7th 20 ms.
        #expect(abs(bucket.reserve(now: 0) - 0.01) < 1e-9)
        #expect(abs(bucket.reserve(now: 0) - 0.02) < 1e-9)
        // After 1 s the debt is paid and the bucket is full again (never above burst).
        for _ in 0..<5 { #expect(bucket.reserve(now: 1) == 0) }
        #expect(bucket.reserve(now: 1) > 0)
    }

    @Test("over any long window the bucket grants rate·T + burst tokens, not more")
    func bucketRate() {
        var bucket = TokenBucket(rate: 500, burst: 50, now: 0)
        var granted = 0
        var now = 0.0
        // A sender that asks every 0.1 ms and only counts tokens usable at once.
        while now < 10 {
            if bucket.reserve(now: now) == 0 { granted += 1 } else { bucket.refund(now: now) }
            now += 0.0001
        }
        #expect(granted <= 500 * 10 + 50)
        #expect(granted >= 500 * 10 - 5)
    }

    @Test("lowering the rate takes effect at once; a refund returns the token")
    func setRate() {
        var bucket = TokenBucket(rate: 1000, burst: 1, now: 0)
        #expect(bucket.reserve(now: 0) == 0)
        bucket.setRate(10, now: 0)
        #expect(abs(bucket.reserve(now: 0) - 0.1) < 1e-9)
        bucket.refund(now: 0)
        #expect(abs(bucket.reserve(now: 0) - 0.1) < 1e-9)
    }

    @Test("a 429 storm halves the rate, once per window; calm windows add back 10% of the ceiling")
    func aimd() {
        var controller = RateController(ceiling: 1000)
        var now = 0.0
        // 100 answers, every tenth a 429 (10% > 5% threshold): one decrease at the third 429.
        var changes: [RateController.Change] = []
        for i in 0..<30 {
            changes.append(controller.record(throttled: i % 10 == 9, now: now))
            now += 0.001
        }
        #expect(changes.filter { $0 == .decreased }.count == 1)
        #expect(controller.rate == 500)
        // More 429s in the same burst keep halving only after enough new evidence.
        for _ in 0..<3 { _ = controller.record(throttled: true, now: now) }
        #expect(controller.rate == 250)
        // Sporadic errors (1 in 100) never lower it.
        var sporadic = RateController(ceiling: 1000)
        for i in 0..<10_000 { _ = sporadic.record(throttled: i % 100 == 0, now: Double(i) * 0.001) }
        #expect(sporadic.rate == 1000)
        // Calm windows: +100 per window until the ceiling.
        for second in 1...10 {
            _ = controller.record(throttled: false, now: now + Double(second) * 1.01)
        }
        #expect(controller.rate == 1000)
        // Never below the floor; a storm there still counts as one (the lane pauses for it).
        var floor = RateController(ceiling: 1000, floor: 100)
        var atFloor: [RateController.Change] = []
        for i in 0..<1000 { atFloor.append(floor.record(throttled: true, now: Double(i) * 0.001)) }
        #expect(floor.rate == 100)
        #expect(atFloor.suffix(100).filter { $0 == .decreased }.count == 33, "one storm per three throttling answers, at the floor too")
    }
}

/// A lane that answers from a script and tracks how many sends overlap.
private final class ScriptedLane: PushProvider {
    private struct State {
        var inFlight = 0
        var maxInFlight = 0
        var sends = 0
    }
    private let state = Mutex(State())
    let answer: @Sendable (Int) -> SendOutcome
    let gate: AsyncStream<Void>
    private let opener: AsyncStream<Void>.Continuation

    init(answer: @escaping @Sendable (Int) -> SendOutcome) {
        self.answer = answer
        (gate, opener) = AsyncStream.makeStream(of: Void.self)
    }

    var kind: ProviderKind { .fcm }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }
    var sends: Int { state.withLock { $0.sends } }

    func send(_ request: PushRequest) async -> SendOutcome {
        let number = state.withLock { state -> Int in
            state.inFlight += 1
            state.sends += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            return state.sends
        }
        await Task.yield()
        state.withLock { $0.inFlight -= 1 }
        return answer(number)
    }

    func shutdown() async {}
}

@Suite("Lane pacer")
struct LanePacerTests {
    private static func request(_ seq: Int64) -> PushRequest {
        PushRequest(seq: seq, deviceID: seq, token: "t\(seq)", platform: .android, body: [])
    }

    @Test("never more sends in flight than the concurrency limit")
    func concurrency() async {
        let lane = ScriptedLane { _ in .delivered(providerMessageID: nil) }
        let paced = PacedProvider(lane, pacer: LanePacer(limits: .init(perSecond: nil, concurrency: 3)))
        await withTaskGroup(of: SendOutcome.self) { group in
            for seq in 0..<200 { group.addTask { await paced.send(Self.request(Int64(seq))) } }
            for await _ in group {}
        }
        #expect(lane.sends == 200)
        #expect(lane.maxInFlight <= 3)
        #expect(paced.pacer.snapshot.inFlight == 0)
    }

    @Test("tryAcquire takes a slot and a whole token only when both are free; cancelAcquire gives both back")
    func tryAcquire() async {
        let pacer = LanePacer(limits: .init(perSecond: 0.001, burst: 2, concurrency: 3))
        #expect(pacer.tryAcquire())
        #expect(pacer.tryAcquire())
        // Two slots taken, and the bucket (2 tokens, refilling once in 1,000 s) is empty.
        #expect(!pacer.tryAcquire())
        #expect(pacer.snapshot.inFlight == 2)
        pacer.cancelAcquire()
        #expect(pacer.snapshot.inFlight == 1)
        #expect(pacer.tryAcquire())  // the token came back with the slot
        pacer.release(after: .delivered(providerMessageID: nil))
        pacer.release(after: .delivered(providerMessageID: nil))
        #expect(pacer.snapshot.inFlight == 0)

        let slots = LanePacer(limits: .init(perSecond: nil, concurrency: 1))
        #expect(slots.tryAcquire())
        #expect(!slots.tryAcquire())
        // cancelAcquire frees the slot for a send waiting in acquire() (or about to): it gets it, not a tryAcquire.
        let waiting = Task { await slots.acquire() }
        slots.cancelAcquire()
        #expect(await waiting.value)
        #expect(slots.snapshot.inFlight == 1)
        #expect(!slots.tryAcquire())
        slots.release(after: .delivered(providerMessageID: nil))
        #expect(slots.tryAcquire())
    }

    @Test("withdrawn: sends waiting for a slot or for their token return false without sending, their tokens go back, later ones too until reopened")
    func withdrawal() async {
        // A slot-bound lane: one send holds the only slot, another waits for it.
        let slots = LanePacer(limits: .init(perSecond: nil, concurrency: 1))
        #expect(slots.tryAcquire())
        let (queued, signal) = AsyncStream<Void>.makeStream()
        let waitingForSlot = Task {
            signal.finish()
            return await slots.acquire()
        }
        for await _ in queued {}
        // A rate-bound lane (0.2/s, burst 1): its token taken, three sends reserve the next ones (5, 10 and 15 s on: far
        // beyond any delay a loaded machine puts between them and the withdrawal).
        let rated = LanePacer(limits: .init(perSecond: 0.2, burst: 1, concurrency: 10))
        #expect(rated.tryAcquire())
        let waitingForTokens = (0..<3).map { _ in Task { await rated.acquire() } }
        while rated.snapshot.inFlight < 4 { await Task.yield() }
        #expect(!rated.isAcceptingWork)  // seconds of reservations queued
        slots.withdrawWaiting()
        rated.withdrawWaiting()
        #expect(await waitingForSlot.value == false)
        for task in waitingForTokens { #expect(await task.value == false) }
        // Only the sends let through before hold slots; the withdrawn reservations are handed back.
        #expect(slots.snapshot.inFlight == 1)
        #expect(rated.snapshot.inFlight == 1)
        #expect(!slots.tryAcquire())
        #expect(await rated.acquire() == false)  // later sends too, until reopened
        rated.reopen()
        #expect(rated.isAcceptingWork)
        slots.release(after: .delivered(providerMessageID: nil))
        slots.reopen()
        #expect(slots.tryAcquire())
    }

    @Test("a paced lane's withdrawn send comes back withdrawn, never reaching the lane")
    func withdrawnSend() async {
        let lane = ScriptedLane { _ in .delivered(providerMessageID: nil) }
        // The second's token is 1,000 s away: a loaded CI machine that starts its task late (a CI run did, 20 s late
        // with a 20 s token) cannot let it be granted before the withdrawal.
        let pacer = LanePacer(limits: .init(perSecond: 0.001, burst: 1, concurrency: 10))
        let paced = PacedProvider(lane, pacer: pacer)
        #expect(await paced.send(Self.request(1)) == .delivered(providerMessageID: nil))
        let second = Task { await paced.send(Self.request(2)) }
        while pacer.snapshot.inFlight < 1 { await Task.yield() }
        paced.withdrawWaitingSends()
        #expect(await second.value == .withdrawn)
        #expect(lane.sends == 1)
        #expect(pacer.snapshot.inFlight == 0)
    }

    @Test("a send whose quiet hours begin while it waits for the rate comes back unsent (quiet_hours), its token and slot freed; a parked one too")
    func quietHoursBeginWhileWaiting() async {
        let lane = ScriptedLane { _ in .delivered(providerMessageID: nil) }
        let pacer = LanePacer(limits: .init(perSecond: 0.5, burst: 1, concurrency: 10))
        let paced = PacedProvider(lane, pacer: pacer)
        // The second's token comes 2 s after the first's grant, so past this whatever the first waited; the first has
        // 1.8 s to be granted (a loaded CI machine can stall for a while).
        let quietFrom = Date().timeIntervalSince1970 + 1.8
        var first = Self.request(1)
        first.sendBy = quietFrom
        var second = Self.request(2)
        second.sendBy = quietFrom
        #expect(await paced.send(first) == .delivered(providerMessageID: nil))
        // Its token comes 2 s after the first's, past the quiet hours' start.
        #expect(await paced.send(second) == .quietHoursBegan)
        #expect(lane.sends == 1)
        #expect(pacer.snapshot.inFlight == 0)
        // Started at once when already too late: answered unsent without taking a slot or reaching the lane.
        var late = Self.request(3)
        late.sendBy = Date().timeIntervalSince1970 - 1
        let answer = Mutex<SendOutcome?>(nil)
        #expect(paced.startSend(late) { outcome in answer.withLock { $0 = outcome } })
        #expect(answer.withLock { $0 } == .quietHoursBegan)
        #expect(lane.sends == 1 && pacer.snapshot.inFlight == 0)
    }

    /// A worker frozen past its lease wakes with sends held for its lane's rate: they must not go out (another worker
    /// has their recipients now). The gate closes while the second send waits for its token.
    @Test("a send whose gate closes while it waits for the rate comes back withdrawn, unsent, its token and slot freed; a parked one too")
    func gateClosesWhileWaiting() async {
        let lane = ScriptedLane { _ in .delivered(providerMessageID: nil) }
        let pacer = LanePacer(limits: .init(perSecond: 0.5, burst: 1, concurrency: 10))
        let paced = PacedProvider(lane, pacer: pacer)
        let gate = SwitchGate()
        var first = Self.request(1)
        first.gate = gate
        var second = Self.request(2)
        second.gate = gate
        #expect(await paced.send(first) == .delivered(providerMessageID: nil))
        // Its token comes 2 s after the first's; the gate closes meanwhile.
        async let waiting = paced.send(second)
        gate.close()
        #expect(await waiting == .withdrawn)
        #expect(lane.sends == 1)
        #expect(pacer.snapshot.inFlight == 0)
        var parked = Self.request(3)
        parked.gate = gate
        let answer = Mutex<SendOutcome?>(nil)
        #expect(paced.startSend(parked) { outcome in answer.withLock { $0 = outcome } })
        #expect(answer.withLock { $0 } == .withdrawn)
        #expect(lane.sends == 1 && pacer.snapshot.inFlight == 0)
    }

    @Test("with several workers on the run, each paces at the lane's rate divided by the live workers")
    func workerShare() async {
        let pacer = LanePacer(limits: .init(perSecond: 1000, burst: 1, concurrency: 1000))
        #expect(pacer.snapshot.rate == 1000)
        pacer.setWorkerShare(4)
        #expect(pacer.snapshot.rate == 250)
        // At 250/s with a burst of 1, 26 grants cannot take less than 25 intervals of 4 ms.
        let start = ContinuousClock.now
        for _ in 0..<26 {
            #expect(await pacer.acquire())
            pacer.release(after: .delivered(providerMessageID: nil))
        }
        #expect(ContinuousClock.now - start >= .milliseconds(99))
        pacer.setWorkerShare(0)  // never below one worker
        #expect(pacer.snapshot.rate == 1000)
    }

    @Test("Retry-After closes the lane: a provider retry comes back delayed at least that long, the lane reports the pause")
    func retryAfter() async {
        let lane = ScriptedLane { n in n == 1 ? .retry(.provider, code: "QUOTA_EXCEEDED", after: .seconds(5)) : .delivered(providerMessageID: nil) }
        let pacer = LanePacer(limits: .init(perSecond: nil, concurrency: 10))
        let paced = PacedProvider(lane, pacer: pacer)
        let outcome = await paced.send(Self.request(1))
        guard case .retry(.provider, "QUOTA_EXCEEDED", let after?) = outcome else {
            Issue.record("unexpected \(outcome)")
            return
        }
        #expect(after >= .milliseconds(4900))
        #expect(pacer.snapshot.pausedFor > 4.5)
    }

    /// RELIABILITY.md #21 and §3.5: whose a 5xx is depends on the lane's state when it comes.
    @Test("a sporadic 5xx on an open lane is the recipient's (spends an attempt); one that makes a storm, and so pauses the lane, is the provider's", arguments: [nil, 1_000.0])
    func isolatedOrStorm(_ perSecond: Double?) async {
        // Sends 1–20 delivered, 21 a lone 500, 22–40 delivered, then 41 on: 503 for every send.
        let lane = ScriptedLane { n in
            switch n {
            case 21: .retry(.provider, code: "InternalServerError", after: nil)
            case 41...: .retry(.provider, code: "ServiceUnavailable", after: nil)
            default: .delivered(providerMessageID: nil)
            }
        }
        // The storm window spans the whole test: a starved CI machine taking over a second between two sends must not
        // start a new window mid-storm (seen once: a storm answer after five, not three).
        let pacer = LanePacer(
            limits: .init(perSecond: perSecond, concurrency: 1), pauseBackoff: Backoff(base: .milliseconds(20), cap: .milliseconds(40)),
            stormWindow: 3600)
        let paced = PacedProvider(lane, pacer: pacer)
        var outcomes: [SendOutcome] = []
        for seq in 1...50 { outcomes.append(await paced.send(Self.request(Int64(seq)))) }
        #expect(outcomes[20] == .retry(.recipient, code: "InternalServerError", after: nil), "the lone 500 is the recipient's")
        #expect((pacer.snapshot.rate == nil) == (perSecond == nil), "an unpaced lane reports no rate")
        // The storm: its first answer is the recipient's. By the third at the latest the window holds three throttling
        // answers (the lone 500 may be one of them): a storm, which pauses the lane and is the provider's. After each pause
        // the window starts empty, so every third answer of the storm pauses the lane again.
        let storm = Array(outcomes[40...])
        // (The pause's delay is full jitter, so it may be 0 ms.)
        let providers = storm.indices.filter { if case .retry(.provider, "ServiceUnavailable", _?) = storm[$0] { true } else { false } }
        #expect(storm.first == .retry(.recipient, code: "ServiceUnavailable", after: nil))
        #expect(providers.count >= 3, "\(storm)")
        #expect(zip(providers, providers.dropFirst()).allSatisfy { $1 - $0 <= 3 }, "a storm answer at least every third: \(providers)")
        #expect(storm.indices.allSatisfy { providers.contains($0) || storm[$0] == .retry(.recipient, code: "ServiceUnavailable", after: nil) })
    }
}
