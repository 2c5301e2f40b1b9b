import BugleCore
import BugleRunner
import BugleSimulator
import BugleTesting
import Foundation
import PostgresNIO
import Testing

/// FCM access tokens from Google Cloud's metadata server (`credentials: metadata_server`): real HTTP/1.1 to the
/// simulator's metadata server, real TLS + HTTP/2 to the FCM simulator, which accepts the tokens it issues.
@Suite("FCM with tokens from the metadata server", .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct FCMMetadataServerTests {
    typealias Support = LedgerTestSupport

    /// Starts a metadata server for `environment`'s FCM simulator, runs `body` with it and its port, and stops it.
    static func withMetadataServer(
        _ environment: MixedTestEnvironment, configure: (inout MetadataServerConfiguration) -> Void = { _ in },
        _ body: (MetadataServerSimulator, Int) async throws -> Void
    ) async throws {
        var configuration = MetadataServerConfiguration(certificates: environment.material)
        configure(&configuration)
        let server = MetadataServerSimulator(configuration: configuration)
        let port = try await server.start()
        do {
            try await body(server, port)
        } catch {
            try await server.stop()
            throw error
        }
        try await server.stop()
    }

    /// The server's first two answers are 503 (a metadata server still starting), and its tokens live 2 s through a
    /// run of about 5 s: the lane waits out the 503s, refreshes as tokens run out, and never asks the service
    /// account's token endpoint.
    @Test("tokens from the metadata server: two 503s first, then 2-second tokens through a 5-second run; every FCM message sent once, with the firebase.messaging scope, none through the token endpoint")
    func lane() async throws {
        try await MixedTestEnvironment.with(fcm: { $0.accessTokenLifetime = .seconds(2) }) { environment in
            try await Self.withMetadataServer(environment, configure: {
                $0.accessTokenLifetime = .seconds(2)
                $0.unavailableFirst = 2
            }) { metadata, port in
                try await Support.withFreshDatabase { client in
                    try await MixedTestEnvironment.seed(client, count: 4_000, deadEvery: 1_000_000)
                    let campaign = FCMCampaignTests.mixedCampaign(window: 400, rates: [.fcm: 400])
                    let lanes = try environment.lanes(for: campaign, fcmEnvironment: ["GCE_METADATA_HOST": "127.0.0.1:\(port)"]) {
                        $0.fcm?.serviceAccountFile = nil
                        $0.fcm?.credentials = .metadataServer
                        $0.fcm?.projectID = environment.material.fcmProjectID
                    }
                    let (runID, result) = try await FCMCampaignTests.run(client, campaign, lanes: lanes)
                    #expect(result.ending == .completed)
                    let records = environment.fcm.accepted()
                    #expect(records.count == 2_000 && Set(records.compactMap(\.token)).count == 2_000)
                    let counters = metadata.counters()
                    #expect(counters.tokensIssued >= 3, "\(counters)")
                    #expect(counters.tokenRequests == counters.tokensIssued + 2, "the two 503s, then one token each time: \(counters)")
                    #expect(counters.lastScopes == ["https://www.googleapis.com/auth/firebase.messaging"])
                    #expect(counters.refusedHeaders == 0)
                    #expect(environment.fcm.counters().tokenGrants == 0)
                    let notSent = try await Support.scalar(
                        client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state <> 'sent'", as: Int64.self)
                    #expect(notSent == 0)
                }
            }
        }
    }

    /// The whole CLI: `bugle validate` names the metadata server; `bugle run` sends every live token once with its
    /// tokens; a workload with no service account attached (404) halts with exit 2 and the reason, sending nothing to
    /// FCM; no token appears in any output.
    @Test("bugle run with credentials: metadata_server: validate names the server, every live token once; no service account attached (404) exits 2 saying so")
    func cli() async throws {
        try await CrashFixture.with(devices: 600) { fixture in
            let environment = fixture.environment
            let material = environment.material
            try material.providersYAML(port: environment.apnsPort, fcmPort: environment.fcmPort)
                .replacingOccurrences(
                    of: "service_account_file: \(material.fcmServiceAccountFile)",
                    with: "credentials: metadata_server\n  project_id: \(material.fcmProjectID)")
                .write(toFile: material.providersFile, atomically: true, encoding: .utf8)
            let campaign = try fixture.campaign(policy: .resend, window: 200)
            try await Self.withMetadataServer(environment) { metadata, port in
                let host = ["GCE_METADATA_HOST": "127.0.0.1:\(port)"]
                let validated = try await fixture.bugle(["validate", campaign], environment: host)
                #expect(validated.status == 0, "\(validated.stderr)")
                #expect(
                    validated.stdout.contains("fcm access tokens: the metadata server at 127.0.0.1:\(port), directly, for project \(material.fcmProjectID)"),
                    "\(validated.stdout)")

                let run = try await fixture.bugle(["run", campaign, "--quiet"], environment: host)
                #expect(run.status == 0, "\(run.stderr)")
                #expect(!(run.stdout + run.stderr).contains("ya29."))
                try await fixture.expectEveryLiveTokenSentOnce()
                #expect(metadata.counters().tokensIssued >= 1)
                #expect(environment.fcm.counters().tokenGrants == 0)
            }
            try await Self.withMetadataServer(environment, configure: { $0.serviceAccountAttached = false }) { _, port in
                let before = environment.fcm.accepted().count
                let halted = try await fixture.bugle(["run", campaign, "--quiet"], environment: ["GCE_METADATA_HOST": "127.0.0.1:\(port)"])
                #expect(halted.status == 2, "\(halted.stderr)")
                #expect(
                    halted.stderr.contains("the metadata server at 127.0.0.1:\(port) gave no access token: 404: no service account is attached"),
                    "\(halted.stderr)")
                #expect(environment.fcm.accepted().count == before)
            }
        }
    }
}
