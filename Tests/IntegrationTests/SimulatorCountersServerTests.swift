import BugleAPNs
import BugleCore
import BugleSimulator
import BugleTesting
import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1
import Testing

/// `SimulatorCountersServer` (`bugle-sim serve --counters-port`) over the real simulators: notifications go through
/// real TLS + HTTP/2 connections, and the counters are read over a real socket, as a test in another process would.
@Suite("SimulatorCountersServer: live counters over HTTP/1.1", .serialized)
struct SimulatorCountersServerTests {
    @Test("GET /counters counts exactly what APNs and FCM answered; another path 404, another method 405")
    func countsDeliveriesExactly() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let apns = APNsSimulator(configuration: environment.simulatorConfiguration())
        var fcmConfiguration = FCMSimulatorConfiguration(certificates: environment.material)
        fcmConfiguration.threads = 1
        let fcm = FCMSimulator(configuration: fcmConfiguration)
        let server = SimulatorCountersServer(port: 0) { SimulatorCountersSnapshot(apns: apns.counters(), fcm: fcm.counters()) }
        var provider: APNSProvider?
        var client: FCMTestClient?
        func stopAll() async {
            try? await server.stop()
            await provider?.shutdown()
            await client?.close()
            try? await apns.stop()
            try? await fcm.stop()
        }
        do {
            let apnsPort = try await apns.start()
            let fcmPort = try await fcm.start()
            let countersPort = try await server.start()

            let before = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/counters")
            #expect(before.status == 200, "\(before)")
            #expect((before.json?["apns"] as? [String: Any])?["accepted"] as? Int == 0, "\(before)")

            // APNs: 40 live tokens and 3 dead ones (410 Unregistered).
            let apnsProvider = try APNSProvider(settings: environment.settings(port: apnsPort), logger: APNsTestEnvironment.logger)
            provider = apnsProvider
            let requests =
                (0..<40).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
                + (0..<3).map { APNsTestEnvironment.request(token: APNsTestEnvironment.scriptedToken(prefix: "dead", $0), seq: Int64(100 + $0)) }
            let outcomes = await sendAll(apnsProvider, requests, concurrency: 20)
            let delivered = outcomes.filter { if case .delivered = $0 { return true } else { return false } }.count
            #expect(delivered == 40)

            // FCM: 25 live registration tokens and 2 dead ones (404 UNREGISTERED), over HTTP/2.
            let fcmClient = try FCMTestClient(port: fcmPort, caPEM: environment.material.caPEM)
            client = fcmClient
            let bearer = [
                ("authorization", "Bearer " + environment.material.fcmAccessToken(lifetime: .seconds(3600))), ("content-type", "application/json"),
            ]
            let sendPath = "/v1/projects/\(environment.material.fcmProjectID)/messages:send"
            for target in (0..<25).map({ "live-\($0)" }) + ["dead-1", "dead-2"] {
                let response = try await fcmClient.request(.POST, sendPath, headers: bearer, body: FCMTestEnvironment.message(token: target))
                #expect(response.status == (target.hasPrefix("dead") ? 404 : 200), "\(target): \(response.text)")
            }
            #expect(fcmClient.negotiated.withLockedValue { $0 } == "h2")

            let after = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/counters")
            #expect(after.status == 200, "\(after)")
            #expect(after.headers["content-type"] == "application/json")
            let object = try #require(after.json, "\(after)")
            #expect(Set(object.keys) == ["apns", "fcm"], "simulators not served are left out: \(object.keys)")
            let apnsCounters = try #require(object["apns"] as? [String: Any])
            #expect(apnsCounters["accepted"] as? Int == 40)
            #expect(apnsCounters["rejectedByReason"] as? [String: Int] == ["Unregistered": 3])
            #expect((apnsCounters["connections"] as? Int ?? 0) >= 1)
            let fcmCounters = try #require(object["fcm"] as? [String: Any])
            #expect(fcmCounters["accepted"] as? Int == 25)
            #expect(fcmCounters["sendRequests"] as? Int == 27)
            #expect(fcmCounters["rejectedByReason"] as? [String: Int] == ["UNREGISTERED": 2])
            #expect(fcmCounters["http2Connections"] as? Int == 1)
            // The same numbers as in process: the answer is the counters structs, every field.
            #expect(apnsCounters["accepted"] as? Int == apns.counters().accepted)
            #expect(Set(apnsCounters.keys) == Set(Mirror(reflecting: apns.counters()).children.compactMap(\.label)))
            #expect(Set(fcmCounters.keys) == Set(Mirror(reflecting: fcm.counters()).children.compactMap(\.label)))

            let query = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/counters?fresh=1")
            #expect(query.status == 200, "\(query)")
            let otherPath = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/metrics")
            #expect(otherPath.status == 404, "\(otherPath)")
            let root = try await LoopbackHTTPResponse.fetch(port: countersPort, path: "/")
            #expect(root.status == 404, "\(root)")
            let post = try await LoopbackHTTPResponse.fetch("POST", port: countersPort, path: "/counters")
            #expect(post.status == 405, "\(post)")
            #expect(post.headers["allow"] == "GET")
            let delete = try await LoopbackHTTPResponse.fetch("DELETE", port: countersPort, path: "/counters")
            #expect(delete.status == 405, "\(delete)")

            try await server.stop()
            #expect(connectedLoopbackSocket(port: countersPort) == nil, "the counters server still accepts after stop()")
        } catch {
            await stopAll()
            throw error
        }
        await stopAll()
    }

    @Test("the legacy simulator's counters: keyed-by-number counters have string keys")
    func legacyCounters() async throws {
        var counters = LegacyAPNsSimulatorCounters()
        counters.accepted = 7
        counters.rejectedByStatus = [8: 2]
        counters.packetsByCommand = [2: 9]
        let snapshot = counters
        let server = SimulatorCountersServer(port: 0) { SimulatorCountersSnapshot(legacy: snapshot) }
        let port = try await server.start()
        let answer: LoopbackHTTPResponse
        do {
            answer = try await LoopbackHTTPResponse.fetch(port: port, path: "/counters")
        } catch {
            try await server.stop()
            throw error
        }
        try await server.stop()
        let object = try #require(answer.json, "\(answer)")
        #expect(Set(object.keys) == ["legacy"])
        let legacy = try #require(object["legacy"] as? [String: Any])
        #expect(legacy["accepted"] as? Int == 7)
        #expect(legacy["rejectedByStatus"] as? [String: Int] == ["8": 2])
        #expect(legacy["packetsByCommand"] as? [String: Int] == ["2": 9])
    }
}
