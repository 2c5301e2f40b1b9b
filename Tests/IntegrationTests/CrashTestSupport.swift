import BugleCore
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A seeded database, both simulators in this test process, and a campaign file, for driving the built `bugle`
/// executable through crashes, signals and extra workers. The simulators outlive every `bugle` process, so their
/// records count each token's deliveries across a crash and its resume.
struct CrashFixture {
    let environment: MixedTestEnvironment
    let configuration: DatabaseConfiguration
    let databaseURL: String
    let devices: Int

    static let logger = Logger(label: "bugle.test.crash")

    /// `devices` devices, alternating iOS and Android; every 20th of each platform is a dead token.
    static func make(devices: Int) async throws -> CrashFixture {
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await MixedTestEnvironment.seed(client, count: devices)
        }
        let environment = try await MixedTestEnvironment.start()
        return CrashFixture(environment: environment, configuration: configuration, databaseURL: try CLITests.url(configuration), devices: devices)
    }

    /// Runs `body` with a fixture of `devices` devices, stopping its simulators whether `body` returns or throws.
    static func with(devices: Int, _ body: (CrashFixture) async throws -> Void) async throws {
        let fixture = try await make(devices: devices)
        do {
            try await body(fixture)
        } catch {
            try await fixture.stop()
            throw error
        }
        try await fixture.stop()
    }

    /// Runs `body` with `environment`'s simulators, stopping them whether `body` returns or throws (for a fixture of
    /// a cluster of the test's own).
    static func with(environment: MixedTestEnvironment, _ body: (MixedTestEnvironment) async throws -> Void) async throws {
        do {
            try await body(environment)
        } catch {
            try? await environment.stop()
            throw error
        }
        try await environment.stop()
    }

    /// A mixed campaign over every device.
    /// - Parameters:
    ///   - rate: Per-lane rate (per second) for APNs and FCM, to make a run last; nil for the providers file's.
    ///   - notAfter: `delivery.not_after` (ISO 8601), if any.
    ///   - pageSize: `segment.page_size`.
    ///   - sendAt: `delivery.send_at` (ISO 8601), if any.
    ///   - dedupe: `dedupe`.
    func campaign(
        policy: AmbiguousPolicy, window: Int, rate: Int? = nil, notAfter: String? = nil, pageSize: Int = 500, sendAt: String? = nil,
        dedupe: String = "none"
    ) throws -> String {
        try CLITests.temporaryFile(
            "crash.yaml",
            """
            name: crash-\(policy.rawValue)
            notification_type: crash-test
            dedupe: \(dedupe)
            providers: \(environment.material.providersFile)
            segment:
              page_size: \(pageSize)
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Crash test } }
            delivery:
              ambiguous: \(policy.rawValue)
              in_flight_window: \(window)
            \(rate.map { "  rate: { apns: \($0), fcm: \($0) }" } ?? "")
            \(notAfter.map { "  not_after: \($0)" } ?? "")
            \(sendAt.map { "  send_at: \($0)" } ?? "")
            """
        )
    }

    /// The latest run: no duplicate or unknown, and every live device sent (every 20th of each platform is dead, so
    /// `devices` a multiple of 40 leaves `devices - devices / 20`).
    func expectEveryLiveTokenSentOnce() async throws {
        let runID = try await latestRunID()
        let (duplicates, unknown) = try await checkInvariants(runID: runID)
        #expect(duplicates == 0 && unknown == 0)
        let sent = try await withClient { client in
            try await LedgerTestSupport.scalar(
                client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'sent'", as: Int64.self)
        }
        #expect(sent == Int64(devices - devices / 20), "\(devices) devices, every 20th dead: \(String(describing: sent)) sent")
    }

    /// Runs `bugle` to its end with this fixture's database.
    func bugle(_ arguments: [String], failpoint: String? = nil, environment extra: [String: String] = [:]) async throws -> CLITests.Output {
        var environment = extra.merging(["BUGLE_DATABASE_URL": databaseURL]) { $1 }
        if let failpoint { environment["BUGLE_FAILPOINT"] = failpoint }
        return try await CLITests.bugle(arguments, environment: environment)
    }

    /// Starts `bugle` in the background with this fixture's database.
    func start(_ arguments: [String]) throws -> CLIRunTests.RunningBugle {
        try CLIRunTests.RunningBugle(executable: CLIRunTests.binary, arguments: arguments, environment: ["BUGLE_DATABASE_URL": databaseURL])
    }

    /// Deliveries per token, from both simulators' records.
    func deliveries() -> [String: Int] {
        var counts: [String: Int] = [:]
        for record in environment.apns.accepted() { counts[record.token, default: 0] += 1 }
        for record in environment.fcm.accepted() { counts[record.target, default: 0] += 1 }
        return counts
    }

    /// Deliveries recorded so far by both simulators.
    var delivered: Int { environment.apns.counters().accepted + environment.fcm.counters().accepted }

    /// Waits (polling every 20 ms, for at most `seconds`) until `condition` holds.
    func waitUntil(_ what: String, seconds: Double = 120, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while try await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting for \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func withClient<R: Sendable>(_ body: (PostgresClient) async throws -> R) async throws -> R {
        try await Database.withClient(configuration, logger: TestDatabase.logger, body)
    }

    /// The newest run.
    func latestRunID() async throws -> Int64 {
        let id = try await withClient { client in
            try await LedgerTestSupport.scalar(client, "SELECT coalesce(max(id), -1) FROM bugle.runs", as: Int64.self)
        }
        return id ?? -1
    }

    /// Recipients per ledger state.
    func states(runID: Int64) async throws -> [String: Int64] {
        try await withClient { client in
            let rows = try await client.query(
                "SELECT state, count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID) GROUP BY state",
                logger: Self.logger
            )
            var states: [String: Int64] = [:]
            for try await (state, count) in rows.decode((String, Int64).self) { states[state] = count }
            return states
        }
    }

    /// Tokens of the run's recipients in `state`.
    func tokens(runID: Int64, state: String) async throws -> Set<String> {
        try await withClient { client in
            let rows = try await client.query(
                "SELECT token FROM bugle.run_recipients WHERE run_id = \(runID) AND state = \(state)",
                logger: Self.logger
            )
            var tokens = Set<String>()
            for try await (token,) in rows.decode((String,).self) { tokens.insert(token) }
            return tokens
        }
    }

    /// The invariants of RELIABILITY.md §2.0 after a finished run: every recipient terminal; each `sent` token
    /// delivered at least once and `unknown` ones at most once; nothing delivered that is not `sent` or `unknown`;
    /// the dead tokens `invalid_token`.
    /// - Returns: (duplicates, unknown) — deliveries beyond the first, and recipients recorded `unknown`.
    func checkInvariants(runID: Int64) async throws -> (duplicates: Int, unknown: Int) {
        let states = try await states(runID: runID)
        #expect(states["pending", default: 0] + states["in_flight", default: 0] + states["retry_wait", default: 0] == 0, "\(states)")
        #expect(states.values.reduce(0, +) == Int64(devices))
        #expect(states["failed_permanent", default: 0] == 0, "\(states)")
        let deliveries = deliveries()
        let sent = try await tokens(runID: runID, state: "sent")
        let unknown = try await tokens(runID: runID, state: "unknown")
        // Dead tokens are invalid_token, except those a `drop` recovery recorded unknown before they were answered.
        let deadUnknown = unknown.filter { $0.hasPrefix("dead") }.count
        #expect(states["invalid_token", default: 0] + Int64(deadUnknown) == Int64(devices / 20), "\(states)")
        #expect(sent.allSatisfy { deliveries[$0, default: 0] >= 1 }, "a sent recipient the simulators never saw")
        #expect(unknown.allSatisfy { deliveries[$0, default: 0] <= 1 }, "an unknown recipient delivered twice")
        #expect(deliveries.keys.allSatisfy { sent.contains($0) || unknown.contains($0) }, "a delivery that is neither sent nor unknown")
        let duplicates = deliveries.values.reduce(0) { $0 + max(0, $1 - 1) }
        return (duplicates, unknown.count)
    }

    /// The counts a failpoint printed: every integer in its `bugle: failpoint …` line, in order.
    static func failpointCounts(_ stderr: String) -> [Int] {
        guard let line = stderr.split(separator: "\n").first(where: { $0.hasPrefix("bugle: failpoint") }) else { return [] }
        let afterName = line.split(separator: ":", maxSplits: 2).dropFirst(2).joined()
        return afterName.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
    }

    func stop() async throws {
        try await environment.stop()
    }
}
