import BugleCore
import BugleSimulator
import BugleTesting
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Testing
import _CryptoExtras

/// A throwaway simulator directory, the service account's private key, and helpers that build
/// assertions, form bodies and messages for the FCM simulator tests.
struct FCMTestEnvironment {
    static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    static let jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    let directory: String
    let material: SimulatorCertificates
    let serviceAccount: [String: Any]
    let privateKey: _RSA.Signing.PrivateKey

    init() throws {
        directory = TestScratch.root + "bugle-fcm-\(UUID().uuidString)"
        material = try SimulatorCertificates.generate(in: directory, port: 0)
        let data = try Data(contentsOf: URL(fileURLWithPath: material.fcmServiceAccountFile))
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let pem = object["private_key"] as? String
        else {
            throw FCMTestClient.ClientError(description: "service account unreadable")
        }
        serviceAccount = object
        privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
    }

    func configuration(_ customize: (inout FCMSimulatorConfiguration) -> Void = { _ in }) -> FCMSimulatorConfiguration {
        var configuration = FCMSimulatorConfiguration(certificates: material)
        configuration.threads = 1
        customize(&configuration)
        return configuration
    }

    /// An RS256 assertion (header and claims overridable; nil values are left out).
    func assertion(
        now: Double = Date().timeIntervalSince1970,
        lifetime: Double = 3600,
        audience: String = SimulatorCertificates.googleTokenURI,
        scope: String? = FCMTestEnvironment.messagingScope,
        issuer: String? = nil,
        keyID: String? = nil,
        signingKey: _RSA.Signing.PrivateKey? = nil
    ) throws -> String {
        var header: [String: Any] = ["alg": "RS256", "typ": "JWT"]
        header["kid"] = keyID ?? material.fcmPrivateKeyID
        var claims: [String: Any] = [
            "iss": issuer ?? material.fcmClientEmail,
            "aud": audience,
            "iat": Int(now),
            "exp": Int(now + lifetime),
        ]
        claims["scope"] = scope
        let input =
            Self.base64URL(try JSONSerialization.data(withJSONObject: header)) + "."
            + Self.base64URL(try JSONSerialization.data(withJSONObject: claims))
        let signature = try (signingKey ?? privateKey).signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Self.base64URL(signature.rawRepresentation)
    }

    /// The form body of a token request.
    static func tokenForm(assertion: String, grantType: String = jwtBearer) -> [UInt8] {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encode = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text }
        return Array("grant_type=\(encode(grantType))&assertion=\(encode(assertion))".utf8)
    }

    var sendPath: String { "/v1/projects/\(material.fcmProjectID)/messages:send" }

    func bearer(lifetime: Duration = .seconds(3600), now: Date = Date()) -> [(String, String)] {
        [("authorization", "Bearer " + material.fcmAccessToken(lifetime: lifetime, now: now)), ("content-type", "application/json")]
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A token-targeted message body.
    static func message(token: String, extra: String = "") -> [UInt8] {
        Array(#"{"message":{"token":"\#(token)","notification":{"title":"Hi","body":"Spring sale"}\#(extra)}}"#.utf8)
    }
}

/// Starts a simulator and a client, runs `body`, and always stops both.
func withFCMSimulator(
    _ environment: FCMTestEnvironment,
    version: FCMTestClient.Version = .http2,
    configure: (inout FCMSimulatorConfiguration) -> Void = { _ in },
    _ body: (FCMSimulator, FCMTestClient) async throws -> Void
) async throws {
    let simulator = FCMSimulator(configuration: environment.configuration(configure))
    let port = try await simulator.start()
    let client: FCMTestClient
    do {
        client = try FCMTestClient(port: port, caPEM: environment.material.caPEM, version: version)
    } catch {
        try await simulator.stop()
        throw error
    }
    do {
        try await body(simulator, client)
    } catch {
        await client.close()
        try await simulator.stop()
        throw error
    }
    await client.close()
    try await simulator.stop()
}

@Suite("FCMSimulator over TLS (HTTP/2 and HTTP/1.1)", .serialized)
struct FCMSimulatorTests {
    // MARK: - OAuth token endpoint

    @Test func tokenGrantReturnsAUsableBearerToken() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        try await withFCMSimulator(environment, configure: { $0.accessTokenLifetime = .seconds(120) }) { simulator, client in
            let response = try await client.request(.POST, "/token", body: FCMTestEnvironment.tokenForm(assertion: environment.assertion()))
            #expect(client.negotiated.withLockedValue { $0 } == "h2")
            #expect(response.status == 200, "\(response.text)")
            let json = try #require(response.json)
            let token = try #require(json["access_token"] as? String)
            #expect(token.hasPrefix("ya29."))
            #expect(json["expires_in"] as? Int == 120)
            #expect(json["token_type"] as? String == "Bearer")
            #expect(!response.text.contains(environment.material.fcmPrivateKeyID))

            let sent = try await client.request(
                .POST,
                environment.sendPath,
                headers: [("authorization", "Bearer \(token)")],
                body: FCMTestEnvironment.message(token: "live-1")
            )
            #expect(sent.status == 200, "\(sent.text)")
            #expect(simulator.counters().tokenGrants == 1)
            #expect(simulator.accepted().map(\.target) == ["live-1"])
        }
    }

    @Test func tokenGrantRejectsBadAssertions() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        let otherKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        try await withFCMSimulator(environment) { simulator, client in
            let port = try #require(simulator.port)
            func grant(_ assertion: String, grantType: String = FCMTestEnvironment.jwtBearer) async throws -> FCMTestClient.Response {
                try await client.request(.POST, "/token", body: FCMTestEnvironment.tokenForm(assertion: assertion, grantType: grantType))
            }
            func oauthError(_ response: FCMTestClient.Response) -> String? { response.json?["error"] as? String }

            let badSignature = try await grant(environment.assertion(signingKey: otherKey))
            #expect(badSignature.status == 400)
            #expect(oauthError(badSignature) == "invalid_grant")
            #expect(badSignature.json?["error_description"] as? String == "Invalid JWT Signature.")

            let wrongAudience = try await grant(environment.assertion(audience: "https://example.com/token"))
            #expect(wrongAudience.status == 400)
            #expect(oauthError(wrongAudience) == "invalid_grant")

            let badScope = try await grant(environment.assertion(scope: "https://www.googleapis.com/auth/userinfo.email"))
            #expect(badScope.status == 400)
            #expect(oauthError(badScope) == "invalid_scope")

            let noScope = try await grant(environment.assertion(scope: nil))
            #expect(oauthError(noScope) == "invalid_scope")

            let tooLong = try await grant(environment.assertion(lifetime: 7200))
            #expect(tooLong.status == 400)
            #expect(oauthError(tooLong) == "invalid_grant")

            let expired = try await grant(environment.assertion(now: Date().timeIntervalSince1970 - 7200))
            #expect(oauthError(expired) == "invalid_grant")

            let wrongKeyID = try await grant(environment.assertion(keyID: String(repeating: "0", count: 40)))
            #expect(oauthError(wrongKeyID) == "invalid_grant")

            let unknownClient = try await grant(environment.assertion(issuer: "someone@else.iam.gserviceaccount.com"))
            #expect(unknownClient.status == 401)
            #expect(oauthError(unknownClient) == "invalid_client")

            let wrongGrant = try await grant(environment.assertion(), grantType: "client_credentials")
            #expect(oauthError(wrongGrant) == "unsupported_grant_type")

            // Both accepted audiences work: Google's and the simulator's own token URI.
            let own = try await grant(environment.assertion(audience: SimulatorCertificates.fcmTokenURI(port: port)))
            #expect(own.status == 200)
            let google = try await grant(environment.assertion(audience: SimulatorCertificates.googleTokenURI))
            #expect(google.status == 200)
            let cloudPlatform = try await grant(environment.assertion(scope: "openid https://www.googleapis.com/auth/cloud-platform"))
            #expect(cloudPlatform.status == 200)

            let counters = simulator.counters()
            #expect(counters.tokenGrants == 3)
            #expect(counters.tokenErrors["invalid_grant"] == 5)
            #expect(counters.tokenErrors["invalid_scope"] == 2)
            #expect(counters.tokenErrors["invalid_client"] == 1)
        }
    }

    @Test func http1TokenGrantAndSendWork() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        try await withFCMSimulator(environment, version: .http1) { simulator, client in
            let response = try await client.request(.POST, "/token", body: FCMTestEnvironment.tokenForm(assertion: environment.assertion()))
            #expect(client.negotiated.withLockedValue { $0 } == "http/1.1")
            #expect(response.status == 200, "\(response.text)")
            let token = try #require(response.json?["access_token"] as? String)
            let sent = try await client.request(
                .POST,
                environment.sendPath,
                headers: [("authorization", "Bearer \(token)")],
                body: FCMTestEnvironment.message(token: "live-http1")
            )
            #expect(sent.status == 200, "\(sent.text)")
            let counters = simulator.counters()
            #expect(counters.connections == 2)
            #expect(counters.http2Connections == 0)
            #expect(simulator.accepted().map(\.target) == ["live-http1"])
        }
    }

    // MARK: - Bearer checks

    @Test func sendWithoutValidBearerIsUnauthenticated() async throws {
        let environment = try FCMTestEnvironment()
        let other = try FCMTestEnvironment()
        defer {
            environment.remove()
            other.remove()
        }
        try await withFCMSimulator(environment) { simulator, client in
            let body = FCMTestEnvironment.message(token: "live-1")
            let missing = try await client.request(.POST, environment.sendPath, body: body)
            let garbage = try await client.request(.POST, environment.sendPath, headers: [("authorization", "Bearer nope")], body: body)
            let foreign = try await client.request(.POST, environment.sendPath, headers: other.bearer(), body: body)
            let basic = try await client.request(.POST, environment.sendPath, headers: [("authorization", "Basic Zm9vOmJhcg==")], body: body)
            for response in [missing, garbage, foreign, basic] {
                #expect(response.status == 401)
                #expect(response.errorStatus == "UNAUTHENTICATED")
                #expect(response.header("www-authenticate") == #"Bearer realm="https://accounts.google.com/", error="invalid_token""#)
                #expect(response.fcmErrorCode == nil, "transport-level auth failures carry no FcmError")
            }
            #expect(simulator.counters().unauthenticated == 4)
            #expect(simulator.accepted().isEmpty)
        }
    }

    @Test func expiredAccessTokenIsRejected() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        let clock = APNsTestClock()
        try await withFCMSimulator(
            environment,
            configure: {
                $0.wallClock = { clock.wallSeconds }
                $0.accessTokenLifetime = .seconds(60)
            }
        ) { simulator, client in
            let grant = try await client.request(
                .POST,
                "/token",
                body: FCMTestEnvironment.tokenForm(assertion: environment.assertion(now: clock.wallSeconds))
            )
            #expect(grant.json?["expires_in"] as? Int == 60)
            let token = try #require(grant.json?["access_token"] as? String)
            let headers = [("authorization", "Bearer \(token)")]

            let fresh = try await client.request(.POST, environment.sendPath, headers: headers, body: FCMTestEnvironment.message(token: "live-1"))
            #expect(fresh.status == 200)
            clock.advance(by: .seconds(59))
            let stillFresh = try await client.request(.POST, environment.sendPath, headers: headers, body: FCMTestEnvironment.message(token: "live-2"))
            #expect(stillFresh.status == 200)
            clock.advance(by: .seconds(2))
            let expired = try await client.request(.POST, environment.sendPath, headers: headers, body: FCMTestEnvironment.message(token: "live-3"))
            #expect(expired.status == 401)
            #expect(expired.errorStatus == "UNAUTHENTICATED")
            #expect(expired.header("www-authenticate") != nil)
            #expect(expired.errorDetails.first?["reason"] as? String == "ACCESS_TOKEN_EXPIRED")

            // A token minted offline (bugle-sim fcm-token) that is already expired is refused too.
            let minted = environment.material.fcmAccessToken(
                lifetime: .seconds(1),
                now: Date(timeIntervalSince1970: clock.wallSeconds - 10)
            )
            let offline = try await client.request(
                .POST,
                environment.sendPath,
                headers: [("authorization", "Bearer \(minted)")],
                body: FCMTestEnvironment.message(token: "live-4")
            )
            #expect(offline.status == 401)
            #expect(simulator.accepted().map(\.target) == ["live-1", "live-2"])
        }
    }

    // MARK: - Send route

    @Test func deliveredMessagesAreNamedAndRecorded() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        let recordFile = environment.directory + "/fcm-records.jsonl"
        try await withFCMSimulator(environment, configure: { $0.recordFile = recordFile }) { simulator, client in
            let snake = Array(
                ##"{"message":{"token":"live-snake","data":{"k":"v"},"notification":{"title":"Hi","body":"Sale"},"android":{"collapse_key":"sale","priority":"high","ttl":"3600s","restricted_package_name":"com.example","direct_boot_ok":true,"notification":{"tag":"t1","channel_id":"promo","click_action":"OPEN","color":"#ff00aa","notification_priority":"PRIORITY_HIGH","visibility":"public","notification_count":3,"event_time":"2025-01-02T03:04:05.5Z","vibrate_timings":["0.5s","1s"],"light_settings":{"color":{"red":1,"green":0.5,"blue":0},"light_on_duration":"1s","light_off_duration":"2s"}},"fcm_options":{"analytics_label":"spring_sale"}},"apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"badge":1}},"fcm_options":{"analytics_label":"x"}},"webpush":{"headers":{"TTL":"60"},"data":{"a":"b"},"notification":{"title":"Hi","actions":[{"action":"open"}]},"fcm_options":{"link":"https://example.com/sale","analytics_label":"w"}},"fcm_options":{"analytics_label":"top"}}}"##
                    .utf8
            )
            let camel = Array(
                ##"{"validateOnly":false,"message":{"token":"live-camel","data":{"k":"v"},"notification":{"title":"Hi","body":"Sale"},"android":{"collapseKey":"sale","priority":"NORMAL","ttl":"1.5s","restrictedPackageName":"com.example","directBootOk":true,"notification":{"tag":"t2","channelId":"promo","clickAction":"OPEN","color":"#FF00AA","notificationPriority":"PRIORITY_HIGH","notificationCount":3,"eventTime":"2025-01-02T03:04:05+01:00","defaultSound":true,"lightSettings":{"color":{"red":1},"lightOnDuration":"1s","lightOffDuration":"2s"}},"fcmOptions":{"analyticsLabel":"spring_sale"}},"fcmOptions":{"analyticsLabel":"top"}}}"##
                    .utf8
            )
            let first = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: snake)
            let second = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: camel)
            let third = try await client.request(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: FCMTestEnvironment.message(token: "live-third")
            )
            let fourth = try await client.request(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: FCMTestEnvironment.message(token: "live-fourth")
            )
            // The project number is accepted in the path too.
            let byNumber = try await client.request(
                .POST,
                "/v1/projects/\(environment.material.fcmProjectNumber)/messages:send",
                headers: environment.bearer(),
                body: FCMTestEnvironment.message(token: "live-number")
            )
            var names: [String] = []
            for response in [first, second, third, fourth, byNumber] {
                #expect(response.status == 200, "\(response.text)")
                #expect(response.header("content-type")?.hasPrefix("application/json") == true)
                names.append(try #require(response.json?["name"] as? String))
            }
            #expect(names[0].hasPrefix("projects/bugle-sim/messages/"))
            #expect(names[4].hasPrefix("projects/\(environment.material.fcmProjectNumber)/messages/"))
            #expect(Set(names).count == 5)

            let records = simulator.accepted()
            #expect(records.map(\.target) == ["live-snake", "live-camel", "live-third", "live-fourth", "live-number"])
            #expect(records.map(\.name) == names)
            #expect(records[0].collapseKey == "sale")
            #expect(records[0].tag == "t1")
            #expect(records[0].androidPriority == "high")
            #expect(records[0].ttl == "3600s")
            #expect(records[0].title == "Hi")
            #expect(records[1].collapseKey == "sale")
            #expect(records[1].tag == "t2")
            #expect(records[1].androidPriority == "NORMAL")
            #expect(records[1].token == "live-camel")
            #expect(records[2].payloadSHA256 == records[3].payloadSHA256, "messages differing only in the token hash alike")
            #expect(records[0].payloadSHA256 != records[2].payloadSHA256)
            #expect(records.allSatisfy { $0.connectionID == 1 })
            #expect(simulator.counters().accepted == 5)
            #expect(simulator.requestTimes().map(\.status) == [200, 200, 200, 200, 200])
            // Still serving: the file catches up within its flush interval (0.2 s), not only at the exit.
            let deadline = ContinuousClock.now + .seconds(10)
            var written = 0
            while written < 5, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                written = (try? String(contentsOfFile: recordFile, encoding: .utf8))?.split(separator: "\n").count ?? 0
            }
            #expect(written == 5, "the record file held \(written) of 5 records while the simulator was serving")
        }
        // Stopped: the record file is flushed.
        let lines = try String(contentsOfFile: recordFile, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 5)
        let decoded = try lines.map { try JSONDecoder().decode(FCMRecord.self, from: Data($0.utf8)) }
        #expect(decoded.map(\.target) == ["live-snake", "live-camel", "live-third", "live-fourth", "live-number"])
        #expect(decoded[0].collapseKey == "sale")
    }

    /// The limit is the payload's, not the request's (PROTOCOLS.md §2.2): Bugle's builder and the simulator count the
    /// same bytes, the `message` object without its target. The simulator used to count the token too, so copy Bugle
    /// passed (a dry run included) failed every recipient of a real run with a long token.
    @Test("a payload of exactly 4096 bytes passes with a 3,000-byte token and one byte more is refused, by bugle-sim and Bugle's builder alike")
    func payloadLimitLeavesTheTargetOut() async throws {
        let environment = try FCMTestEnvironment()
        let token = "live-" + String(repeating: "t", count: 3000)
        let builder = FCMMessageBuilder(
            template: MessageTemplate(defaultLocale: "en", locales: ["en": LocalizedCopy(title: "T", body: "")], data: ["k": "v"]))
        func copy(_ bytes: Int) -> RenderedCopy { RenderedCopy(locale: "en", title: "T", body: String(repeating: "b", count: bytes)) }
        // The payload of the empty copy: the body less `{"message":` and `}`, and less `"token":"",`.
        let empty = try builder.template(platform: .android, copy: copy(0))
        let room = 4096 - (empty.fixedSize - 12 - 11)
        let atLimit = try builder.body(token: token, platform: .android, copy: copy(room))
        #expect(throws: PayloadTooLarge(size: 4097, limit: 4096)) { try builder.body(token: token, platform: .android, copy: copy(room + 1)) }
        // With validate_only, as `--dry-run --validate` sends it: the request's wrapper is not payload either.
        let validateOnly = try builder.body(token: token, platform: .android, copy: copy(room), validateOnly: true)
        #expect(throws: PayloadTooLarge(size: 4097, limit: 4096)) {
            try builder.body(token: token, platform: .android, copy: copy(room + 1), validateOnly: true)
        }
        let over = Array(String(decoding: atLimit, as: UTF8.self).replacingOccurrences(of: #""body":"b"#, with: #""body":"bb"#).utf8)
        #expect(over.count == atLimit.count + 1)
        try await withFCMSimulator(environment) { simulator, client in
            let accepted = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: atLimit)
            #expect(accepted.status == 200, "\(accepted.text)")
            let checked = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: validateOnly)
            #expect(checked.status == 200, "\(checked.text)")
            let refused = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: over)
            #expect(refused.status == 400)
            #expect(refused.fcmErrorCode == "INVALID_ARGUMENT")
            #expect(refused.text.contains("Message is too big: 4097 bytes, the limit is 4096 bytes."), "\(refused.text)")
        }
    }

    @Test func validateOnlyIsAnsweredButNotDelivered() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        try await withFCMSimulator(environment) { simulator, client in
            for spelling in ["validate_only", "validateOnly"] {
                let response = try await client.request(
                    .POST,
                    environment.sendPath,
                    headers: environment.bearer(),
                    body: Array(#"{"\#(spelling)":true,"message":{"token":"live-1","data":{"a":"b"}}}"#.utf8)
                )
                #expect(response.status == 200)
                #expect(response.json?["name"] as? String == "projects/bugle-sim/messages/fake_message_id")
            }
            // validate_only still validates.
            let invalid = try await client.request(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: Array(#"{"validate_only":true,"message":{"token":"live-1","data":{"a":1}}}"#.utf8)
            )
            #expect(invalid.status == 400)
            #expect(simulator.accepted().isEmpty)
            let counters = simulator.counters()
            #expect(counters.validateOnly == 2)
            #expect(counters.accepted == 0)
            #expect(simulator.requestTimes().map(\.validateOnly) == [true, true, false])
        }
    }

    @Test func invalidMessagesGetInvalidArgumentWithFieldViolations() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        try await withFCMSimulator(environment) { simulator, client in
            func send(_ json: String) async throws -> FCMTestClient.Response {
                try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: Array(json.utf8))
            }
            let nonString = try await send(#"{"message":{"token":"live-1","data":{"a":"b","n":1}}}"#)
            #expect(nonString.status == 400)
            #expect(nonString.errorStatus == "INVALID_ARGUMENT")
            #expect(nonString.fcmErrorCode == "INVALID_ARGUMENT")
            #expect(nonString.violationFields == ["message.data[1].value"])
            #expect(nonString.detailTypes == ["BadRequest", "FcmError"])

            let androidData = try await send(#"{"message":{"token":"live-1","android":{"data":{"x":true}}}}"#)
            #expect(androidData.violationFields == ["message.android.data[0].value"])

            let unknown = try await send(#"{"message":{"token":"live-1","notification":{"title":"Hi","subtitle":"x"}}}"#)
            #expect(unknown.status == 400)
            #expect(unknown.violationFields == ["message.notification"])
            #expect(unknown.text.contains("Unknown name"))

            let unknownTop = try await send(#"{"message":{"token":"live-1"},"dry_run":true}"#)
            #expect(unknownTop.status == 400)

            let twoTargets = try await send(#"{"message":{"token":"live-1","topic":"news"}}"#)
            #expect(twoTargets.status == 400)
            #expect(twoTargets.fcmErrorCode == "INVALID_ARGUMENT")

            let noTarget = try await send(#"{"message":{"notification":{"title":"Hi"}}}"#)
            #expect(noTarget.status == 400)

            let reserved = try await send(#"{"message":{"token":"live-1","data":{"google.sent_time":"1"}}}"#)
            #expect(reserved.status == 400)
            let reservedFrom = try await send(#"{"message":{"token":"live-1","data":{"from":"me"}}}"#)
            #expect(reservedFrom.status == 400)

            for ttl in [#""10""#, #""-1s""#, #""2419201s""#, "10", #""1.0000000001s""#] {
                let response = try await send(#"{"message":{"token":"live-1","android":{"ttl":\#(ttl)}}}"#)
                #expect(response.status == 400, "ttl \(ttl)")
            }
            let priority = try await send(#"{"message":{"token":"live-1","android":{"priority":"urgent"}}}"#)
            #expect(priority.status == 400)
            let color = try await send(#"{"message":{"token":"live-1","android":{"notification":{"color":"red"}}}}"#)
            #expect(color.status == 400)
            let link = try await send(#"{"message":{"token":"live-1","webpush":{"fcm_options":{"link":"http://example.com"}}}}"#)
            #expect(link.status == 400)
            let label = try await send(#"{"message":{"token":"live-1","fcm_options":{"analytics_label":"no spaces allowed"}}}"#)
            #expect(label.status == 400)
            let notJSON = try await send("{not json")
            #expect(notJSON.status == 400)
            let badToken = try await send(#"{"message":{"token":"has space"}}"#)
            #expect(badToken.status == 400)
            #expect(badToken.detailTypes == ["FcmError", "BadRequest"])

            // Size: the message JSON text as sent, 4096 bytes (2048 for topics).
            let bigData = String(repeating: "x", count: 5000)
            let oversize = try await send(#"{"message":{"token":"live-1","data":{"blob":"\#(bigData)"}}}"#)
            #expect(oversize.status == 400)
            #expect(oversize.fcmErrorCode == "INVALID_ARGUMENT")
            let mid = String(repeating: "x", count: 3000)
            let topicTooBig = try await send(#"{"message":{"topic":"news","data":{"blob":"\#(mid)"}}}"#)
            #expect(topicTooBig.status == 400)
            let tokenFits = try await send(#"{"message":{"token":"live-fits","data":{"blob":"\#(mid)"}}}"#)
            #expect(tokenFits.status == 200)
            let topicFits = try await send(#"{"message":{"topic":"/topics/news","data":{"k":"v"}}}"#)
            #expect(topicFits.status == 200)
            let condition = try await send(#"{"message":{"condition":"'a' in topics && 'b' in topics"}}"#)
            #expect(condition.status == 200)

            // Route, method and project.
            let wrongProject = try await client.request(
                .POST,
                "/v1/projects/other-project/messages:send",
                headers: environment.bearer(),
                body: FCMTestEnvironment.message(token: "live-1")
            )
            #expect(wrongProject.status == 403)
            #expect(wrongProject.errorStatus == "PERMISSION_DENIED")
            let notFound = try await client.request(.POST, "/v1/projects/bugle-sim/messages:batch", headers: environment.bearer())
            #expect(notFound.status == 404)
            let wrongMethod = try await client.request(.GET, environment.sendPath, headers: environment.bearer())
            #expect(wrongMethod.status == 405)

            let records = simulator.accepted()
            #expect(records.map(\.target) == ["live-fits", "news", "'a' in topics && 'b' in topics"])
            #expect(records.map(\.targetKind) == ["token", "topic", "condition"])
            #expect(simulator.counters().rejectedByReason["INVALID_ARGUMENT"] == 21)
        }
    }

    // MARK: - Scripted outcomes

    @Test func scriptedTokenPrefixesGiveTheirAnswers() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        try await withFCMSimulator(environment, configure: { $0.retryAfter = .seconds(2) }) { simulator, client in
            let expected: [(prefix: String, status: Int, canonical: String, errorCode: String, retryAfter: String?)] = [
                ("dead", 404, "NOT_FOUND", "UNREGISTERED", nil),
                ("DEAD", 404, "NOT_FOUND", "UNREGISTERED", nil),
                ("bad0", 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", nil),
                ("sndr", 403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", nil),
                ("3pa0", 401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", nil),
                ("4290", 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "2"),
                ("5030", 503, "UNAVAILABLE", "UNAVAILABLE", "2"),
                ("5000", 500, "INTERNAL", "INTERNAL", nil),
            ]
            for (index, row) in expected.enumerated() {
                let response = try await client.request(
                    .POST,
                    environment.sendPath,
                    headers: environment.bearer(),
                    body: FCMTestEnvironment.message(token: "\(row.prefix)-token-\(index)")
                )
                #expect(response.status == row.status, "\(row.prefix)")
                #expect(response.errorStatus == row.canonical, "\(row.prefix)")
                #expect(response.fcmErrorCode == row.errorCode, "\(row.prefix)")
                #expect(response.header("retry-after") == row.retryAfter, "\(row.prefix)")
            }
            // Scripts apply only after validation: an invalid message with a scripted token is a plain 400.
            let invalid = try await client.request(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: FCMTestEnvironment.message(token: "dead-x", extra: #","data":{"n":1}"#)
            )
            #expect(invalid.status == 400)
            #expect(invalid.violationFields == ["message.data[0].value"])
            // ...and validate_only checks the registration like a send (FCM's dry run finds deleted registrations),
            // while a live token's dry run is answered with the fake name and never delivered.
            let validateOnly = try await client.request(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: Array(#"{"validate_only":true,"message":{"token":"dead-y"}}"#.utf8)
            )
            #expect(validateOnly.status == 404)
            #expect(validateOnly.fcmErrorCode == "UNREGISTERED")
            let validateLive = try await client.request(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: Array(#"{"validate_only":true,"message":{"token":"live-y"}}"#.utf8)
            )
            #expect(validateLive.status == 200)

            // `fa11` is never answered: a later stream on the same connection is answered, that one is not.
            let hung = try await client.start(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: FCMTestEnvironment.message(token: "fa11-token")
            )
            let after = try await client.request(
                .POST,
                environment.sendPath,
                headers: environment.bearer(),
                body: FCMTestEnvironment.message(token: "live-after")
            )
            #expect(after.status == 200)
            #expect(simulator.counters().hung == 1)
            #expect(simulator.requestTimes().contains { $0.target == "fa11-token" && $0.status == 0 })
            await client.closeConnections()
            await #expect(throws: (any Error).self) { _ = try await hung.get() }

            #expect(simulator.accepted().map(\.target) == ["live-after"])
            let counters = simulator.counters()
            #expect(counters.rejectedByReason["UNREGISTERED"] == 3)  // two sends and one validate_only
            #expect(counters.rejectedByReason["SENDER_ID_MISMATCH"] == 1)
            #expect(counters.rejectedByReason["THIRD_PARTY_AUTH_ERROR"] == 1)
            #expect(counters.unauthenticated == 0)
        }
    }

    // MARK: - Quota and faults

    @Test func quotaOfFivePerWindowAnswers429WithRetryAfter() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        // A whole-second epoch keeps clock arithmetic exact.
        let clock = APNsTestClock(epochStart: Date().timeIntervalSince1970.rounded())
        try await withFCMSimulator(
            environment,
            configure: {
                $0.quotaPerMinute = 5
                $0.quotaWindow = .seconds(60)
                $0.wallClock = { clock.wallSeconds }
            }
        ) { simulator, client in
            let headers = environment.bearer(now: Date(timeIntervalSince1970: clock.wallSeconds))
            func send(_ token: String, extra: String = "") async throws -> FCMTestClient.Response {
                try await client.request(.POST, environment.sendPath, headers: headers, body: FCMTestEnvironment.message(token: token, extra: extra))
            }
            // Five counted answers: three deliveries, one 400 and one 404 (4xx count) ...
            #expect(try await send("live-1").status == 200)
            #expect(try await send("live-2").status == 200)
            #expect(try await send("live-3", extra: #","data":{"n":1}"#).status == 400)
            #expect(try await send("dead-4").status == 404)
            // ... 429 and 5xx answers do not count ...
            #expect(try await send("4290-5").status == 429)
            #expect(try await send("5030-6").status == 503)
            #expect(try await send("5000-7").status == 500)
            clock.advance(by: .seconds(20))
            #expect(try await send("live-8").status == 200)

            // ... so the next one is over quota until the first counted message leaves the window.
            clock.advance(by: .seconds(10))
            let over = try await send("live-9")
            #expect(over.status == 429)
            #expect(over.errorStatus == "RESOURCE_EXHAUSTED")
            #expect(over.fcmErrorCode == "QUOTA_EXCEEDED")
            #expect(over.detailTypes.contains("QuotaFailure"))
            #expect(over.header("retry-after") == "30")
            let retryAfter = try #require(over.header("retry-after").flatMap(Double.init))

            clock.advance(by: .seconds(29))
            let stillOver = try await send("live-10")
            #expect(stillOver.status == 429)
            #expect(stillOver.header("retry-after") == "1")

            clock.advance(by: .seconds(1))
            #expect(try await send("live-11").status == 200)

            let counters = simulator.counters()
            #expect(counters.quotaRejections == 2)
            #expect(counters.accepted == 4)
            let log = simulator.requestTimes()
            let first429 = try #require(log.first { $0.reason == "QUOTA_EXCEEDED" && $0.status == 429 && $0.target == nil })
            #expect(first429.retryAfter == 30)
            let lastDelivery = try #require(log.last)
            #expect(lastDelivery.status == 200)
            #expect(lastDelivery.time - first429.time >= retryAfter)
        }
    }

    @Test func injectedFaultsAndLatency() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        try await withFCMSimulator(environment, configure: { $0.faults.unavailableRatio = 1; $0.retryAfter = .seconds(3) }) { simulator, client in
            let response = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: FCMTestEnvironment.message(token: "live-1"))
            #expect(response.status == 503)
            #expect(response.fcmErrorCode == "UNAVAILABLE")
            #expect(response.header("retry-after") == "3")
            #expect(simulator.accepted().isEmpty)
        }
        try await withFCMSimulator(environment, configure: { $0.faults.internalRatio = 1 }) { _, client in
            let response = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: FCMTestEnvironment.message(token: "live-1"))
            #expect(response.status == 500)
            #expect(response.fcmErrorCode == "INTERNAL")
        }
        try await withFCMSimulator(environment, configure: { $0.faults.latency = .milliseconds(200) }) { simulator, client in
            let start = ContinuousClock.now
            let response = try await client.request(.POST, environment.sendPath, headers: environment.bearer(), body: FCMTestEnvironment.message(token: "live-1"))
            #expect(response.status == 200)
            #expect(start.duration(to: .now) >= .milliseconds(200))
            #expect(simulator.accepted().count == 1)
        }
    }

    @Test func manyConcurrentStreamsAreEachDeliveredOnce() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        try await withFCMSimulator(environment) { simulator, client in
            let headers = environment.bearer()
            let path = environment.sendPath
            let count = 1000
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<count {
                    group.addTask {
                        try await client.request(.POST, path, headers: headers, body: FCMTestEnvironment.message(token: "live-\(index)")).status
                    }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.count == count)
            #expect(statuses.allSatisfy { $0 == 200 })
            let records = simulator.accepted()
            #expect(records.count == count)
            #expect(Set(records.map(\.target)).count == count)
            #expect(Set(records.map(\.name)).count == count)
            #expect(simulator.counters().connections == 1)
        }
    }

    // MARK: - Material

    @Test func materialHoldsAGoogleFormatServiceAccount() throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        let material = environment.material
        let account = environment.serviceAccount
        #expect(account["type"] as? String == "service_account")
        #expect(account["project_id"] as? String == "bugle-sim")
        #expect(account["client_email"] as? String == "bugle-sim@bugle-sim.iam.gserviceaccount.com")
        #expect((account["private_key_id"] as? String)?.count == 40)
        #expect((account["private_key"] as? String)?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
        #expect(account["token_uri"] as? String == SimulatorCertificates.googleTokenURI)
        #expect(account["universe_domain"] as? String == "googleapis.com")
        #expect(account["client_id"] is String)
        #expect(account["auth_uri"] is String)
        #expect(environment.privateKey.publicKey.derRepresentation == material.fcmPublicKey.derRepresentation)
        for file in [material.fcmServiceAccountFile, material.fcmInfoFile] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(file)")
        }
        // No fcm: section until a port is known.
        #expect(!material.providersYAML(port: 2197).contains("fcm:"))

        try material.writeServiceAccount(fcmPort: 4443)
        try material.writeProvidersFile(port: 2197, fcmPort: 4443)
        let rewritten = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: material.fcmServiceAccountFile))) as? [String: Any]
        #expect(rewritten?["token_uri"] as? String == "https://127.0.0.1:4443/token")
        #expect(rewritten?["private_key"] as? String == account["private_key"] as? String)
        let yaml = try String(contentsOfFile: material.providersFile, encoding: .utf8)
        #expect(yaml.contains("fcm:\n  service_account_file: \(material.fcmServiceAccountFile)\n  endpoint: https://127.0.0.1:4443\n"))
        #expect(yaml.contains("  ca_file: \(material.caFile)\n  connections: 8\n"))
        #expect(yaml.contains("apns:\n  endpoint: https://127.0.0.1:2197\n"))

        // Reloading keeps the FCM identity; a directory without FCM files (older versions) gains one.
        let reloaded = try SimulatorCertificates.load(from: material.directory)
        #expect(reloaded.fcmPrivateKeyID == material.fcmPrivateKeyID)
        #expect(reloaded.fcmPublicKey.derRepresentation == material.fcmPublicKey.derRepresentation)
        let token = material.fcmAccessToken()
        #expect(FCMAccessTokenAuthority(secret: reloaded.fcmTokenSecret).verify(token, now: Date().timeIntervalSince1970) != .invalid)

        try FileManager.default.removeItem(atPath: material.fcmServiceAccountFile)
        try FileManager.default.removeItem(atPath: material.fcmInfoFile)
        let upgraded = try SimulatorCertificates.load(from: material.directory)
        #expect(FileManager.default.fileExists(atPath: upgraded.fcmServiceAccountFile))
        #expect(upgraded.fcmPrivateKeyID != material.fcmPrivateKeyID)
        #expect(upgraded.keyID == material.keyID, "APNs material untouched")
        #expect(FCMAccessTokenAuthority(secret: upgraded.fcmTokenSecret).verify(token, now: Date().timeIntervalSince1970) == .invalid)
    }
}
