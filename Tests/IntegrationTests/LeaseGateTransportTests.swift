import BugleAPNs
import BugleCore
import BugleFCM
import BugleSimulator
import BugleTesting
import Foundation
import Testing

/// The worker's lease gate at the HTTP/2 lanes: a request is asked its gate once it holds a stream, before anything is
/// written, so one that waited for a stream (every stream busy as its worker froze) is not written after the worker's
/// lease was lost. The pacer asks the gate before that (``PacedProvider``); this is the lane's own check.
@Suite("Lease gate at the HTTP/2 lanes (simulators over TLS/HTTP2)")
struct LeaseGateTransportTests {
    @Test("APNs and FCM, one connection of one stream, busy: a request whose gate is closed comes back withdrawn, unsent; the busy one is delivered")
    func closedGateNotWritten() async throws {
        try await MixedTestEnvironment.with(
            apns: {
                $0.maxConcurrentStreams = 1
                $0.faults.latency = .milliseconds(300)
            },
            fcm: {
                $0.maxConcurrentStreams = 1
                $0.faults.latency = .milliseconds(300)
            }
        ) { environment in
            var settings = try environment.settings()
            settings.apns?.connections = 1
            settings.fcm?.connections = 1
            let apns = try APNSProvider(settings: try #require(settings.apns), logger: MixedTestEnvironment.logger)
            let fcm = try FCMProvider(settings: try #require(settings.fcm), logger: MixedTestEnvironment.logger)
            let lanes: [(any PushProvider, (Int64) -> PushRequest)] = [
                (apns, { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(Int($0)), seq: $0) }),
                (fcm, { FCMPayloadBreakerTests.goodPayload($0) }),
            ]
            for (lane, request) in lanes {
                await lane.prepare()
                let gate = SwitchGate()
                gate.close()
                var gated = request(2)
                gated.gate = gate
                async let busy = lane.send(request(1))
                let withdrawn = await lane.send(gated)
                #expect(withdrawn == .withdrawn, "\(lane.kind): \(withdrawn)")
                let delivered = await busy
                #expect({ if case .delivered = delivered { return true } else { return false } }(), "\(lane.kind): \(delivered)")
                await lane.shutdown()
            }
            #expect(environment.apns.accepted().map(\.token) == [APNsTestEnvironment.liveToken(1)])
            #expect(environment.fcm.accepted().map(\.target) == [FCMPayloadBreakerTests.goodPayload(1).token])
        }
    }
}
