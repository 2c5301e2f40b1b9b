import BugleCore
import BugleRunner
import Foundation
import Synchronization
import Testing

/// An FCM lane answering `validate_only` sends by token prefix, counting the sends of each token.
private final class ScriptedValidationLane: PushProvider {
    let kind = ProviderKind.fcm
    private let sends = Mutex<[String: Int]>([:])

    /// `live…` valid; `dead…` UNREGISTERED; `quota…` 429 QUOTA_EXCEEDED (Retry-After 5 s) every time; `flaky…`
    /// 503 once, then valid; `late…` 429 with a Retry-After of two minutes; `oauth…` no access token; `lost…` a
    /// connection lost after writing; `halt…` a halting refusal.
    func send(_ request: PushRequest) async -> SendOutcome {
        let count = sends.withLock { sends in
            sends[request.token, default: 0] += 1
            return sends[request.token, default: 0]
        }
        let token = request.token
        if token.hasPrefix("dead") { return .invalidToken(code: "UNREGISTERED", invalidSince: nil) }
        if token.hasPrefix("quota") { return .retry(.provider, code: "QUOTA_EXCEEDED", after: .seconds(5)) }
        if token.hasPrefix("flaky"), count == 1 { return .retry(.provider, code: "UNAVAILABLE", after: nil) }
        if token.hasPrefix("late") { return .retry(.provider, code: "QUOTA_EXCEEDED", after: .seconds(120)) }
        if token.hasPrefix("oauth") { return .retry(.provider, code: "OAUTH_UNAVAILABLE", after: nil) }
        if token.hasPrefix("lost") { return .ambiguous(code: "connection_lost") }
        if token.hasPrefix("halt") { return .halt(code: "INVALID_ARGUMENT", message: "FCM rejected the message 10 times in a row") }
        return .delivered(providerMessageID: "projects/p/messages/fake_message_id")
    }

    func shutdown() async {}

    /// Sends per token.
    var sendCounts: [String: Int] { sends.withLock { $0 } }
}

/// A clock whose sleeps return at once, recording how long each was asked to be.
private final class RecordingClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let slept = Mutex<[Duration]>([])
    var now: Instant { Instant(offset: .zero) }
    var minimumResolution: Duration { .nanoseconds(1) }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        slept.withLock { $0.append(deadline.offset) }
    }

    /// Every sleep's length, in the order asked.
    var sleeps: [Duration] { slept.withLock { $0 } }
}

@Suite("--dry-run --validate: only FCM's verdicts count as checked")
struct DryRunValidationTests {
    static func campaign(body: String = "B") -> Campaign {
        Campaign(
            name: "v", notificationType: "t", segment: Segment(sql: "SELECT 1"),
            message: MessageTemplate(defaultLocale: "en", locales: ["en": LocalizedCopy(title: "T", body: body)]))
    }

    static func rows(_ tokens: [String], variables: [String: String?] = [:]) -> [SegmentRow] {
        tokens.enumerated().map { index, token in
            SegmentRow(deviceID: Int64(index + 1), userID: "u\(index)", token: token, platform: "android", variables: variables)
        }
    }

    @Test("answers that are no verdict are asked again (3 attempts, Retry-After honoured) and then counted as not checked, by code")
    func noVerdictIsNotChecked() async {
        let lane = ScriptedValidationLane()
        let clock = RecordingClock()
        var validation = DryRunValidation(
            campaign: Self.campaign(), provider: lane, backoff: Backoff(base: .milliseconds(1), cap: .milliseconds(1)), clock: clock)
        await validation.validate(Self.rows(["live-1", "live-2", "dead-1", "quota-1", "flaky-1", "late-1", "oauth-1", "oauth-2", "lost-1"]))
        #expect(validation.checked == 4)
        #expect(validation.valid == 3)
        #expect(validation.refused == ["UNREGISTERED": 1])
        #expect(validation.notChecked == ["QUOTA_EXCEEDED": 2, "OAUTH_UNAVAILABLE": 2, "connection_lost": 1])
        #expect(!validation.isComplete && validation.halted == nil)
        let sends = lane.sendCounts
        let expected: [String: Int] = ["live-1": 1, "live-2": 1, "dead-1": 1, "quota-1": 3, "flaky-1": 2, "oauth-1": 3, "oauth-2": 3, "lost-1": 3]
        #expect(sends.filter { $0.key != "late-1" } == expected)
        // A Retry-After longer than a dry run waits is not waited out, nor sent before it is up.
        #expect(sends["late-1"] == 1, "\(sends)")
        // quota-1's two waits are its Retry-After; the others' are the backoff's (at most 1 ms).
        let sleeps = clock.sleeps
        #expect(sleeps.filter { $0 == .seconds(5) }.count == 2, "\(sleeps)")
        // quota-1 2, flaky-1 1, oauth-1 and oauth-2 2 each, lost-1 2; late-1 none.
        #expect(sleeps.count == 9, "\(sleeps)")
    }

    @Test("every verdict counts: valid, refused, and the halting answer (checked and refused), which stops the validation")
    func haltingAnswerCounts() async {
        let lane = ScriptedValidationLane()
        var validation = DryRunValidation(campaign: Self.campaign(), provider: lane, concurrency: 1, clock: RecordingClock())
        await validation.validate(Self.rows(["live-1", "dead-1", "halt-1", "live-2"]))
        #expect(validation.checked == 3)
        #expect(validation.valid == 1)
        #expect(validation.refused == ["UNREGISTERED": 1, "INVALID_ARGUMENT": 1])
        #expect(validation.halted == "INVALID_ARGUMENT: FCM rejected the message 10 times in a row")
        #expect(validation.isComplete)
        #expect(lane.sendCounts["live-2"] == nil)
    }

    @Test("a message within 21 bytes of the limit is sent for validation; one over it is counted as not sent (payload_too_large)")
    func nearTheLimit() async throws {
        let lane = ScriptedValidationLane()
        // The payload of a message whose body is `{{blurb}}` with blurb empty, as `--validate` builds it.
        let composer = NotificationComposer(campaign: Self.campaign(body: "{{blurb}}"), runID: 0, validateOnly: true)
        let empty = try #require(try? composer.compose(
            seq: 1, deviceID: 1, token: "", platform: .android, selection: MessageSelection(locale: "en", variables: ["blurb": ""]), attempt: 1, now: 0
        ).get())
        // Less `{"validate_only":true,"message":` and its `}`, and `"token":"",`.
        let payload = empty.body.count - #"{"validate_only":true,"message":}"#.utf8.count - #""token":"","#.utf8.count
        var validation = DryRunValidation(campaign: Self.campaign(body: "{{blurb}}"), provider: lane, clock: RecordingClock())
        await validation.validate(Self.rows(["live-near"], variables: ["blurb": String(repeating: "x", count: 4096 - payload - 10)]))
        await validation.validate(Self.rows(["live-at"], variables: ["blurb": String(repeating: "x", count: 4096 - payload)]))
        await validation.validate(Self.rows(["live-over"], variables: ["blurb": String(repeating: "x", count: 4096 - payload + 1)]))
        #expect(validation.checked == 2 && validation.valid == 2)
        #expect(validation.notSent == ["payload_too_large": 1])
        #expect(lane.sendCounts == ["live-near": 1, "live-at": 1])
    }
}
