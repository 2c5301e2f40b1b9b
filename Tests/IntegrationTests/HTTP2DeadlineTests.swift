import BugleHTTP2
import BugleSimulator
import Foundation
import NIOCore
import NIOConcurrencyHelpers
import Testing

/// Per-request deadlines of the shared HTTP/2 pool (one timer per connection, deadlines kept in order), against the
/// APNs simulator over real TLS. Tokens starting `fa11` are never answered.
@Suite("HTTP/2 pool: per-request deadlines")
struct HTTP2DeadlineTests {
    typealias Fixture = APNsCertificateAuthTests.Fixture

    @Test("a request sent later with an earlier deadline times out first; the connection keeps serving, and the stream is reset")
    func earlierDeadlineSentLaterFiresFirst() async throws {
        try await Fixture.with { fixture in
            let pool = try HTTP2KeepaliveTests.pool(fixture, pingInterval: nil)
            let longFinished = NIOLockedValueBox(false)
            // Written first, with a deadline far away: the ordered deadlines hold it at the front.
            let long = Task {
                defer { longFinished.withLockedValue { $0 = true } }
                return try await HTTP2KeepaliveTests.send(pool, fixture: fixture, index: 1, within: 120, token: APNsTestEnvironment.scriptedToken(prefix: "fa11", 1))
            }
            #expect(try await HTTP2KeepaliveTests.send(pool, fixture: fixture, index: 2, within: 30).status == 200)
            // Written after both, due long before the first: it must not wait behind it.
            let started = ContinuousClock.now
            await #expect(throws: HTTP2TransportError.timeout(written: true)) {
                _ = try await HTTP2KeepaliveTests.send(pool, fixture: fixture, index: 3, within: 1, token: APNsTestEnvironment.scriptedToken(prefix: "fa11", 3))
            }
            #expect(ContinuousClock.now - started < .seconds(60), "the short deadline waited behind the long one")
            #expect(!longFinished.withLockedValue { $0 }, "the first request ended before its deadline")
            // The same connection still answers, and both hung requests reached the simulator.
            #expect(try await HTTP2KeepaliveTests.send(pool, fixture: fixture, index: 4, within: 30).status == 200)
            #expect(fixture.simulator.counters().connections == 1)
            #expect(fixture.simulator.counters().hung == 2)
            // Shutting the pool down ends the long request without an answer.
            await pool.shutdown()
            await #expect(throws: HTTP2TransportError.self) { _ = try await long.value }
        }
    }

    @Test("many requests with ordered deadlines: every answered one succeeds, every hung one times out exactly once")
    func orderedDeadlinesAcrossManyRequests() async throws {
        try await Fixture.with { fixture in
            let pool = try HTTP2KeepaliveTests.pool(fixture, pingInterval: nil)
            defer { Task { await pool.shutdown() } }
            let results = try await withThrowingTaskGroup(of: (Int, Result<Int, HTTP2TransportError>).self) { group in
                for index in 0..<400 {
                    group.addTask {
                        let hung = index % 50 == 7
                        let token = hung ? APNsTestEnvironment.scriptedToken(prefix: "fa11", index) : nil
                        do {
                            let response = try await HTTP2KeepaliveTests.send(pool, fixture: fixture, index: index, within: hung ? 2 : 60, token: token)
                            return (index, .success(response.status))
                        } catch let error as HTTP2TransportError {
                            return (index, .failure(error))
                        }
                    }
                }
                var results: [Int: Result<Int, HTTP2TransportError>] = [:]
                for try await (index, result) in group { results[index] = result }
                return results
            }
            #expect(results.count == 400)
            for (index, result) in results {
                if index % 50 == 7 {
                    #expect(result == .failure(.timeout(written: true)), "hung request \(index): \(result)")
                } else {
                    #expect(result == .success(200), "request \(index): \(result)")
                }
            }
            #expect(fixture.simulator.counters().hung == 8)
            #expect(fixture.simulator.accepted().count == 392)
        }
    }
}
