import BugleAPNs
import BugleCore
import BugleTesting
import Crypto
import Foundation
import BugleHTTP2
import NIOCore
import NIOHPACK
import Testing

@Suite("APNs JWT signer")
struct APNsJWTSignerTests {
    private func decodePart(_ part: Substring) throws -> [String: Any] {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.utf8.count % 4 != 0 { text += "=" }
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func claimsAndSignature() throws {
        let key = P256.Signing.PrivateKey()
        let jwt = APNSJWT.make(privateKey: key, keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAt: 1_700_000_000)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        let header = try decodePart(parts[0])
        let claims = try decodePart(parts[1])
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "ABC123DEFG")
        #expect(claims["iss"] as? String == "TEAM123456")
        #expect((claims["iat"] as? NSNumber)?.int64Value == 1_700_000_000)
        #expect(!(claims["iat"] is String))
        #expect(!jwt.contains("="))
        var signatureText = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while signatureText.utf8.count % 4 != 0 { signatureText += "=" }
        let signature = try #require(Data(base64Encoded: signatureText))
        #expect(signature.count == 64)
        let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
        let input = Data(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        #expect(key.publicKey.isValidSignature(ecdsa, for: input))
    }

    @Test func refreshTiming() async throws {
        let clock = APNsTestClock(epochStart: 1_700_000_000)
        let signer = APNSAuthenticationTokenSigner(
            privateKey: P256.Signing.PrivateKey(),
            keyID: "ABC123DEFG",
            teamID: "TEAM123456",
            clock: clock,
            epochSeconds: { Int64(clock.wallSeconds) }
        )
        let first = signer.currentToken()
        #expect(signer.mintCount == 1)
        clock.advance(by: .seconds(49 * 60))
        #expect(signer.currentToken() == first)
        clock.advance(by: .seconds(60))
        let second = signer.currentToken()
        #expect(second != first)
        #expect(signer.mintCount == 2)
        let claims = try decodePart(second.split(separator: ".")[1])
        let issuedAt = try #require(claims["iat"] as? NSNumber).int64Value
        #expect(issuedAt == Int64(1_700_003_000))
    }

    @Test func expiredProviderTokenRespectsTwentyMinutes() async {
        let clock = APNsTestClock(epochStart: 1_700_000_000)
        let signer = APNSAuthenticationTokenSigner(
            privateKey: P256.Signing.PrivateKey(),
            keyID: "ABC123DEFG",
            teamID: "TEAM123456",
            clock: clock,
            epochSeconds: { Int64(clock.wallSeconds) }
        )
        let first = signer.currentToken()
        clock.advance(by: .seconds(10 * 60))
        // Too soon: no new token may be minted.
        #expect(signer.tokenAfterExpiry(rejected: first) == nil)
        clock.advance(by: .seconds(10 * 60))
        let fresh = signer.tokenAfterExpiry(rejected: first)
        #expect(fresh != nil && fresh != first)
        // A second task reporting the same stale token gets the fresh one, no second mint.
        #expect(signer.tokenAfterExpiry(rejected: first) == fresh)
        #expect(signer.mintCount == 2)
    }
}

@Suite("APNs request headers")
struct APNsRequestHeadersTests {
    /// Reads a block back with NIOHPACK's decoder (an independent HPACK implementation).
    static func decode(_ block: HTTP2HeaderBlock) throws -> HPACKHeaders {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var bytes = block.encodedForNewConnection
        let headers = try decoder.decodeHeaders(from: &bytes)
        #expect(bytes.readableBytes == 0)
        return headers
    }

    @Test func allFields() throws {
        let headers = try Self.decode(APNSRequestHeaders.make(
            deviceToken: "abcd",
            headers: APNsHeaders(
                pushType: .voip,
                priority: 5,
                expiration: 1_700_000_000,
                collapseID: "sale",
                apnsID: "123e4567-e89b-12d3-a456-426614174000"
            ),
            topic: "com.example.app",
            authority: "api.push.apple.com",
            bearerToken: "JWT"
        ))
        #expect(headers.first(name: ":method") == "POST")
        #expect(headers.first(name: ":scheme") == "https")
        #expect(headers.first(name: ":path") == "/3/device/abcd")
        #expect(headers.first(name: ":authority") == "api.push.apple.com")
        #expect(headers.first(name: "authorization") == "bearer JWT")
        #expect(headers.first(name: "apns-topic") == "com.example.app.voip")
        #expect(headers.first(name: "apns-push-type") == "voip")
        #expect(headers.first(name: "apns-priority") == "5")
        #expect(headers.first(name: "apns-expiration") == "1700000000")
        #expect(headers.first(name: "apns-collapse-id") == "sale")
        #expect(headers.first(name: "apns-id") == "123e4567-e89b-12d3-a456-426614174000")
    }

    @Test func optionalFieldsAbsent() throws {
        let headers = try Self.decode(APNSRequestHeaders.make(
            deviceToken: "abcd",
            headers: APNsHeaders(pushType: .alert, priority: 10, expiration: nil, collapseID: nil, apnsID: "x"),
            topic: "com.example.app",
            authority: "127.0.0.1:2197",
            bearerToken: nil
        ))
        #expect(headers.first(name: "apns-topic") == "com.example.app")
        #expect(!headers.contains(name: "apns-expiration"))
        #expect(!headers.contains(name: "apns-collapse-id"))
        #expect(!headers.contains(name: "authorization"))
    }
}

@Suite("APNs error classification")
struct APNsErrorClassifierTests {
    struct Row: Sendable, CustomStringConvertible {
        var status: Int
        var reason: String?
        var expected: SendOutcome
        var description: String { "\(status) \(reason ?? "-")" }
    }

    static let rows: [Row] = [
        Row(status: 200, reason: nil, expected: .delivered(providerMessageID: "id-1")),
        Row(status: 410, reason: "Unregistered",
            expected: .invalidToken(code: "Unregistered", invalidSince: Instant(secondsSince1970: 1_700_000_000))),
        Row(status: 410, reason: "ExpiredToken",
            expected: .invalidToken(code: "ExpiredToken", invalidSince: Instant(secondsSince1970: 1_700_000_000))),
        Row(status: 400, reason: "BadDeviceToken", expected: .invalidToken(code: "BadDeviceToken", invalidSince: nil)),
        Row(status: 400, reason: "DeviceTokenNotForTopic",
            expected: .invalidToken(code: "DeviceTokenNotForTopic", invalidSince: nil)),
        Row(status: 413, reason: "PayloadTooLarge", expected: .rejected(code: "PayloadTooLarge")),
        Row(status: 400, reason: "PayloadEmpty", expected: .rejected(code: "PayloadEmpty")),
        Row(status: 400, reason: "BadCollapseId", expected: .rejected(code: "BadCollapseId")),
        Row(status: 400, reason: "BadExpirationDate", expected: .rejected(code: "BadExpirationDate")),
        Row(status: 400, reason: "BadPriority", expected: .rejected(code: "BadPriority")),
        Row(status: 400, reason: "BadMessageId", expected: .rejected(code: "BadMessageId")),
        Row(status: 400, reason: "InvalidPushType", expected: .rejected(code: "InvalidPushType")),
        Row(status: 429, reason: "TooManyRequests", expected: .retry(.recipient, code: "TooManyRequests", after: .seconds(7))),
        Row(status: 500, reason: "InternalServerError",
            expected: .retry(.provider, code: "InternalServerError", after: .seconds(7))),
        Row(status: 503, reason: "ServiceUnavailable",
            expected: .retry(.provider, code: "ServiceUnavailable", after: .seconds(7))),
        Row(status: 503, reason: "Shutdown", expected: .retry(.provider, code: "Shutdown", after: .seconds(7))),
        Row(status: 403, reason: "ExpiredProviderToken", expected: .retry(.safe, code: "ExpiredProviderToken", after: nil)),
        Row(status: 400, reason: "SomethingNew", expected: .rejected(code: "SomethingNew")),
        Row(status: 503, reason: "SomethingNew", expected: .retry(.provider, code: "SomethingNew", after: .seconds(7))),
        Row(status: 410, reason: "SomethingNew",
            expected: .invalidToken(code: "SomethingNew", invalidSince: Instant(secondsSince1970: 1_700_000_000))),
        Row(status: 502, reason: nil, expected: .retry(.provider, code: "http_502", after: .seconds(7))),
    ]

    @Test(arguments: rows)
    func classify(_ row: Row) {
        let outcome = APNSErrorClassifier.classify(
            status: row.status,
            reason: row.reason.map(APNSError.Reason.init(rawValue:)),
            timestamp: 1_700_000_000_000,
            retryAfter: .seconds(7),
            apnsID: "id-1"
        )
        #expect(outcome == row.expected)
    }

    @Test(arguments: [
        "InvalidProviderToken", "BadTopic", "TopicDisallowed", "BadCertificate", "BadCertificateEnvironment",
        "MissingTopic", "MissingProviderToken", "Forbidden", "UnrelatedKeyIdInToken", "SomethingNew",
    ])
    func haltReasons(_ reason: String) {
        let outcome = APNSErrorClassifier.classify(status: 403, reason: APNSError.Reason(rawValue: reason))
        guard case .halt(let code, _) = outcome else {
            Issue.record("expected halt for \(reason), got \(outcome)")
            return
        }
        #expect(code == reason)
    }

    /// A GOAWAY naming a configuration error halts as the answer would; a routine one, no reason, an unknown reason or
    /// debug data that is not APNs' JSON sends the request again.
    @Test(arguments: [
        (#"{"reason":"InvalidProviderToken"}"#, "InvalidProviderToken"),
        (#"{"reason":"BadCertificateEnvironment"}"#, "BadCertificateEnvironment"),
        (#"{"reason":"TopicDisallowed"}"#, "TopicDisallowed"),
        (#"{"reason":"Shutdown"}"#, nil),
        (#"{"reason":"IdleTimeout"}"#, nil),
        (#"{"reason":"SomethingNew"}"#, nil),
        (#"{"reason":null}"#, nil),
        ("", nil),
        ("Maximum active streams violated for this endpoint.", nil),
    ] as [(String, String?)])
    func goAwayReasons(_ debugData: String, halts: String?) {
        let outcome = APNSErrorClassifier.classifyGoAway(debugData: debugData)
        guard let halts else {
            #expect(outcome == nil, "\(String(describing: outcome))")
            return
        }
        guard case .halt(let code, let message) = outcome else {
            Issue.record("expected a halt for \(debugData), got \(String(describing: outcome))")
            return
        }
        #expect(code == halts && message.contains("GOAWAY"))
    }

    @Test func reasonRoundTripAndUnknown() {
        #expect(APNSError.Reason(rawValue: "Unregistered") == .unregistered)
        #expect(APNSError.Reason.badDeviceToken.rawValue == "BadDeviceToken")
        let unknown = APNSError.Reason(rawValue: "BrandNewReason")
        #expect(unknown.isUnknown)
        #expect(unknown.rawValue == "BrandNewReason")
    }
}
