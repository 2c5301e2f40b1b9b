import BugleCore
@testable import BugleRunner
import Testing

@Suite("Send loop: sends parked until their lane frees a slot")
struct ParkedSendsTests {
    /// A lane with `slots` free slots: it starts sends while it has one.
    private struct Lane {
        var slots: Int
        var startedOrder: [Int] = []

        mutating func start(_ send: Int) -> Bool {
            guard slots > 0 else { return false }
            slots -= 1
            startedOrder.append(send)
            return true
        }
    }

    @Test("parked sends start in claim order as answers free slots, and only on their own lane")
    func startsInOrder() {
        var parked = ParkedSends<Int>()
        var fcm = Lane(slots: 2)
        // The claim: two start at once, the rest are parked behind them.
        for send in 1...6 {
            if parked.hasWaiting(.fcm) {
                parked.park(send, on: .fcm)
            } else if fcm.start(send) {
                parked.started(.fcm)
            } else {
                #expect(parked.canPark(.fcm))
                parked.park(send, on: .fcm)
            }
        }
        #expect(fcm.startedOrder == [1, 2])
        #expect(parked.count == 4)
        #expect(!parked.hasWaiting(.apns) && !parked.canPark(.apns))
        // One answer frees one slot: the oldest parked send takes it.
        parked.answered(.fcm)
        fcm.slots += 1
        #expect(parked.unpark([.apns, .fcm], start: { fcm.start($0) }).isEmpty)
        #expect(fcm.startedOrder == [1, 2, 3])
        // Two answers, two slots.
        parked.answered(.fcm)
        parked.answered(.fcm)
        fcm.slots += 2
        #expect(parked.unpark([.fcm], start: { fcm.start($0) }).isEmpty)
        #expect(fcm.startedOrder == [1, 2, 3, 4, 5])
        #expect(parked.count == 1 && parked.hasWaiting(.fcm))
    }

    @Test("a lane that refuses with none of its sends out hands its parked sends back, in order, to wait in tasks")
    func strandedGoBack() {
        var parked = ParkedSends<Int>()
        parked.started(.fcm)
        for send in 1...3 { parked.park(send, on: .fcm) }
        // Still one send out: nothing is handed back even though the lane refuses (a paused lane, say).
        #expect(parked.unpark([.fcm], start: { _ in false }).isEmpty)
        #expect(parked.count == 3)
        // Its answer came and the lane still refuses: no answer is left to retry them.
        parked.answered(.fcm)
        #expect(parked.unpark([.fcm], start: { _ in false }) == [1, 2, 3])
        #expect(parked.count == 0 && !parked.hasWaiting(.fcm) && !parked.canPark(.fcm))
    }

    @Test("thousands of parked sends keep their order while the queue compacts")
    func longQueue() {
        var parked = ParkedSends<Int>()
        parked.started(.fcm)
        for send in 0..<5_000 { parked.park(send, on: .fcm) }
        var order: [Int] = []
        var round = 0
        var added = 0
        while parked.count > 0 {
            round += 1
            var budget = 7
            let stranded = parked.unpark([.fcm]) { send in
                guard budget > 0 else { return false }
                budget -= 1
                order.append(send)
                return true
            }
            #expect(stranded.isEmpty)
            // Each started send's answer arrives before the next round.
            for _ in 0..<(7 - budget) { parked.answered(.fcm) }
            // More sends join the back of the queue on some rounds.
            if round % 100 == 0 {
                for send in 0..<3 { parked.park(10_000 + round * 10 + send, on: .fcm) }
                added += 3
            }
        }
        #expect(added > 0)
        #expect(order.count == 5_000 + added, "each parked send started exactly once")
        #expect(Array(order.prefix(5_000)) == Array(0..<5_000))
        let late = order.dropFirst(5_000)
        #expect(late.elementsEqual(late.sorted()), "sends parked later start later")
    }
}
