import BugleAPNs
import BugleCore
import BugleSimulator
import BugleTesting
import Crypto
import Foundation
import Testing

@Suite("APNs over TLS + HTTP/2 against the in-process simulator", .serialized)
struct APNsSimulatorIntegrationTests {
    @Test func twoThousandDeliveredExactlyOnce() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration())
        let port = try await simulator.start()
        let provider = try APNSProvider(settings: environment.settings(port: port), logger: APNsTestEnvironment.logger)

        let requests = (0..<2000).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
        let outcomes = await sendAll(provider, requests, concurrency: 200)
        await provider.shutdown()
        try await simulator.stop()

        let delivered = outcomes.filter { if case .delivered = $0 { return true } else { return false } }.count
        #expect(delivered == 2000)
        let records = simulator.accepted()
        #expect(records.count == 2000)
        #expect(Set(records.map(\.token)) == Set(requests.map(\.token)))
        #expect(Set(records.map(\.apnsID)) == Set(requests.compactMap { $0.apns?.apnsID }))
        #expect(simulator.counters().rejected == 0)
    }

    @Test func scriptedTokensAreClassified() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration())
        let port = try await simulator.start()
        let provider = try APNSProvider(settings: environment.settings(port: port), logger: APNsTestEnvironment.logger)

        let cases: [(String, (SendOutcome) -> Bool)] = [
            ("dead", { if case .invalidToken("Unregistered", let since?) = $0 { return since.secondsSince1970 > 1_600_000_000 }; return false }),
            ("bad0", { $0 == .invalidToken(code: "BadDeviceToken", invalidSince: nil) }),
            ("4290", { if case .retry(.recipient, "TooManyRequests", _) = $0 { return true }; return false }),
            ("5030", { if case .retry(.provider, "ServiceUnavailable", _) = $0 { return true }; return false }),
            ("5000", { if case .retry(.provider, "InternalServerError", _) = $0 { return true }; return false }),
        ]
        for (index, (prefix, check)) in cases.enumerated() {
            let outcome = await provider.send(
                APNsTestEnvironment.request(token: APNsTestEnvironment.scriptedToken(prefix: prefix, index), seq: Int64(index))
            )
            #expect(check(outcome), "prefix \(prefix) gave \(outcome)")
        }
        // Payload and header rules.
        var background = APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(1), seq: 100, pushType: .background)
        #expect(await provider.send(background) == .rejected(code: "BadPriority"))
        background.apns?.priority = 5
        if case .delivered = await provider.send(background) {} else { Issue.record("background priority 5 not delivered") }
        var large = APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(2), seq: 101)
        large.body = Array(#"{"aps":{"alert":""#.utf8) + Array(repeating: UInt8(ascii: "a"), count: 5000) + Array(#""}}"#.utf8)
        #expect(await provider.send(large) == .rejected(code: "PayloadTooLarge"))
        var empty = APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(3), seq: 102)
        empty.body = []
        #expect(await provider.send(empty) == .rejected(code: "PayloadEmpty"))
        var collapse = APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(4), seq: 103)
        collapse.apns?.collapseID = String(repeating: "c", count: 65)
        #expect(await provider.send(collapse) == .rejected(code: "BadCollapseId"))

        await provider.shutdown()
        try await simulator.stop()
        #expect(simulator.accepted().count == 1)
        #expect(simulator.counters().rejectedByReason["Unregistered"] == 1)
    }

    @Test func maxConcurrentStreamsIsNeverExceeded() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(
            configuration: environment.simulatorConfiguration {
                $0.maxConcurrentStreams = 10
                $0.faults.latency = .milliseconds(2)
            }
        )
        let port = try await simulator.start()
        let provider = try APNSProvider(settings: environment.settings(port: port), logger: APNsTestEnvironment.logger)
        let requests = (0..<600).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
        let outcomes = await sendAll(provider, requests, concurrency: 200)
        await provider.shutdown()
        try await simulator.stop()

        let undelivered = outcomes.filter { if case .delivered = $0 { return false } else { return true } }
        #expect(undelivered.isEmpty, "\(undelivered.count) not delivered, first: \(undelivered.prefix(3))")
        let counters = simulator.counters()
        #expect(counters.maxConcurrentStreamsObserved <= 10)
        #expect(counters.maxConcurrentStreamsObserved >= 2)
        #expect(counters.maxConcurrentStreamsViolations == 0)
        #expect(simulator.accepted().count == 600)
    }

    @Test func goAwayEveryHundredStreamsLosesNothingAndDuplicatesNothing() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration { $0.faults.goAwayEvery = 100 })
        let port = try await simulator.start()
        let provider = try APNSProvider(
            settings: environment.settings(port: port),
            options: .init(safeRetryLimit: 10),
            logger: APNsTestEnvironment.logger
        )
        let requests = (0..<2000).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
        var outcomes = await sendAll(provider, requests, concurrency: 100)
        // Whatever the lane reports as safe to retry is retried, as the runner would.
        for _ in 0..<5 {
            let again = outcomes.indices.filter { if case .retry(.safe, _, _) = outcomes[$0] { return true } else { return false } }
            if again.isEmpty { break }
            let retried = await sendAll(provider, again.map { requests[$0] }, concurrency: 100)
            for (slot, index) in again.enumerated() { outcomes[index] = retried[slot] }
        }
        await provider.shutdown()
        try await simulator.stop()

        let ambiguous = outcomes.filter { if case .ambiguous = $0 { return true } else { return false } }.count
        let delivered = outcomes.filter { if case .delivered = $0 { return true } else { return false } }.count
        #expect(ambiguous == 0, "ambiguous codes: \(Set(outcomes.map(\.code)))")
        #expect(delivered == 2000)
        let records = simulator.accepted()
        #expect(records.count == 2000, "each accepted exactly once")
        #expect(Set(records.map(\.token)).count == 2000)
        #expect(simulator.counters().goAwaysSent >= 10)
    }

    /// A simulator that takes JWTs for 25 minutes of `clock`'s time, and a lane signing with `clock`.
    static func withExpiringJWTs(
        _ environment: APNsTestEnvironment, _ clock: APNsTestClock
    ) async throws -> (APNsSimulator, APNSAuthenticationTokenSigner<APNsTestClock>, APNSProvider) {
        let simulator = APNsSimulator(
            configuration: environment.simulatorConfiguration {
                $0.jwtMaxAge = .seconds(25 * 60)
                $0.wallClock = { clock.wallSeconds }
            }
        )
        let port = try await simulator.start()
        let signer = try environment.signer(clock: clock)
        let provider = try APNSProvider(settings: environment.settings(port: port), tokenSource: signer, logger: APNsTestEnvironment.logger)
        return (simulator, signer, provider)
    }

    /// The answer of a send started without suspending, or nil when the lane did not start it.
    static func started(_ provider: APNSProvider, _ request: PushRequest) async -> SendOutcome? {
        await withCheckedContinuation { continuation in
            if !provider.startSend(request, completion: { continuation.resume(returning: $0) }) {
                continuation.resume(returning: nil)
            }
        }
    }

    @Test("sends started without suspending are classified as send(_:) classifies them, an expired JWT included")
    func startedSendsMatchSend() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let clock = APNsTestClock()
        let (simulator, signer, provider) = try await Self.withExpiringJWTs(environment, clock)
        await provider.prepare()
        var requests = ["dead", "bad0", "4290", "5030", "5000"].enumerated().map { index, prefix in
            APNsTestEnvironment.request(token: APNsTestEnvironment.scriptedToken(prefix: prefix, index), seq: Int64(index))
        }
        var collapse = APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(1), seq: 10)
        collapse.apns?.collapseID = String(repeating: "c", count: 65)
        requests.append(collapse)
        requests.append(APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(2), seq: 11))
        for request in requests {
            let fast = try #require(await Self.started(provider, request), "not started: \(request.token)")
            let slow = await provider.send(request)
            switch (fast, slow) {
            case (.invalidToken(let a, _), .invalidToken(let b, _)): #expect(a == b)
            case (.retry(let a, let c, _), .retry(let b, let d, _)): #expect(a == b && c == d)
            default: #expect(fast == slow, "\(request.token): \(fast) against \(slow)")
            }
        }
        // Past the simulator's JWT age: the first answer is ExpiredProviderToken, met with one new token.
        clock.advance(by: .seconds(30 * 60))
        let late = (20..<40).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
        for request in late {
            let outcome = try #require(await Self.started(provider, request))
            if case .delivered = outcome {} else { Issue.record("\(request.token): \(outcome)") }
        }
        await provider.shutdown()
        try await simulator.stop()
        #expect(simulator.counters().rejectedByReason["ExpiredProviderToken"] == 1)
        #expect(signer.mintCount == 2)
        #expect(simulator.accepted().count == 2 + 20)
    }

    @Test func expiredProviderTokenIsRefreshedWithoutFailures() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let clock = APNsTestClock()
        let (simulator, signer, provider) = try await Self.withExpiringJWTs(environment, clock)
        let first = (0..<200).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
        let before = await sendAll(provider, first, concurrency: 50)
        clock.advance(by: .seconds(30 * 60))
        let second = (200..<400).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
        let after = await sendAll(provider, second, concurrency: 50)
        await provider.shutdown()
        try await simulator.stop()

        #expect((before + after).allSatisfy { if case .delivered = $0 { return true } else { return false } })
        let counters = simulator.counters()
        #expect((counters.rejectedByReason["ExpiredProviderToken"] ?? 0) >= 1)
        #expect(counters.rejectedByReason["TooManyProviderTokenUpdates"] == nil)
        #expect(signer.mintCount == 2)
        #expect(simulator.accepted().count == 400)
    }

    @Test func wrongKeyHalts() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration())
        let port = try await simulator.start()
        let wrongKeyFile = environment.directory + "/wrong.p8"
        _ = FileManager.default.createFile(
            atPath: wrongKeyFile,
            contents: Data(P256.Signing.PrivateKey().pemRepresentation.utf8),
            attributes: [.posixPermissions: 0o600]
        )
        let provider = try APNSProvider(
            settings: environment.settings(port: port, keyFile: wrongKeyFile),
            logger: APNsTestEnvironment.logger
        )
        let outcome = await provider.send(APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(1), seq: 1))
        await provider.shutdown()
        try await simulator.stop()
        guard case .halt(let code, let message) = outcome else {
            Issue.record("expected halt, got \(outcome)")
            return
        }
        #expect(code == "InvalidProviderToken")
        #expect(!message.contains("eyJ"), "no JWT in the message")
        #expect(simulator.accepted().isEmpty)
    }

    @Test func readableKeyFileIsRefused() throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: environment.material.keyFile)
        #expect(throws: APNSConfigurationError.self) {
            _ = try APNSProvider(settings: environment.settings(port: 1), logger: APNsTestEnvironment.logger)
        }
        _ = try APNSProvider(
            settings: environment.settings(port: 1),
            options: .init(allowReadableKeys: true),
            logger: APNsTestEnvironment.logger
        )
    }

    @Test("a server certificate from a CA not in ca_file: nothing delivered, and the lane halts (TLSCertificateRejected), never falls back")
    func untrustedServerIsNotDelivered() async throws {
        let environment = try APNsTestEnvironment()
        let other = try APNsTestEnvironment()
        defer {
            environment.remove()
            other.remove()
        }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration())
        let port = try await simulator.start()
        // Trust the other environment's CA only: the handshake must fail, never fall back.
        var settings = environment.settings(port: port, connections: 1, timeout: 5)
        settings.caFile = other.material.caFile
        let provider = try APNSProvider(settings: settings, logger: APNsTestEnvironment.logger)
        let outcome = await provider.send(APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken(1), seq: 1))
        await provider.shutdown()
        try await simulator.stop()
        // A configuration error, not a passing outage: the lane halts the run instead of retrying for ever.
        guard case .halt(let code, let message) = outcome else {
            Issue.record("expected a halt, got \(outcome)")
            return
        }
        #expect(code == "TLSCertificateRejected")
        #expect(message.contains("cannot connect to APNs: the server's TLS certificate was refused"), "\(message)")
        #expect(simulator.accepted().isEmpty)
    }
}

@Suite("APNs throughput probe (opt-in: BUGLE_LONG_TESTS)")
struct APNsThroughputProbe {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["BUGLE_LONG_TESTS"] != nil))
    func twentyThousand() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration { $0.keepRecordsInMemory = false })
        let port = try await simulator.start()
        let provider = try APNSProvider(settings: environment.settings(port: port, connections: 4), logger: APNsTestEnvironment.logger)
        let requests = (0..<20_000).map { APNsTestEnvironment.request(token: APNsTestEnvironment.liveToken($0), seq: Int64($0)) }
        let start = ContinuousClock.now
        let outcomes = await sendAll(provider, requests, concurrency: 500)
        let elapsed = start.duration(to: .now)
        await provider.shutdown()
        try await simulator.stop()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("APNs probe: \(requests.count) in \(seconds) s = \(Int(Double(requests.count) / seconds))/s")
        #expect(outcomes.allSatisfy { if case .delivered = $0 { return true } else { return false } })
        #expect(simulator.counters().accepted == 20_000)
    }
}
