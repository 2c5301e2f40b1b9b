import Foundation
import Testing

@testable import BugleCore

/// Every expected instant below was worked out by hand from the zone's offset (and its DST dates) that day; the
/// comment next to each case shows the arithmetic.
@Suite("Local-time delivery: deliver_at_local, quiet hours, DST and 15-minute windows")
struct LocalDeliveryPlannerTests {
    /// One `deliverAt` case: zone, local time, the run's `now`, and the expected window start (all UTC).
    struct Case: Sendable, CustomTestStringConvertible {
        var zone: String
        var deliverAt: String
        var now: String
        var expected: String
        var testDescription: String { "\(zone) \(deliverAt) at \(now) → \(expected)" }
        init(_ zone: String, _ deliverAt: String, now: String, _ expected: String) {
            self.zone = zone
            self.deliverAt = deliverAt
            self.now = now
            self.expected = expected
        }
    }

    @Test("no rules: due at now itself")
    func noRules() throws {
        let planner = LocalDeliveryPlanner(rules: LocalTimeDelivery())
        let now = try instant("2026-06-01T12:03:17Z")
        #expect(planner.plan(timeZone: "Asia/Kolkata", now: now) == .at(now))
        #expect(planner.plan(timeZone: nil, now: now) == .at(now))
    }

    @Test(
        "deliverAt: later today, just passed (< 15 min), passed long ago",
        arguments: [
            // Europe/Berlin in June is CEST, +2: 20:00 local = 18:00Z.
            Case("Europe/Berlin", "20:00", now: "2026-06-01T10:00:00Z", "2026-06-01T18:00:00Z"),  // later today
            Case("Europe/Berlin", "20:00", now: "2026-06-01T18:00:00Z", "2026-06-01T18:00:00Z"),  // exactly now
            Case("Europe/Berlin", "20:00", now: "2026-06-01T18:10:00Z", "2026-06-01T18:00:00Z"),  // 10 min late
            Case("Europe/Berlin", "20:00", now: "2026-06-01T18:14:59Z", "2026-06-01T18:00:00Z"),  // 14:59 late
            Case("Europe/Berlin", "20:00", now: "2026-06-01T18:15:00Z", "2026-06-02T18:00:00Z"),  // 15 min: tomorrow
            Case("Europe/Berlin", "20:00", now: "2026-06-01T21:00:00Z", "2026-06-02T18:00:00Z"),  // 23:00: tomorrow
            // 20:07 = 18:07Z, 13 min ago: due now, in now's window (18:15), not the earlier 18:00 one.
            Case("Europe/Berlin", "20:07", now: "2026-06-01T18:20:00Z", "2026-06-01T18:15:00Z"),
            // Just passed across local midnight: yesterday's 23:55 was 10 minutes ago.
            Case("UTC", "23:55", now: "2026-06-02T00:05:00Z", "2026-06-02T00:00:00Z"),
            Case("UTC", "23:55", now: "2026-06-02T00:10:00Z", "2026-06-02T23:45:00Z"),  // 15 min ago: tonight's
        ]
    )
    func deliverAt(_ example: Case) throws {
        try check(example)
    }

    @Test(
        "deliverAt in zones with :30 and :45 offsets",
        arguments: [
            // Asia/Kolkata, +5:30: 20:00 = 14:30Z.
            Case("Asia/Kolkata", "20:00", now: "2026-06-01T06:00:00Z", "2026-06-01T14:30:00Z"),
            // 19:00Z is 00:30 on 2 June in Kolkata: its local day is the 2nd.
            Case("Asia/Kolkata", "20:00", now: "2026-06-01T19:00:00Z", "2026-06-02T14:30:00Z"),
            // 09:00 = 03:30Z; now is 09:10 local, 10 minutes late.
            Case("Asia/Kolkata", "09:00", now: "2026-06-01T03:40:00Z", "2026-06-01T03:30:00Z"),
            // America/St_Johns in July is NDT, -2:30: 20:00 = 22:30Z.
            Case("America/St_Johns", "20:00", now: "2026-07-01T12:00:00Z", "2026-07-01T22:30:00Z"),
            // In January NST, -3:30: 20:00 = 23:30Z; 21:00 = 00:30Z the next UTC day.
            Case("America/St_Johns", "20:00", now: "2026-01-15T12:00:00Z", "2026-01-15T23:30:00Z"),
            Case("America/St_Johns", "21:00", now: "2026-01-15T12:00:00Z", "2026-01-16T00:30:00Z"),
            // 02:00Z on the 16th is 22:30 on the 15th locally: the 15th's 21:00 (00:30Z) passed 90 min ago.
            Case("America/St_Johns", "21:00", now: "2026-01-16T02:00:00Z", "2026-01-17T00:30:00Z"),
            // Asia/Kathmandu, +5:45: 20:00 = 14:15Z; 09:00 = 03:15Z (now is 05:45 local).
            Case("Asia/Kathmandu", "20:00", now: "2026-06-01T06:00:00Z", "2026-06-01T14:15:00Z"),
            Case("Asia/Kathmandu", "09:00", now: "2026-06-01T00:00:00Z", "2026-06-01T03:15:00Z"),
            // 20:10 = 14:25Z, floored to the UTC window starting 14:15Z.
            Case("Asia/Kathmandu", "20:10", now: "2026-06-01T06:00:00Z", "2026-06-01T14:15:00Z"),
        ]
    )
    func offsetZones(_ example: Case) throws {
        try check(example)
    }

    @Test(
        "America/New_York: the spring-forward gap and the repeated fall-back hour",
        arguments: [
            // 2026-03-08: at 02:00 EST (07:00Z) clocks jump to 03:00 EDT; 02:30 does not exist → the jump, 07:00Z.
            Case("America/New_York", "02:30", now: "2026-03-08T05:00:00Z", "2026-03-08T07:00:00Z"),
            // From the day before (07:00 EST on the 7th, its 02:30 long past): the next day's gap → 07:00Z.
            Case("America/New_York", "02:30", now: "2026-03-07T12:00:00Z", "2026-03-08T07:00:00Z"),
            // 03:10 EDT: the jump was 10 minutes ago → due now.
            Case("America/New_York", "02:30", now: "2026-03-08T07:10:00Z", "2026-03-08T07:00:00Z"),
            // Later that day: the 9th's 02:30 EDT = 06:30Z.
            Case("America/New_York", "02:30", now: "2026-03-08T12:00:00Z", "2026-03-09T06:30:00Z"),
            // Either side of the gap: 01:59 EST = 06:59Z (window 06:45Z); 03:00 EDT = 07:00Z.
            Case("America/New_York", "01:59", now: "2026-03-08T05:00:00Z", "2026-03-08T06:45:00Z"),
            Case("America/New_York", "03:00", now: "2026-03-08T05:00:00Z", "2026-03-08T07:00:00Z"),
            // 2026-11-01: at 02:00 EDT (06:00Z) clocks go back to 01:00 EST; 01:30 is 05:30Z (EDT) and 06:30Z
            // (EST). The first occurrence is used.
            Case("America/New_York", "01:30", now: "2026-11-01T04:00:00Z", "2026-11-01T05:30:00Z"),
            Case("America/New_York", "01:30", now: "2026-10-31T12:00:00Z", "2026-11-01T05:30:00Z"),
            Case("America/New_York", "01:30", now: "2026-11-01T05:40:00Z", "2026-11-01T05:30:00Z"),
            // 01:35 EST (second pass): the first 01:30 was 65 minutes ago → the 2nd's 01:30 EST = 06:30Z.
            Case("America/New_York", "01:30", now: "2026-11-01T06:35:00Z", "2026-11-02T06:30:00Z"),
        ]
    )
    func newYorkDST(_ example: Case) throws {
        try check(example)
    }

    @Test(
        "Europe/London across its DST changes",
        arguments: [
            // Saturday 2026-03-28 12:00 GMT, 09:00 passed; Sunday 29th is BST (+1): 09:00 = 08:00Z.
            Case("Europe/London", "09:00", now: "2026-03-28T12:00:00Z", "2026-03-29T08:00:00Z"),
            // 01:00 GMT (01:00Z) on the 29th jumps to 02:00 BST: 01:30 is in the gap → the jump, 01:00Z.
            Case("Europe/London", "01:30", now: "2026-03-28T23:00:00Z", "2026-03-29T01:00:00Z"),
            // Saturday 2026-10-24 13:00 BST, 09:00 passed; Sunday 25th is GMT again: 09:00 = 09:00Z.
            Case("Europe/London", "09:00", now: "2026-10-24T12:00:00Z", "2026-10-25T09:00:00Z"),
            // 02:00 BST (01:00Z) on the 25th goes back to 01:00 GMT: 01:30 BST = 00:30Z comes first.
            Case("Europe/London", "01:30", now: "2026-10-24T23:00:00Z", "2026-10-25T00:30:00Z"),
        ]
    )
    func londonDST(_ example: Case) throws {
        try check(example)
    }

    @Test("a zone offset that is not a quarter hour is floored to a UTC window start")
    func historicOffset() throws {
        // In 1900 Asia/Kolkata kept Madras time, +5:21:10 (tzdata): 20:00 local = 14:38:50Z → window 14:30Z.
        let planner = LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("20:00")))
        let june1900 = Date(timeIntervalSince1970: -2_195_000_000)
        #expect(planner.zone(for: "Asia/Kolkata").secondsFromGMT(for: june1900) == 19_270)
        #expect(
            try planner.plan(timeZone: "Asia/Kolkata", now: instant("1900-06-01T00:00:00Z"))
                == due("1900-06-01T14:30:00Z"))
        // And in UTC a 20:07 deliverAt belongs to the 20:00 window.
        let utc = LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("20:07")))
        #expect(try utc.plan(timeZone: "UTC", now: try instant("2026-06-01T10:00:00Z")) == due("2026-06-01T20:00:00Z"))
    }

    @Test("nil, empty and unknown zones use the fallback zone; an invalid fallback is UTC")
    func fallbackZone() throws {
        // Asia/Tokyo, +9: 20:00 = 11:00Z. Asia/Kolkata: 14:30Z.
        let planner = LocalDeliveryPlanner(
            rules: LocalTimeDelivery(deliverAt: try time("20:00"), fallbackTimeZone: "Asia/Tokyo"))
        let now = try instant("2026-06-01T00:00:00Z")
        for zone in [nil, "", "Mars/Olympus_Mons", "not a zone"] {
            #expect(try planner.plan(timeZone: zone, now: now) == due("2026-06-01T11:00:00Z"))
            #expect(planner.zone(for: zone).identifier == "Asia/Tokyo")
        }
        #expect(try planner.plan(timeZone: "Asia/Kolkata", now: now) == due("2026-06-01T14:30:00Z"))
        #expect(planner.zone(for: "Asia/Kolkata").identifier == "Asia/Kolkata")

        let broken = LocalDeliveryPlanner(
            rules: LocalTimeDelivery(deliverAt: try time("20:00"), fallbackTimeZone: "Not/AZone"))
        #expect(broken.fallbackZone.secondsFromGMT(for: Date(timeIntervalSince1970: 0)) == 0)
        #expect(try broken.plan(timeZone: nil, now: now) == due("2026-06-01T20:00:00Z"))
    }

    @Test("the zone memo is bounded and safe to share between concurrent senders")
    func zoneCache() async throws {
        let planner = LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("20:00")))
        for index in 0..<(LocalDeliveryPlanner.cacheLimit + 50) {
            #expect(planner.zone(for: "Nowhere/\(index)") == planner.fallbackZone)
        }
        #expect(planner.cachedZoneCount == LocalDeliveryPlanner.cacheLimit)
        // Beyond the limit answers are still right, just not remembered.
        #expect(planner.zone(for: "Asia/Kathmandu").identifier == "Asia/Kathmandu")

        let shared = LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("20:00")))
        let now = try instant("2026-06-01T06:00:00Z")
        let expected: [String: LocalDelivery] = [
            "Asia/Kolkata": try due("2026-06-01T14:30:00Z"),
            "Asia/Kathmandu": try due("2026-06-01T14:15:00Z"),
            "Europe/Berlin": try due("2026-06-01T18:00:00Z"),
            "Mars/Base": try due("2026-06-01T20:00:00Z"),
        ]
        let zones = expected.keys.sorted()
        let mismatches = await withTaskGroup(of: Int.self) { group in
            for task in 0..<200 {
                group.addTask {
                    let zone = zones[task % zones.count]
                    return shared.plan(timeZone: zone, now: now) == expected[zone] ? 0 : 1
                }
            }
            return await group.reduce(0, +)
        }
        #expect(mismatches == 0)
        #expect(shared.cachedZoneCount == zones.count)
    }

    @Test(
        "quiet hours membership is half-open and may cross midnight",
        arguments: [
            ("22:00", "08:00", "23:00", true), ("22:00", "08:00", "07:59", true), ("22:00", "08:00", "08:00", false),
            ("22:00", "08:00", "22:00", true), ("22:00", "08:00", "21:59", false), ("22:00", "08:00", "00:00", true),
            ("22:00", "08:00", "12:00", false), ("13:00", "14:00", "13:00", true), ("13:00", "14:00", "13:59", true),
            ("13:00", "14:00", "14:00", false), ("13:00", "14:00", "12:59", false), ("13:00", "14:00", "23:00", false),
            ("09:00", "09:00", "09:00", false),
        ]
    )
    func quietMembership(start: String, end: String, local: String, quiet: Bool) throws {
        let hours = QuietHours(start: try time(start), end: try time(end))
        #expect(LocalDeliveryPlanner.isQuiet(minuteOfDay: try time(local).minutesOfDay, hours) == quiet)
    }

    @Test("quiet hours 22:00-08:00 with hold: held until 08:00; 08:00 itself is not quiet")
    func quietHold() throws {
        let planner = try quietPlanner("22:00", "08:00", .hold)
        #expect(try planned(planner, "UTC", "2026-06-01T23:00:00Z") == due("2026-06-02T08:00:00Z"))
        #expect(try planned(planner, "UTC", "2026-06-01T22:00:00Z") == due("2026-06-02T08:00:00Z"))
        #expect(try planned(planner, "UTC", "2026-06-02T07:59:00Z") == due("2026-06-02T08:00:00Z"))
        #expect(try planned(planner, "UTC", "2026-06-02T08:00:00Z") == due("2026-06-02T08:00:00Z"))
        // Not quiet: due now, in now's window (21:45Z).
        #expect(try planned(planner, "UTC", "2026-06-01T21:59:30Z") == due("2026-06-01T21:45:00Z"))
        // Europe/Berlin (CEST, +2): 21:00Z is 23:00 local → 08:00 local on the 2nd = 06:00Z.
        #expect(try planned(planner, "Europe/Berlin", "2026-06-01T21:00:00Z") == due("2026-06-02T06:00:00Z"))
        // Asia/Kolkata: 02:00Z is 07:30 local → 08:00 local = 02:30Z.
        #expect(try planned(planner, "Asia/Kolkata", "2026-06-01T02:00:00Z") == due("2026-06-01T02:30:00Z"))
    }

    @Test("quiet hours 22:00-08:00 with skip")
    func quietSkip() throws {
        let planner = try quietPlanner("22:00", "08:00", .skip)
        #expect(try planned(planner, "UTC", "2026-06-01T23:00:00Z") == .skipQuietHours)
        #expect(try planned(planner, "UTC", "2026-06-02T07:59:00Z") == .skipQuietHours)
        #expect(try planned(planner, "UTC", "2026-06-02T08:00:00Z") == due("2026-06-02T08:00:00Z"))
        #expect(try planned(planner, "UTC", "2026-06-01T21:59:30Z") == due("2026-06-01T21:45:00Z"))
        // 21:00Z is 23:00 in Berlin but 21:00 in London (BST is 22:00): quiet only in Berlin.
        #expect(try planned(planner, "Europe/Berlin", "2026-06-01T21:00:00Z") == .skipQuietHours)
        #expect(try planned(planner, "Europe/London", "2026-06-01T20:30:00Z") == due("2026-06-01T20:30:00Z"))
    }

    @Test("quiet hours not crossing midnight: 13:00-14:00")
    func quietMidday() throws {
        let hold = try quietPlanner("13:00", "14:00", .hold)
        #expect(try planned(hold, "UTC", "2026-06-01T12:59:00Z") == due("2026-06-01T12:45:00Z"))
        #expect(try planned(hold, "UTC", "2026-06-01T13:00:00Z") == due("2026-06-01T14:00:00Z"))
        #expect(try planned(hold, "UTC", "2026-06-01T13:30:00Z") == due("2026-06-01T14:00:00Z"))
        #expect(try planned(hold, "UTC", "2026-06-01T14:00:00Z") == due("2026-06-01T14:00:00Z"))
        #expect(try planned(hold, "UTC", "2026-06-01T23:00:00Z") == due("2026-06-01T23:00:00Z"))
        let skip = try quietPlanner("13:00", "14:00", .skip)
        #expect(try planned(skip, "UTC", "2026-06-01T13:30:00Z") == .skipQuietHours)
        #expect(try planned(skip, "UTC", "2026-06-01T14:00:00Z") == due("2026-06-01T14:00:00Z"))
    }

    @Test("deliverAt 23:30 inside quiet hours 22:00-08:00: hold moves it to the next morning's 08:00")
    func deliverAtInsideQuietHours() throws {
        let quiet = QuietHours(start: try time("22:00"), end: try time("08:00"))
        let hold = LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("23:30"), quietHours: quiet))
        let now = try instant("2026-06-01T10:00:00Z")
        // UTC: 23:30 on the 1st → 08:00 on the 2nd.
        #expect(try hold.plan(timeZone: "UTC", now: now) == due("2026-06-02T08:00:00Z"))
        // Berlin (+2): 23:30 local (21:30Z) → 08:00 local on the 2nd = 06:00Z.
        #expect(try hold.plan(timeZone: "Europe/Berlin", now: now) == due("2026-06-02T06:00:00Z"))
        // Kathmandu (+5:45): now is 15:45 local; 23:30 local → 08:00 local on the 2nd = 02:15Z.
        #expect(try hold.plan(timeZone: "Asia/Kathmandu", now: now) == due("2026-06-02T02:15:00Z"))

        let skip = LocalDeliveryPlanner(
            rules: LocalTimeDelivery(deliverAt: try time("23:30"), quietHours: quiet, quietHoursAction: .skip))
        #expect(skip.plan(timeZone: "Europe/Berlin", now: now) == .skipQuietHours)

        // A deliverAt outside quiet hours is unaffected: 20:00 Berlin = 18:00Z.
        let outside = LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("20:00"), quietHours: quiet))
        #expect(try outside.plan(timeZone: "Europe/Berlin", now: now) == due("2026-06-01T18:00:00Z"))
    }

    @Test("the end of quiet hours falls in a DST gap or a repeated hour")
    func quietEndAcrossDST() throws {
        // New York 2026-03-08: quiet 00:00-02:30; 06:30Z is 01:30 EST; 02:30 does not exist → the jump, 07:00Z.
        let newYork = try quietPlanner("00:00", "02:30", .hold)
        #expect(try planned(newYork, "America/New_York", "2026-03-08T06:30:00Z") == due("2026-03-08T07:00:00Z"))
        // London 2026-03-29: quiet 22:00-01:30; 23:00Z is 23:00 GMT; 01:30 is in the gap → the jump, 01:00Z.
        let london = try quietPlanner("22:00", "01:30", .hold)
        #expect(try planned(london, "Europe/London", "2026-03-28T23:00:00Z") == due("2026-03-29T01:00:00Z"))
        // New York 2026-11-01: quiet 00:00-01:30. At 01:10 EDT (05:10Z) → 01:30 EDT (05:30Z); at 01:10 EST
        // (06:10Z, the second pass) → 01:30 EST (06:30Z), the next time the clock shows 01:30.
        let fallBack = try quietPlanner("00:00", "01:30", .hold)
        #expect(try planned(fallBack, "America/New_York", "2026-11-01T05:10:00Z") == due("2026-11-01T05:30:00Z"))
        #expect(try planned(fallBack, "America/New_York", "2026-11-01T06:10:00Z") == due("2026-11-01T06:30:00Z"))
    }

    @Test(
        "every answer is a window start, not before now's window, and within two days",
        arguments: ["Asia/Kolkata", "America/St_Johns", "Asia/Kathmandu", "America/New_York", "Australia/Lord_Howe",
            "Pacific/Chatham", "Europe/London", "Pacific/Kiritimati", "Pacific/Pago_Pago"]
    )
    func invariants(zone: String) throws {
        let quiet = QuietHours(start: try time("21:00"), end: try time("07:30"))
        let planners = [
            LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("20:07"))),
            LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time("02:30"), quietHours: quiet)),
            LocalDeliveryPlanner(rules: LocalTimeDelivery(quietHours: quiet)),
        ]
        // Every 13 minutes through March and early April 2026 (several zones change offset then).
        let start = try instant("2026-03-01T00:00:00Z").secondsSince1970
        for step in 0..<(45 * 24 * 60 / 13) {
            let now = start + Double(step * 13 * 60)
            let nowWindow = (now / 900).rounded(.down) * 900
            for planner in planners {
                guard case .at(let due) = planner.plan(timeZone: zone, now: Instant(secondsSince1970: now)) else {
                    Issue.record("hold never skips")
                    return
                }
                let seconds = due.secondsSince1970
                #expect(seconds.truncatingRemainder(dividingBy: 900) == 0)
                #expect(seconds >= nowWindow)
                #expect(seconds <= now + 2 * 86_400)
            }
        }
    }

    // MARK: - Helpers

    private func check(_ example: Case) throws {
        let planner = LocalDeliveryPlanner(rules: LocalTimeDelivery(deliverAt: try time(example.deliverAt)))
        let result = planner.plan(timeZone: example.zone, now: try instant(example.now))
        #expect(result == .at(try instant(example.expected)))
    }

    private func quietPlanner(
        _ start: String, _ end: String, _ action: QuietHoursAction
    ) throws -> LocalDeliveryPlanner {
        let hours = QuietHours(start: try time(start), end: try time(end))
        return LocalDeliveryPlanner(rules: LocalTimeDelivery(quietHours: hours, quietHoursAction: action))
    }

    private func planned(_ planner: LocalDeliveryPlanner, _ zone: String, _ now: String) throws -> LocalDelivery {
        planner.plan(timeZone: zone, now: try instant(now))
    }

    /// `.at` the instant of an ISO 8601 string.
    private func due(_ iso: String) throws -> LocalDelivery {
        .at(try instant(iso))
    }

    private func instant(_ iso: String) throws -> Instant {
        Instant(secondsSince1970: try Date(iso, strategy: .iso8601).timeIntervalSince1970)
    }

    @Test("at send time: outside quiet hours the send must be written before they begin; inside, hold until they end or skip")
    func quietHoursAtAnInstant() throws {
        let quiet = QuietHours(start: try time("22:00"), end: try time("08:00"))
        let day = 1_782_864_000.0  // 2026-07-01T00:00:00Z
        let hold = LocalDeliveryPlanner(rules: LocalTimeDelivery(quietHours: quiet))
        #expect(hold.quietHours(timeZone: "UTC", at: Instant(secondsSince1970: day + 21 * 3600))
            == .openUntil(Instant(secondsSince1970: day + 22 * 3600)))
        #expect(hold.quietHours(timeZone: "UTC", at: Instant(secondsSince1970: day + 23 * 3600))
            == .holdUntil(Instant(secondsSince1970: day + 32 * 3600)))
        // Berlin (CEST, UTC+2): 21:00Z is 23:00 there.
        #expect(hold.quietHours(timeZone: "Europe/Berlin", at: Instant(secondsSince1970: day + 21 * 3600))
            == .holdUntil(Instant(secondsSince1970: day + 30 * 3600)))
        let skip = LocalDeliveryPlanner(rules: LocalTimeDelivery(quietHours: quiet, quietHoursAction: .skip))
        #expect(skip.quietHours(timeZone: "UTC", at: Instant(secondsSince1970: day + 23 * 3600)) == .skip)
        #expect(LocalDeliveryPlanner(rules: LocalTimeDelivery()).quietHours(timeZone: "UTC", at: Instant(secondsSince1970: day)) == nil)
    }

    private func time(_ text: String) throws -> LocalTime {
        try #require(LocalTime(parsing: text))
    }
}
