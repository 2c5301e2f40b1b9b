import BugleCore
import BugleFCM
import BugleTesting
import Crypto
import Foundation
import Synchronization
import Testing
import _CryptoExtras

/// A service account with a fresh RSA key, as JSON and parsed.
private struct TestAccount {
    let key = (try? _RSA.Signing.PrivateKey(keySize: .bits2048))
    let json: Data

    init(tokenURI: String = "https://oauth2.example.test/token", overrides: [String: String] = [:], removing: String? = nil) throws {
        var object: [String: String] = [
            "type": "service_account",
            "project_id": "bugle-test",
            "private_key_id": "0123456789abcdef0123456789abcdef01234567",
            "private_key": try #require(key).pemRepresentation,
            "client_email": "sender@bugle-test.iam.gserviceaccount.com",
            "client_id": "1234567890",
            "token_uri": tokenURI,
        ]
        for (name, value) in overrides { object[name] = value }
        if let removing { object[removing] = nil }
        json = try JSONSerialization.data(withJSONObject: object)
    }

    func parsed() throws -> FCMServiceAccount {
        try FCMServiceAccount.parse(json, path: "sa.json")
    }
}

private func decodeSegment(_ part: Substring) throws -> Data {
    var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while text.utf8.count % 4 != 0 { text += "=" }
    return try #require(Data(base64Encoded: text))
}

@Suite("FCM service account and assertion")
struct FCMAssertionTests {
    @Test("the assertion carries RS256, kid, iss, scope, aud = token_uri, exp = iat + 3600, and verifies with the public key")
    func claims() throws {
        let account = try TestAccount()
        let jwt = try FCMAssertion.make(account: try account.parsed(), issuedAt: 1_700_000_000)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        let header = try #require(try JSONSerialization.jsonObject(with: decodeSegment(parts[0])) as? [String: Any])
        let claims = try #require(try JSONSerialization.jsonObject(with: decodeSegment(parts[1])) as? [String: Any])
        #expect(header["alg"] as? String == "RS256")
        #expect(header["typ"] as? String == "JWT")
        #expect(header["kid"] as? String == "0123456789abcdef0123456789abcdef01234567")
        #expect(claims["iss"] as? String == "sender@bugle-test.iam.gserviceaccount.com")
        #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims["aud"] as? String == "https://oauth2.example.test/token")
        #expect(claims["iat"] as? Int == 1_700_000_000)
        #expect(claims["exp"] as? Int == 1_700_003_600)
        let signature = _RSA.Signing.RSASignature(rawRepresentation: try decodeSegment(parts[2]))
        let publicKey = try #require(account.key).publicKey
        let input = Data((parts[0] + "." + parts[1]).utf8)
        #expect(publicKey.isValidSignature(signature, for: input, padding: .insecurePKCS1v1_5))
        #expect(!publicKey.isValidSignature(signature, for: Data("tampered".utf8), padding: .insecurePKCS1v1_5))
    }

    @Test("a malformed service account names the file and the key, never the key material")
    func malformed() throws {
        let cases: [(TestAccount, String)] = [
            (try TestAccount(overrides: ["type": "authorized_user"]), "\"type\" is \"authorized_user\""),
            (try TestAccount(removing: "private_key"), "missing or empty \"private_key\""),
            (try TestAccount(removing: "client_email"), "missing or empty \"client_email\""),
            (try TestAccount(overrides: ["private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"]), "\"private_key\" is not a PEM RSA private key"),
            (try TestAccount(tokenURI: "http://insecure.example/token"), "\"token_uri\" must be an https URL"),
        ]
        for (account, expected) in cases {
            #expect(throws: FCMConfigurationError.self) { try account.parsed() }
            do {
                _ = try account.parsed()
            } catch let error as FCMConfigurationError {
                #expect(error.description.hasPrefix("service account file sa.json: "))
                #expect(error.description.contains(expected), "\(error.description)")
                #expect(!error.description.contains("BEGIN"))
            }
        }
    }
}

/// A token source that counts fetches, optionally blocks until released, and can be told to fail.
private final class FakeTokenFetcher: FCMAccessTokenFetching {
    private struct State {
        var fetches = 0
        var failure: FCMAuthError?
        var gate: CheckedContinuation<Void, Never>?
        var blocked = false
    }
    private let state = Mutex(State())
    let lifetime: Duration

    init(lifetime: Duration = .seconds(3600)) {
        self.lifetime = lifetime
    }

    var fetches: Int { state.withLock { $0.fetches } }

    func fail(with error: FCMAuthError?) { state.withLock { $0.failure = error } }

    func block() { state.withLock { $0.blocked = true } }

    func release() {
        let gate = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.blocked = false
            defer { state.gate = nil }
            return state.gate
        }
        gate?.resume()
    }

    var isWaiting: Bool { state.withLock { $0.gate != nil } }

    func fetch() async throws(FCMAuthError) -> FCMAccessToken {
        let (number, failure, blocked) = state.withLock { state -> (Int, FCMAuthError?, Bool) in
            state.fetches += 1
            return (state.fetches, state.failure, state.blocked)
        }
        if blocked {
            await withCheckedContinuation { continuation in
                let released = state.withLock { state -> Bool in
                    if !state.blocked { return true }
                    state.gate = continuation
                    return false
                }
                if released { continuation.resume() }
            }
        }
        if let failure { throw failure }
        return FCMAccessToken(value: "token-\(number)", lifetime: lifetime)
    }
}

@Suite("FCM access-token cache")
struct FCMAccessTokenCacheTests {
    @Test("cached until five minutes before expiry, then refreshed once")
    func refreshTiming() async throws {
        let clock = ManualClock()
        let fetcher = FakeTokenFetcher()
        let cache = FCMAccessTokenCache(fetcher: fetcher, clock: clock)
        #expect(cache.freshToken() == nil)
        #expect(try await cache.token() == "token-1")
        clock.advance(by: .seconds(3600 - 301))
        #expect(try await cache.token() == "token-1")
        #expect(cache.freshToken() == "token-1")
        clock.advance(by: .seconds(2))
        #expect(cache.freshToken() == nil)  // due for refresh: only token() fetches
        #expect(try await cache.token() == "token-2")
        #expect(try await cache.token() == "token-2")
        #expect(fetcher.fetches == 2)
    }

    @Test("a short-lived token is refreshed at three quarters of its life, not on every call")
    func shortLived() async throws {
        let clock = ManualClock()
        let fetcher = FakeTokenFetcher(lifetime: .seconds(60))
        let cache = FCMAccessTokenCache(fetcher: fetcher, clock: clock)
        #expect(try await cache.token() == "token-1")
        clock.advance(by: .seconds(44))
        #expect(try await cache.token() == "token-1")
        clock.advance(by: .seconds(2))
        #expect(try await cache.token() == "token-2")
    }

    @Test("a token is stale once replaced or past its expiry, never while it is the current unexpired one")
    func staleness() async throws {
        let clock = ManualClock()
        let fetcher = FakeTokenFetcher(lifetime: .seconds(60))
        let cache = FCMAccessTokenCache(fetcher: fetcher, clock: clock)
        let first = try await cache.token()
        #expect(await cache.isStale(first) == false)
        clock.advance(by: .seconds(59))
        #expect(await cache.isStale(first) == false)
        clock.advance(by: .seconds(1))
        #expect(await cache.isStale(first) == true)
        let second = try await cache.token()
        #expect(second != first)
        #expect(await cache.isStale(second) == false)
        #expect(await cache.isStale(first) == true)
        #expect(await cache.isStale("never-handed-out") == true)
    }

    @Test("fifty concurrent callers share one fetch (no stampede)")
    func singleFlight() async throws {
        let clock = ManualClock()
        let fetcher = FakeTokenFetcher()
        fetcher.block()
        let cache = FCMAccessTokenCache(fetcher: fetcher, clock: clock)
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask { try await cache.token() }
            }
            while !fetcher.isWaiting { await Task.yield() }
            fetcher.release()
            for try await token in group { #expect(token == "token-1") }
        }
        #expect(fetcher.fetches == 1)
        #expect(await cache.fetchCount == 1)
    }

    @Test("after a 401 the refused token is replaced once; a stale invalidation is ignored")
    func invalidate() async throws {
        let fetcher = FakeTokenFetcher()
        let cache = FCMAccessTokenCache(fetcher: fetcher, clock: ManualClock())
        let first = try await cache.token()
        await cache.invalidate(first)
        let second = try await cache.token()
        #expect(second == "token-2")
        await cache.invalidate(first)
        #expect(try await cache.token() == "token-2")
        #expect(fetcher.fetches == 2)
    }

    @Test("a transient failure keeps a still-valid token; a rejection is reported")
    func failures() async throws {
        let clock = ManualClock()
        let fetcher = FakeTokenFetcher()
        let cache = FCMAccessTokenCache(fetcher: fetcher, clock: clock)
        #expect(try await cache.token() == "token-1")
        clock.advance(by: .seconds(3400))
        fetcher.fail(with: .unavailable("503"))
        #expect(try await cache.token() == "token-1")
        clock.advance(by: .seconds(300))
        await #expect(throws: FCMAuthError.unavailable("503")) { try await cache.token() }
        fetcher.fail(with: .rejected("invalid_grant: Invalid JWT Signature."))
        await #expect(throws: FCMAuthError.rejected("invalid_grant: Invalid JWT Signature.")) { try await cache.token() }
    }
}

@Suite("FCM error parsing and classification")
struct FCMErrorClassifierTests {
    private static func body(code: Int, status: String, errorCode: String?, message: String = "m", violations: [String] = [], badRequestFirst: Bool = false) -> [UInt8] {
        var details: [[String: Any]] = []
        if let errorCode {
            details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode])
        }
        if !violations.isEmpty {
            let badRequest: [String: Any] = [
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": violations.map { ["field": $0, "description": "bad"] },
            ]
            if badRequestFirst { details.insert(badRequest, at: 0) } else { details.append(badRequest) }
        }
        let object: [String: Any] = ["error": ["code": code, "message": message, "status": status, "details": details]]
        return Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data())
    }

    @Test("every FcmError code parses, whatever the order of details")
    func parsing() {
        for code in ["INVALID_ARGUMENT", "UNREGISTERED", "SENDER_ID_MISMATCH", "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL", "THIRD_PARTY_AUTH_ERROR", "UNSPECIFIED_ERROR", "SOMETHING_NEW"] {
            let error = FCMError.parse(httpStatus: 400, body: Self.body(code: 400, status: "X", errorCode: code, violations: ["message.data[0].value"], badRequestFirst: true))
            #expect(error.reason?.rawValue == code)
            #expect(error.fieldViolations == ["message.data[0].value"])
        }
        let plain = FCMError.parse(httpStatus: 502, body: Array("<html>bad gateway</html>".utf8))
        #expect(plain.reason == nil && plain.status == nil && plain.httpStatus == 502)
    }

    @Test("the outcome table")
    func table() {
        let cases: [(Int, String, String?, String, [String], SendOutcome)] = [
            (404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.", [], .invalidToken(code: "UNREGISTERED", invalidSince: nil)),
            (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", [], .invalidToken(code: "INVALID_TOKEN", invalidSince: nil)),
            (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value", ["message.token"], .invalidToken(code: "INVALID_TOKEN", invalidSince: nil)),
            (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.data[0].value'", ["message.data[0].value"], .rejected(code: "INVALID_ARGUMENT")),
            (400, "INVALID_ARGUMENT", nil, "Request contains an invalid argument.", [], .rejected(code: "INVALID_ARGUMENT")),
            (403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch", [], .invalidToken(code: "SENDER_ID_MISMATCH", invalidSince: nil)),
            (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "quota", [], .retry(.provider, code: "QUOTA_EXCEEDED", after: .seconds(7))),
            (503, "UNAVAILABLE", "UNAVAILABLE", "unavailable", [], .retry(.provider, code: "UNAVAILABLE", after: .seconds(7))),
            (500, "INTERNAL", "INTERNAL", "internal", [], .retry(.provider, code: "INTERNAL", after: .seconds(7))),
            (502, "", nil, "", [], .retry(.provider, code: "HTTP_502", after: .seconds(7))),
            (401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "auth", [], .halt(code: "THIRD_PARTY_AUTH_ERROR", message: "")),
            (401, "UNAUTHENTICATED", nil, "Request had invalid authentication credentials.", [], .halt(code: "UNAUTHENTICATED", message: "")),
            (403, "PERMISSION_DENIED", nil, "Permission denied", [], .halt(code: "PERMISSION_DENIED", message: "")),
            (404, "NOT_FOUND", nil, "Requested entity was not found.", [], .halt(code: "NOT_FOUND", message: "")),
        ]
        for (http, status, code, message, violations, expected) in cases {
            let error = FCMError.parse(httpStatus: http, body: status.isEmpty ? [] : Self.body(code: http, status: status, errorCode: code, message: message, violations: violations))
            let outcome = FCMErrorClassifier.classify(error, retryAfter: .seconds(7), projectID: "bugle-test")
            switch (outcome, expected) {
            case (.halt(let got, let text), .halt(let want, _)):
                #expect(got == want, "\(http) \(code ?? "-")")
                #expect(!text.isEmpty)
            default:
                #expect(outcome == expected, "\(http) \(code ?? "-") \(violations)")
            }
        }
    }
}

@Suite("Lane pause")
struct LanePauseTests {
    private struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("Retry-After is a floor; answers during a pause extend it without growing the backoff; a new episode grows it; a delivery resets it")
    func pause() {
        var random = Seeded(state: 42)
        var lane = LanePause(backoff: Backoff(base: .seconds(1), cap: .seconds(60)))
        #expect(lane.wait(now: 0) == 0)
        let until = lane.failed(now: 10, retryAfter: .seconds(5), using: &random)
        #expect(until >= 15)
        #expect(lane.wait(now: 12) >= 3)
        #expect(lane.wait(now: until) == 0)
        // Answers to requests sent before the pause: they never shorten it and are not a new episode.
        let again = lane.failed(now: 11, retryAfter: nil, using: &random)
        #expect(again >= until)
        #expect(lane.consecutiveFailures == 1)
        let longer = lane.failed(now: 11, retryAfter: .seconds(8), using: &random)
        #expect(longer >= 19)
        #expect(lane.consecutiveFailures == 1)
        // A failure after the lane reopened is the next episode.
        lane.failed(now: longer + 0.001, retryAfter: nil, using: &random)
        #expect(lane.consecutiveFailures == 2)
        lane.succeeded()
        #expect(lane.consecutiveFailures == 0)
        var now = 100.0
        for _ in 0..<20 {
            now = lane.failed(now: now, retryAfter: nil, using: &random) + 0.001
        }
        #expect(lane.consecutiveFailures == 20)
        #expect(lane.wait(now: now - 0.001) <= 60)
    }
}
