import BugleCore
import Synchronization
import Testing

@Suite("OperationDeadline")
struct OperationDeadlineTests {
    /// An operation that never answers, abandoned by the caller's condition long before its deadline: the call ends with
    /// `Abandoned` once the condition turns true, and the condition is not asked again after that.
    @Test("abandonWhen ends a hung operation with Abandoned once it turns true, well before the deadline")
    func abandonWhen() async throws {
        let asked = Mutex(0)
        let (hung, release) = AsyncStream<Void>.makeStream()
        let started = ContinuousClock.now
        await #expect(throws: OperationDeadline.Abandoned.self) {
            try await OperationDeadline.run(within: .seconds(60), abandonWhen: { asked.withLock { $0 += 1; return $0 >= 2 } }) {
                for await _ in hung {}
            }
        }
        release.finish()
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(asked.withLock { $0 } == 2)
    }

    /// An operation that answers is not abandoned, and the condition is never asked once it has.
    @Test("an operation that answers in time is returned; abandonWhen is not asked after it has")
    func answered() async throws {
        let asked = Mutex(0)
        let value = try await OperationDeadline.run(within: .seconds(60), abandonWhen: { asked.withLock { $0 += 1 }; return true }) { 42 }
        #expect(value == 42)
        try await Task.sleep(for: .milliseconds(1500))
        #expect(asked.withLock { $0 } == 0)
    }
}
