@testable import BugleRunner
import Testing

@Suite("Send loop mailbox")
struct EventMailboxTests {
    @Test("events posted before the loop asks come back together, in the order posted")
    func batched() async {
        let mailbox = EventMailbox<Int>()
        for value in 1...5 { mailbox.post(value) }
        #expect(await mailbox.next() == [1, 2, 3, 4, 5])
        mailbox.post(6)
        #expect(await mailbox.next() == [6])
    }

    @Test("a waiting loop is woken by the next post")
    func wakes() async {
        let mailbox = EventMailbox<String>()
        let (waiting, signal) = AsyncStream<Void>.makeStream()
        async let taken: [String] = {
            signal.finish()
            return await mailbox.next()
        }()
        for await _ in waiting {}
        // The loop may or may not have suspended yet: either way this post is what it returns.
        mailbox.post("answer")
        #expect(await taken == ["answer"])
    }

    @Test("every event of 64 concurrent posters arrives exactly once, each poster's in its own order")
    func concurrentPosters() async {
        let mailbox = EventMailbox<(poster: Int, index: Int)>()
        let posters = 64
        let perPoster = 500
        await withDiscardingTaskGroup { group in
            for poster in 0..<posters {
                group.addTask {
                    for index in 0..<perPoster { mailbox.post((poster, index)) }
                }
            }
            var next = [Int](repeating: 0, count: posters)
            var received = 0
            while received < posters * perPoster {
                let events = await mailbox.next()
                #expect(!events.isEmpty)
                for event in events {
                    #expect(event.index == next[event.poster], "poster \(event.poster) out of order")
                    next[event.poster] = event.index + 1
                }
                received += events.count
            }
            #expect(received == posters * perPoster)
            #expect(next.allSatisfy { $0 == perPoster })
        }
    }
}
