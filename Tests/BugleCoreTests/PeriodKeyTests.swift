import BugleCore
import Foundation
import Testing

@Suite("Period keys")
struct PeriodKeyTests {
    static func date(_ iso: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: iso))
    }

    @Test("daily, weekly (ISO week), monthly, once, none")
    func keys() throws {
        let date = try Self.date("2026-11-22T23:59:59Z")
        #expect(PeriodKey.key(for: .daily, at: date) == "d:2026-11-22")
        #expect(PeriodKey.key(for: .weekly, at: date) == "w:2026-W47")
        #expect(PeriodKey.key(for: .monthly, at: date) == "m:2026-11")
        #expect(PeriodKey.key(for: .once, at: date) == "once")
        #expect(PeriodKey.key(for: .none, at: date) == nil)
    }

    @Test("ISO week-year at the turn of the year")
    func weekYear() throws {
        // 2027-01-01 is a Friday: it belongs to ISO week 53 of 2026.
        #expect(PeriodKey.key(for: .weekly, at: try Self.date("2027-01-01T10:00:00Z")) == "w:2026-W53")
        // 2024-12-30 is a Monday: ISO week 1 of 2025.
        #expect(PeriodKey.key(for: .weekly, at: try Self.date("2024-12-30T00:00:00Z")) == "w:2025-W01")
    }

    @Test("days are UTC days")
    func utcDays() throws {
        #expect(PeriodKey.key(for: .daily, at: try Self.date("2026-03-01T00:00:00Z")) == "d:2026-03-01")
        #expect(PeriodKey.key(for: .daily, at: try Self.date("2026-02-28T23:59:59Z")) == "d:2026-02-28")
    }
}
