import Synchronization
import Testing

@testable import BugleStore

@Suite("Bounded page hand-off")
struct PageHandoffTests {
    @Test("every value arrives once, in order, and the producer never runs more than the capacity ahead")
    func boundedInOrder() async throws {
        let handoff = PageHandoff<Int>(capacity: 2)
        let sent = Counter()
        async let producer: Void = {
            for value in 0..<500 {
                try await handoff.send(value)
                sent.add()
            }
            handoff.finish()
        }()
        var received: [Int] = []
        while let value = try await handoff.next() {
            // Sends completed so far: at most the ones taken plus the queue's capacity.
            #expect(sent.value <= received.count + 1 + 2)
            received.append(value)
            if value % 7 == 0 { await Task.yield() }
        }
        try await producer
        #expect(received == Array(0..<500))
    }

    @Test("the producer's error reaches the consumer after the values queued before it")
    func errorAfterValues() async throws {
        struct Broken: Error {}
        let handoff = PageHandoff<Int>(capacity: 4)
        try await handoff.send(1)
        try await handoff.send(2)
        handoff.finish(throwing: Broken())
        #expect(try await handoff.next() == 1)
        #expect(try await handoff.next() == 2)
        await #expect(throws: Broken.self) { try await handoff.next() }
    }

    @Test("a consumer that gives up releases a producer waiting on a full queue")
    func cancelReleasesProducer() async throws {
        let handoff = PageHandoff<Int>(capacity: 1)
        async let producer: Int = {
            var sent = 0
            do {
                while true {
                    try await handoff.send(sent)
                    sent += 1
                }
            } catch is CancellationError {
                return sent
            }
        }()
        #expect(try await handoff.next() == 0)
        handoff.cancel()
        let sent = try await producer
        #expect(sent >= 1)
        await #expect(throws: CancellationError.self) { try await handoff.send(99) }
    }
}

/// A count shared with a concurrently running producer.
private final class Counter: Sendable {
    private let storage = Mutex(0)
    var value: Int { storage.withLock { $0 } }
    func add() { storage.withLock { $0 += 1 } }
}
