import BugleCore
import BugleSimulator
import BugleTesting
import Foundation
import NIOSSL
import Testing

@testable import BugleFCM

/// FCM access tokens by workload identity federation (`external_account` credentials) against the simulator's STS and
/// IAM credentials endpoints over TLS + HTTP/2, the lane built from the providers file's settings as the CLI builds it.
@Suite("FCM with workload identity federation (external_account)")
struct FCMFederationTests {
    static let audience = "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/bugle/providers/k8s"
    static let subject = "eyJhbGciOiJSUzI1NiJ9.subject-CANARY.sig"
    static let impersonated = "bugle-sender@bugle-sim.iam.gserviceaccount.com"

    /// An `external_account` configuration for `environment`'s FCM simulator.
    /// - Parameters:
    ///   - source: The `credential_source` object.
    ///   - impersonate: The service account to act as, if any.
    ///   - subjectTokenType: The configuration's `subject_token_type`.
    static func configuration(
        _ environment: MixedTestEnvironment, source: [String: Any], impersonate: String? = impersonated,
        subjectTokenType: String = "urn:ietf:params:oauth:token-type:jwt"
    ) throws -> String {
        var object: [String: Any] = [
            "type": "external_account",
            "audience": audience,
            "subject_token_type": subjectTokenType,
            "token_url": "https://127.0.0.1:\(environment.fcmPort)/v1/token",
            "credential_source": source,
        ]
        if let impersonate {
            object["service_account_impersonation_url"] =
                "https://127.0.0.1:\(environment.fcmPort)/v1/projects/-/serviceAccounts/\(impersonate):generateAccessToken"
        }
        let path = environment.directory + "/external-account-\(UUID().uuidString.prefix(8)).json"
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        return path
    }

    /// The FCM lane with its credentials from `file` and the simulator's project, as `bugle run` builds it.
    static func lane(
        _ environment: MixedTestEnvironment, file: String, processEnvironment: [String: String] = [:], proxy: ProxySetting? = nil
    ) throws -> FCMProvider {
        var settings = try #require(try environment.settings().fcm)
        if let proxy { settings.proxy = proxy }
        settings.serviceAccountFile = file
        settings.projectID = environment.material.fcmProjectID
        // Debug builds of the simulator and Bugle share two cores with the rest of the suite: give requests room, so
        // a starved scheduler is not mistaken for a lost answer (as MixedTestEnvironment.lanes does).
        settings.timeoutSeconds = 60
        return try FCMProvider(settings: settings, environment: processEnvironment, logger: MixedTestEnvironment.logger)
    }

    /// Sends `count` messages at once through `lane`; returns the outcomes that were not deliveries (empty when all
    /// were delivered).
    static func undelivered(_ count: Int, through lane: FCMProvider) async -> [String] {
        await withTaskGroup(of: String?.self) { group in
            for seq in 1...Int64(count) {
                group.addTask {
                    let outcome = await lane.send(FCMPayloadBreakerTests.goodPayload(seq))
                    if case .delivered = outcome { return nil }
                    return "\(outcome)"
                }
            }
            return await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
        }
    }

    /// Sends one message through a lane built from `file`; returns the halt's message, or a description of the outcome
    /// that was not a halt (which fails the caller's expectations on the message). A halt must be `OAUTH_REJECTED`.
    static func halt(
        _ environment: MixedTestEnvironment, file: String, processEnvironment: [String: String] = [:], proxy: ProxySetting? = nil
    ) async throws -> String {
        let lane = try lane(environment, file: file, processEnvironment: processEnvironment, proxy: proxy)
        let outcome = await lane.send(FCMPayloadBreakerTests.goodPayload(1))
        await lane.shutdown()
        guard case .halt(let code, let message) = outcome else { return "no halt: \(outcome)" }
        #expect(code == "OAUTH_REJECTED", "\(message)")
        return message
    }

    static func federated(_ configuration: inout FCMSimulatorConfiguration) {
        configuration.federation = .init(audience: audience, subjectTokens: [subject], serviceAccountEmail: impersonated)
    }

    @Test("a projected-token file, exchanged at STS and impersonating a service account: 200 messages delivered, no service-account key used")
    func fileWithImpersonation() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            let token = environment.directory + "/projected-token"
            try (Self.subject + "\n").write(toFile: token, atomically: true, encoding: .utf8)
            let lane = try Self.lane(environment, file: try Self.configuration(environment, source: ["file": token]))
            let failures = await Self.undelivered(200, through: lane)
            #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
            await lane.shutdown()
            let counters = environment.fcm.counters()
            #expect(counters.stsExchanges == 1 && counters.impersonations == 1, "\(counters)")
            #expect(counters.tokenGrants == 0)
            #expect(Set(environment.fcm.accepted().compactMap(\.token)).count == 200)
        }
    }

    @Test("a url source (a link-local metadata service with its header, JSON format) and the federated token used directly: delivered")
    func urlWithoutImpersonation() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            try await FCMMetadataServerTests.withMetadataServer(environment, configure: { $0.azureIdentityToken = Self.subject }) { metadata, port in
                let source: [String: Any] = [
                    "url": "http://127.0.0.1:\(port)/metadata/identity/oauth2/token?api-version=2018-02-01&resource=api://bugle",
                    "headers": ["Metadata": "True"],
                    "format": ["type": "json", "subject_token_field_name": "access_token"],
                ]
                let lane = try Self.lane(environment, file: try Self.configuration(environment, source: source, impersonate: nil))
                let failures = await Self.undelivered(50, through: lane)
                #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
                await lane.shutdown()
                #expect(metadata.counters().identityTokens == 1)
                let counters = environment.fcm.counters()
                #expect(counters.stsExchanges == 1 && counters.impersonations == 0, "\(counters)")
            }
        }
    }

    /// GitHub Actions' shape: the token URL is HTTPS (its certificate checked against the section's `ca_file` here),
    /// with the job's request token as a bearer header, the ID token in the answer's `value`.
    /// A metadata simulator serving GitHub Actions' OIDC token URL over TLS (the simulators' certificate), wanting the
    /// request token `request-CANARY` and answering the federation's subject token.
    static func withTokenURL(
        _ environment: MixedTestEnvironment, _ body: (MetadataServerSimulator, Int) async throws -> Void
    ) async throws {
        let certificate = try NIOSSLCertificate(bytes: Array(environment.material.serverCertificatePEM.utf8), format: .pem)
        let key = try NIOSSLPrivateKey(bytes: Array(environment.material.serverKeyPEM.utf8), format: .pem)
        let tls = try NIOSSLContext(configuration: .makeServerConfiguration(certificateChain: [.certificate(certificate)], privateKey: .privateKey(key)))
        try await FCMMetadataServerTests.withMetadataServer(environment, configure: {
            $0.tls = tls
            $0.oidcToken = (requestToken: "request-CANARY", idToken: Self.subject)
        }, body)
    }

    @Test("an https:// url source (GitHub Actions' OIDC token URL, bearer header, json value): delivered; a wrong request token halts with the 401")
    func httpsURLSource() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            try await Self.withTokenURL(environment) { metadata, port in
                func source(_ requestToken: String) -> [String: Any] {
                    [
                        "url": "https://127.0.0.1:\(port)/abc/_apis/distributedtask/hubs/Actions/plans/p/jobs/j/idtoken?api-version=2.0&audience=\(Self.audience)",
                        "headers": ["Authorization": "Bearer \(requestToken)"],
                        "format": ["type": "json", "subject_token_field_name": "value"],
                    ]
                }
                let lane = try Self.lane(environment, file: try Self.configuration(environment, source: source("request-CANARY"), impersonate: nil))
                let failures = await Self.undelivered(50, through: lane)
                #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
                await lane.shutdown()
                #expect(metadata.counters().identityTokens == 1)
                let refused = try await Self.halt(environment, file: try Self.configuration(environment, source: source("stale"), impersonate: nil))
                #expect(refused.contains("the subject token URL at 127.0.0.1:\(port) answered HTTP 401") && !refused.contains("CANARY"), "\(refused)")
            }
        }
    }

    /// Behind the section's proxy (`proxy:`), the `https://` token URL goes through it like STS and FCM: the proxy sees a
    /// `CONNECT` to the token URL's host and port, and the ID token still reaches STS. A proxy that refuses the tunnel
    /// (403) halts the lane naming the token URL and the proxy's refusal.
    @Test("an https:// url source behind the section's proxy: fetched through the proxy's CONNECT; a proxy refusing the tunnel halts naming both")
    func httpsURLSourceThroughProxy() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            try await Self.withTokenURL(environment) { metadata, port in
                let file = try Self.configuration(
                    environment,
                    source: [
                        "url": "https://127.0.0.1:\(port)/idtoken?audience=\(Self.audience)",
                        "headers": ["Authorization": "Bearer request-CANARY"],
                        "format": ["type": "json", "subject_token_field_name": "value"],
                    ], impersonate: nil)
                let proxy = try await ConnectProxy.start()
                let refusing = try await ConnectProxy.start(refuseWith: 403)
                do {
                    let lane = try Self.lane(environment, file: file, proxy: .proxy(host: "127.0.0.1", port: proxy.port, tls: false, credentialsEnv: nil))
                    let failures = await Self.undelivered(20, through: lane)
                    await lane.shutdown()
                    #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
                    #expect(metadata.counters().identityTokens == 1)
                    let targets = proxy.requests.map(\.target)
                    #expect(targets.contains("127.0.0.1:\(port)"), "\(targets)")
                    #expect(targets.contains("127.0.0.1:\(environment.fcmPort)"), "\(targets)")

                    let refused = try await Self.halt(
                        environment, file: file, proxy: .proxy(host: "127.0.0.1", port: refusing.port, tls: false, credentialsEnv: nil))
                    #expect(
                        refused.contains("the subject token URL at 127.0.0.1:\(port): the proxy http://127.0.0.1:\(refusing.port) refused the tunnel to 127.0.0.1:\(port): 403"),
                        "\(refused)")
                    #expect(metadata.counters().identityTokens == 1, "the refused tunnel reached the token URL")
                } catch {
                    await proxy.stop()
                    await refusing.stop()
                    throw error
                }
                await proxy.stop()
                await refusing.stop()
            }
        }
    }

    @Test("refusals halt with the reason and without the subject token: an unknown subject token, another service account, a missing token file")
    func refusals() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            let wrong = environment.directory + "/wrong-token"
            try "another-CANARY".write(toFile: wrong, atomically: true, encoding: .utf8)
            let right = environment.directory + "/right-token"
            try Self.subject.write(toFile: right, atomically: true, encoding: .utf8)
            let cases: [(String, String)] = [
                (try Self.configuration(environment, source: ["file": wrong]), "workload identity federation gave no access token: STS: invalid_grant: The subject token is invalid"),
                (
                    try Self.configuration(environment, source: ["file": right], impersonate: "someone-else@bugle-sim.iam.gserviceaccount.com"),
                    "IAM generateAccessToken: PERMISSION_DENIED: Permission 'iam.serviceAccounts.getAccessToken' denied"
                ),
                (try Self.configuration(environment, source: ["file": environment.directory + "/no-such-token"]), "cannot read the subject token file"),
            ]
            for (file, reason) in cases {
                let message = try await Self.halt(environment, file: file)
                #expect(message.contains(reason) && !message.contains("CANARY"), "\(message)")
            }
            #expect(environment.fcm.accepted().isEmpty)
        }
    }

    // MARK: - AWS

    static let awsAccount = FCMSimulatorConfiguration.AWSAccount(
        accessKeyID: "ASIABUGLEEXAMPLE", secretAccessKey: "aws-secret-CANARY/key+1", sessionToken: "aws-session-CANARY-token==")
    static let awsVerification = "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"

    static func awsFederated(_ configuration: inout FCMSimulatorConfiguration) {
        configuration.federation = .init(audience: audience, subjectTokens: [], serviceAccountEmail: impersonated, aws: awsAccount)
    }

    /// An AWS `external_account` configuration; `metadata` is the instance metadata service's port, if any.
    static func awsConfiguration(_ environment: MixedTestEnvironment, metadata port: Int?, sessionToken: Bool = true) throws -> String {
        var source: [String: Any] = ["environment_id": "aws1", "regional_cred_verification_url": awsVerification]
        if let port {
            source["region_url"] = "http://127.0.0.1:\(port)/latest/meta-data/placement/availability-zone"
            source["url"] = "http://127.0.0.1:\(port)/latest/meta-data/iam/security-credentials"
            if sessionToken { source["imdsv2_session_token_url"] = "http://127.0.0.1:\(port)/latest/api/token" }
        }
        return try configuration(environment, source: source, subjectTokenType: "urn:ietf:params:aws:token-type:aws4_request")
    }

    @Test("AWS: credentials and region from the environment, a signed GetCallerIdentity exchanged at STS, a service account impersonated: delivered")
    func awsFromEnvironment() async throws {
        try await MixedTestEnvironment.with(fcm: Self.awsFederated) { environment in
            let variables = [
                "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": Self.awsAccount.accessKeyID,
                "AWS_SECRET_ACCESS_KEY": Self.awsAccount.secretAccessKey, "AWS_SESSION_TOKEN": Self.awsAccount.sessionToken ?? "",
            ]
            let lane = try Self.lane(environment, file: try Self.awsConfiguration(environment, metadata: nil), processEnvironment: variables)
            let failures = await Self.undelivered(100, through: lane)
            #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
            await lane.shutdown()
            let counters = environment.fcm.counters()
            #expect(counters.stsExchanges == 1 && counters.impersonations == 1 && counters.tokenGrants == 0, "\(counters)")
        }
    }

    @Test("AWS on EC2: region, role and credentials from instance metadata with an IMDSv2 session token: delivered")
    func awsFromInstanceMetadata() async throws {
        try await MixedTestEnvironment.with(fcm: Self.awsFederated) { environment in
            let instance = MetadataServerConfiguration.AWSInstance(availabilityZone: "ap-southeast-2c", roleName: "bugle-sender", credentials: Self.awsAccount)
            try await FCMMetadataServerTests.withMetadataServer(environment, configure: { $0.awsInstance = instance }) { metadata, port in
                let lane = try Self.lane(environment, file: try Self.awsConfiguration(environment, metadata: port))
                let failures = await Self.undelivered(100, through: lane)
                #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
                await lane.shutdown()
                let served = metadata.counters()
                #expect(served.awsSessionTokens == 1 && served.awsCredentials == 1 && served.awsRefused == 0, "\(served)")
                #expect(environment.fcm.counters().stsExchanges == 1)
            }
        }
    }

    @Test("AWS refusals halt with the reason and no secret: a wrong secret (SignatureDoesNotMatch), IMDSv1 where IMDSv2 is required, no role, no region")
    func awsRefusals() async throws {
        try await MixedTestEnvironment.with(fcm: Self.awsFederated) { environment in
            var roleless = MetadataServerConfiguration.AWSInstance(availabilityZone: "us-east-1a", roleName: nil, credentials: Self.awsAccount)
            roleless.requireSessionToken = true
            let instance = MetadataServerConfiguration.AWSInstance(availabilityZone: "us-east-1a", roleName: "bugle-sender", credentials: Self.awsAccount)
            let wrongSecret = [
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": Self.awsAccount.accessKeyID,
                "AWS_SECRET_ACCESS_KEY": "another-CANARY-secret", "AWS_SESSION_TOKEN": Self.awsAccount.sessionToken ?? "",
            ]
            func halt(_ file: String, _ variables: [String: String] = [:]) async throws -> String {
                let message = try await Self.halt(environment, file: file, processEnvironment: variables)
                #expect(!message.contains("CANARY"), "\(message)")
                return message
            }
            let signature = try await halt(try Self.awsConfiguration(environment, metadata: nil), wrongSecret)
            #expect(signature.contains("STS: invalid_grant: Received invalid AWS response of type SignatureDoesNotMatch"), "\(signature)")
            let region = try await halt(try Self.awsConfiguration(environment, metadata: nil), ["AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"])
            #expect(region.contains("no AWS region: AWS_REGION is not set and credential_source has no region_url"), "\(region)")
            try await FCMMetadataServerTests.withMetadataServer(environment, configure: { $0.awsInstance = instance }) { metadata, port in
                let imdsv1 = try await halt(try Self.awsConfiguration(environment, metadata: port, sessionToken: false))
                #expect(imdsv1.contains("answered HTTP 401: the instance requires IMDSv2; add imdsv2_session_token_url"), "\(imdsv1)")
                #expect(metadata.counters().awsRefused == 1)
            }
            try await FCMMetadataServerTests.withMetadataServer(environment, configure: { $0.awsInstance = roleless }) { _, port in
                let none = try await halt(try Self.awsConfiguration(environment, metadata: port))
                #expect(none.contains("answered HTTP 404: no IAM role is attached to the instance"), "\(none)")
            }
            #expect(environment.fcm.accepted().isEmpty)
        }
    }

    // MARK: - Executable

    static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"

    /// A program at `directory/name` that counts its runs in `directory/runs`, writes the variables it got to
    /// `directory/seen`, and prints `response` (`EXPIRY` replaced by an hour from now), then exits with `status`.
    static func program(_ directory: String, _ name: String, response: String, status: Int = 0) throws -> String {
        let path = directory + "/" + name
        try """
            #!/bin/sh
            echo run >> \(directory)/runs
            printf '%s\\n' "$GOOGLE_EXTERNAL_ACCOUNT_AUDIENCE|$GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE|$GOOGLE_EXTERNAL_ACCOUNT_INTERACTIVE|$GOOGLE_EXTERNAL_ACCOUNT_IMPERSONATED_EMAIL|$GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE" > \(directory)/seen
            expiry=$(($(date +%s) + 3600))
            printf '%s' '\(response)' | sed "s/EXPIRY/$expiry/"
            exit \(status)

            """.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        return path
    }

    static func runs(_ directory: String) -> Int {
        ((try? String(contentsOfFile: directory + "/runs", encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    static let allowed = [FCMExecutableSource.allowVariable: "1"]
    static var goodResponse: String {
        #"{"version":1,"success":true,"token_type":"urn:ietf:params:oauth:token-type:id_token","id_token":"\#(subject)","expiration_time":EXPIRY}"#
    }

    @Test("an executable source: run once, given the audience, token type and impersonated account; its ID token exchanged: delivered")
    func executable() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            let directory = try TestScratch.directory(prefix: "bugle-executable")
            let program = try Self.program(directory, "token-helper", response: Self.goodResponse)
            let file = try Self.configuration(
                environment, source: ["executable": ["command": program + " --audience pool", "timeout_millis": 5000]],
                subjectTokenType: Self.idTokenType)
            let lane = try Self.lane(environment, file: file, processEnvironment: Self.allowed)
            let failures = await Self.undelivered(100, through: lane)
            #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
            await lane.shutdown()
            #expect(Self.runs(directory) == 1)
            let seen = (try? String(contentsOfFile: directory + "/seen", encoding: .utf8)) ?? ""
            #expect(seen == "\(Self.audience)|\(Self.idTokenType)|0|\(Self.impersonated)|\n", "\(seen)")
            #expect(environment.fcm.counters().stsExchanges == 1)
        }
    }

    @Test("an executable source with output_file: a still-valid response there is used without running the program")
    func executableOutputFile() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            let directory = try TestScratch.directory(prefix: "bugle-executable")
            let program = try Self.program(directory, "failing-helper", response: "", status: 7)
            let cached = directory + "/cached.json"
            try Self.goodResponse.replacingOccurrences(of: "EXPIRY", with: String(Int(Date().timeIntervalSince1970) + 3600))
                .write(toFile: cached, atomically: true, encoding: .utf8)
            let file = try Self.configuration(
                environment, source: ["executable": ["command": program, "output_file": cached]], subjectTokenType: Self.idTokenType)
            let lane = try Self.lane(environment, file: file, processEnvironment: Self.allowed)
            let failures = await Self.undelivered(20, through: lane)
            #expect(failures.isEmpty, "\(failures.count) not delivered, such as \(failures.prefix(3))")
            await lane.shutdown()
            #expect(Self.runs(directory) == 0, "the program ran although its output file held a valid response")
        }
    }

    @Test("executable refusals: not allowed without GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1; a failure response, an exit status, another token type halt by name")
    func executableRefusals() async throws {
        try await MixedTestEnvironment.with(fcm: Self.federated) { environment in
            let directory = try TestScratch.directory(prefix: "bugle-executable")
            let good = try Self.program(directory, "good", response: Self.goodResponse)
            let goodFile = try Self.configuration(environment, source: ["executable": ["command": good]], subjectTokenType: Self.idTokenType)
            #expect(throws: FCMConfigurationError.unsupported(
                "\(goodFile) has an executable credential_source, which runs a program: set GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1 to allow it")
            ) {
                try Self.lane(environment, file: goodFile)
            }
            #expect(Self.runs(directory) == 0)

            let cases: [(String, Int, String)] = [
                (#"{"version":1,"success":false,"code":"401","message":"Caller not authorized CANARY-free"}"#, 0, "the executable reported failure: 401: Caller not authorized"),
                (Self.goodResponse, 3, "exited with status 3"),
                (Self.goodResponse.replacingOccurrences(of: "id_token\",\"id_token", with: "saml2\",\"id_token"), 0, "token_type is not the configuration's subject_token_type"),
                ("not json CANARY", 0, "the executable printed no JSON response"),
            ]
            for (index, (response, status, reason)) in cases.enumerated() {
                let program = try Self.program(directory, "helper-\(index)", response: response, status: status)
                let file = try Self.configuration(environment, source: ["executable": ["command": program]], subjectTokenType: Self.idTokenType)
                let message = try await Self.halt(environment, file: file, processEnvironment: Self.allowed)
                #expect(message.contains(reason), "\(message)")
                #expect(!message.contains("CANARY") || reason.contains("Caller"), "\(message)")
            }
            #expect(environment.fcm.accepted().isEmpty)
        }
    }

    @Test("a program still running at its timeout is killed, and the exchange counts as unavailable (retried), not refused")
    func executableTimeout() async throws {
        let directory = try TestScratch.directory(prefix: "bugle-executable")
        let path = directory + "/slow"
        try "#!/bin/sh\necho started > \(directory)/started\nexec sleep 30\n".write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        let token = FCMExecutableSubjectToken(
            source: FCMExecutableSource(command: [path], timeout: .milliseconds(500), outputFile: nil),
            audience: Self.audience, tokenType: Self.idTokenType, impersonatedEmail: nil, environment: [:])
        do throws(FCMAuthError) {
            _ = try await token.make()
            Issue.record("a program that never finished gave a token")
        } catch {
            guard case .unavailable = error else {
                Issue.record("expected unavailable, got \(error)")
                return
            }
            #expect(error.description.contains("did not finish within"), "\(error)")
        }
        #expect(FileManager.default.fileExists(atPath: directory + "/started"))
    }
}
