import BugleCore
import BugleFCM
import BugleSimulator
import Foundation
import Logging
import Testing

/// The FCM lane's payload breaker against the FCM simulator over TLS + HTTP/2: payload-level `INVALID_ARGUMENT`
/// answers fail their recipient, and ten in a row with no delivery between them halt the run.
@Suite("FCM payload breaker (lane + simulator over TLS/HTTP2)")
struct FCMPayloadBreakerTests {
    /// A message the simulator refuses for its payload: a `data` value that is not a string.
    static func badPayload(_ seq: Int64) -> PushRequest {
        let token = "live-\(seq):APA91b"
        let body = #"{"message":{"token":"\#(token)","data":{"n":1}}}"#
        return PushRequest(seq: seq, deviceID: seq, token: token, platform: .android, body: Array(body.utf8), apns: nil, attempt: 1)
    }

    static func goodPayload(_ seq: Int64, token: String? = nil) -> PushRequest {
        let token = token ?? "live-\(seq):APA91b"
        let body = #"{"message":{"token":"\#(token)","notification":{"title":"t","body":"b"}}}"#
        return PushRequest(seq: seq, deviceID: seq, token: token, platform: .android, body: Array(body.utf8), apns: nil, attempt: 1)
    }

    @Test("nine payload rejections fail their recipients; a delivery resets the count; the tenth in a row halts, and a bad token never counts")
    func breaker() async throws {
        try await MixedTestEnvironment.with { environment in
            let settings = try #require(try environment.settings().fcm)
            let lane = try FCMProvider(settings: settings, logger: MixedTestEnvironment.logger)
            await Self.exerciseBreaker { await lane.send($0) }
            await lane.shutdown()
            #expect(environment.fcm.counters().rejectedByReason["INVALID_ARGUMENT"] == 20)
            #expect(environment.fcm.accepted().count == 1)
        }
    }

    /// An unreachable token endpoint was one warning per send (about 65 a second, 1,879 in ten minutes of a run).
    @Test("a token endpoint that cannot be reached: every send a provider retry, one warning for the lot, the rest at debug")
    func unavailableTokenWarnsOnce() async throws {
        try await MixedTestEnvironment.with { environment in
            let settings = try #require(try environment.settings().fcm)
            var account = try FCMServiceAccount.load(path: try #require(settings.serviceAccountFile), allowReadableKeys: true)
            account.tokenURI = try #require(URL(string: "http://127.0.0.1:\(try freeLoopbackPort())/token"))
            let lines = RecordingLogHandler.Lines()
            let lane = try FCMProvider(settings: settings, account: account, tokenFetcher: nil, logger: RecordingLogHandler.logger(lines, level: .debug))
            for seq in 1...8 {
                let outcome = await lane.send(Self.goodPayload(Int64(seq)))
                #expect(outcome.code == "OAUTH_UNAVAILABLE", "\(outcome)")
            }
            await lane.shutdown()
            let unavailable = lines.all.filter { $0.contains("FCM access token unavailable") }
            #expect(unavailable.count == 8, "\(unavailable)")
            #expect(unavailable.filter { $0.hasPrefix("warning") }.count == 1, "\(unavailable.filter { $0.hasPrefix("warning") })")
            #expect(environment.fcm.accepted().isEmpty)
        }
    }

    @Test("the same through sends started without suspending (a free stream and a cached access token)")
    func breakerOnStartedSends() async throws {
        try await MixedTestEnvironment.with { environment in
            let settings = try #require(try environment.settings().fcm)
            let lane = try FCMProvider(settings: settings, logger: MixedTestEnvironment.logger)
            await lane.prepare()
            await Self.exerciseBreaker { request in
                await withCheckedContinuation { continuation in
                    if !lane.startSend(request, completion: { continuation.resume(returning: $0) }) {
                        continuation.resume(returning: .halt(code: "not_started", message: "the lane did not start the send"))
                    }
                }
            }
            await lane.shutdown()
            #expect(environment.fcm.counters().rejectedByReason["INVALID_ARGUMENT"] == 20)
            #expect(environment.fcm.accepted().count == 1)
        }
    }

    /// 9 bad payloads, a delivery, 9 bad payloads, a bad token, then the 10th bad payload in a row.
    static func exerciseBreaker(_ lane: (PushRequest) async -> SendOutcome) async {
        var seq: Int64 = 0
        func send(_ request: (Int64) -> PushRequest) async -> SendOutcome {
            seq += 1
            return await lane(request(seq))
        }
        for _ in 1...9 {
            #expect(await send(Self.badPayload) == .rejected(code: "INVALID_ARGUMENT"))
        }
        // A delivery in between: the next nine are again only failures.
        guard case .delivered = await send({ Self.goodPayload($0) }) else {
            Issue.record("the good message was not delivered")
            return
        }
        for _ in 1...9 {
            #expect(await send(Self.badPayload) == .rejected(code: "INVALID_ARGUMENT"))
        }
        // A token-level INVALID_ARGUMENT (the simulator's bad0 prefix) is the token's fault: it deactivates that
        // device and neither counts towards nor resets the breaker.
        guard case .invalidToken = await send({ Self.goodPayload($0, token: "bad0-\($0):APA91b") }) else {
            Issue.record("the bad0 token was not classified as an invalid token")
            return
        }
        let tenth = await send(Self.badPayload)
        guard case .halt(let code, let message) = tenth else {
            Issue.record("the tenth payload rejection in a row did not halt: \(tenth)")
            return
        }
        #expect(code == "INVALID_ARGUMENT")
        #expect(message.contains("10 times in a row"))
    }
}
