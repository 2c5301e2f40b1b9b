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
        var validation = DryRunValidation(campaign: Self.campaign(body: "{{blurb}}"), provider: lane)
        await validation.validate(Self.rows(["live-near"], variables: ["blurb": String(repeating: "x", count: 4096 - payload - 10)]))
        await validation.validate(Self.rows(["live-at"], variables: ["blurb": String(repeating: "x", count: 4096 - payload)]))
        await validation.validate(Self.rows(["live-over"], variables: ["blurb": String(repeating: "x", count: 4096 - payload + 1)]))
        #expect(validation.checked == 2 && validation.valid == 2)
        #expect(validation.notSent == ["payload_too_large": 1])
        #expect(lane.sendCounts == ["live-near": 1, "live-at": 1])
    }
}
