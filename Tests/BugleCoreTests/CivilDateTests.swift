import BugleCore
import Foundation
import Testing

@Suite("Civil dates from day counts")
struct CivilDateTests {
    @Test("every sampled day from 1600 to 4000 matches Foundation's Gregorian calendar in UTC")
    func matchesFoundation() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        // Around the epoch day by day, then every 7th day. Foundation's calendar turns Julian before October 1582;
        // CivilDate stays Gregorian (as PostgreSQL does), so the comparison starts in 1600.
        let days = Array(-1_000...1_000) + Array(stride(from: -135_140, through: 741_423, by: 7))
        var mismatches: [Int] = []
        for day in days {
            let parts = calendar.dateComponents(in: calendar.timeZone, from: Date(timeIntervalSince1970: Double(day) * 86_400))
            let era = parts.era ?? 1
            let expectedYear = era == 0 ? 1 - (parts.year ?? 0) : parts.year ?? 0
            let date = CivilDate(daysSince1970: day)
            if date.year != expectedYear || date.month != parts.month || date.day != parts.day { mismatches.append(day) }
        }
        #expect(mismatches.count == 0, "first mismatches: \(mismatches.prefix(5))")
    }

    @Test("known dates: the epoch, leap days, the turn of a century")
    func knownDates() {
        #expect(Self.parts(0) == [1970, 1, 1])
        #expect(Self.parts(-1) == [1969, 12, 31])
        #expect(Self.parts(11_016) == [2000, 2, 29])
        #expect(Self.parts(10_957) == [2000, 1, 1])
        #expect(Self.parts(47_541) == [2100, 3, 1])
    }

    private static func parts(_ days: Int) -> [Int] {
        let date = CivilDate(daysSince1970: days)
        return [date.year, date.month, date.day]
    }

    @Test("CSV timestamps: whole seconds in UTC, rounded down, before the epoch too")
    func csvTimestamps() {
        #expect(CSVFormat.timestamp(Instant(secondsSince1970: 1_795_629_600.9)) == "2026-11-25T18:00:00Z")
        #expect(CSVFormat.timestamp(Instant(secondsSince1970: -0.5)) == "1969-12-31T23:59:59Z")
    }
}
