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

    @Test("a run scheduled for a later send_at takes the period of its send_at; one whose send_at has passed, now's")
    func scheduledRun() throws {
        let now = try Self.date("2026-12-02T15:00:00Z")
        var campaign = Campaign(
            name: "c", notificationType: "t", segment: Segment(sql: "SELECT 1"),
            message: MessageTemplate(defaultLocale: "en", locales: ["en": LocalizedCopy(title: "t", body: "b")]), delivery: DeliveryOptions())
        campaign.dedupe = .daily
        campaign.delivery.sendAt = Instant(secondsSince1970: try Self.date("2026-12-03T09:00:00Z").timeIntervalSince1970)
        #expect(PeriodKey.key(for: campaign, now: now) == "d:2026-12-03")
        campaign.dedupe = .weekly
        campaign.delivery.sendAt = Instant(secondsSince1970: try Self.date("2026-12-09T09:00:00Z").timeIntervalSince1970)
        #expect(PeriodKey.key(for: campaign, now: now) == "w:2026-W50")
        campaign.delivery.sendAt = Instant(secondsSince1970: try Self.date("2026-11-20T09:00:00Z").timeIntervalSince1970)
        #expect(PeriodKey.key(for: campaign, now: now) == "w:2026-W49")
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
