@testable import BugleStore
import NIOCore
import PostgresNIO
import Testing

@Suite("The ledger's COPY text: escapes and timestamps")
struct LedgerCopyPageTests {
    @Test("UNIX seconds become the UTC timestamp to_timestamp would store, to the microsecond")
    func timestampsMatchToTimestamp() async throws {
        #expect(UTCTimestampText.format(secondsSince1970: 0) == "1970-01-01 00:00:00.000000+00")
        #expect(UTCTimestampText.format(secondsSince1970: 1_700_000_000.25) == "2023-11-14 22:13:20.250000+00")
        #expect(UTCTimestampText.format(secondsSince1970: 951_825_600) == "2000-02-29 12:00:00.000000+00")
        #expect(UTCTimestampText.format(secondsSince1970: -0.5) == "1969-12-31 23:59:59.500000+00")
        let values: [Double] = [0, 1, 59.999_999_7, 86_399.5, 951_782_399.000_001, 1_709_164_800, 4_107_542_400.123_456, 1_764_000_000.000_000_4, -86_400.25]
        try await LedgerTestSupport.withFreshDatabase { client in
            for value in values {
                let text = UTCTimestampText.format(secondsSince1970: value)
                let same = try await LedgerTestSupport.scalar(client, "SELECT \(text)::timestamptz = to_timestamp(\(value))", as: Bool.self)
                #expect(same == true, "\(value) → \(text)")
            }
        }
    }

    @Test("COPY's text escapes: backslash, tab, newline and carriage return; everything else as is")
    func escapes() {
        var buffer = ByteBuffer()
        LedgerCopyPage.appendEscaped("a\\b\tc\nd\re \"ü\" \\N", to: &buffer)
        #expect(String(buffer: buffer) == "a\\\\b\\tc\\nd\\re \"ü\" \\\\N")
        var plain = ByteBuffer()
        LedgerCopyPage.appendEscaped("abcdef0123", to: &plain)
        #expect(String(buffer: plain) == "abcdef0123")
    }

    @Test("a page's lines: empty text is NULL, rows to send are unfinished, skipped rows finish at the given time")
    func pageLines() {
        var page = LedgerCopyPage(runID: 7, capacity: 2)
        page.appendPending(
            seq: 1, deviceID: 10, userID: "u1", token: "ab", platform: "ios", provider: "apns", locale: "en", timezone: "",
            variables: "", variant: "", copyIndex: nil, notBefore: 0
        )
        page.appendPending(
            seq: 3, deviceID: 12, userID: "u3", token: "cd", platform: "ios", provider: "apns", locale: "en", timezone: "Asia/Tokyo",
            variables: "", variant: "", copyIndex: nil, notBefore: 1_796_169_600, periodKey: "d:2026-12-02"
        )
        page.appendFinished(seq: 2, deviceID: 11, userID: "", platform: "x", state: "skipped_invalid", code: "unknown_platform")
        #expect(page.rows == 3)
        #expect(page.validCount == 2)
        #expect(
            String(buffer: page.pendingLines)
                == "7\t1\t10\tu1\tab\tios\tapns\ten\t\\N\t\\N\tpending\t\\N\t\\N\t\\N\t-infinity\t\\N\t\\N\n"
                + "7\t3\t12\tu3\tcd\tios\tapns\ten\tAsia/Tokyo\t\\N\tpending\t\\N\t\\N\t\\N\t2026-12-02 00:00:00.000000+00\td:2026-12-02\t\\N\n")
        var finished = ByteBuffer()
        page.appendFinishedRows(finishedAt: "2026-11-25 06:00:00+00", to: &finished)
        #expect(String(buffer: finished) == "7\t2\t11\t\\N\t\\N\tx\tnone\t\\N\t\\N\t\\N\tskipped_invalid\tunknown_platform\t\\N\t\\N\t-infinity\t\\N\t2026-11-25 06:00:00+00\n")
        #expect(LedgerCopyPage.columns.count == 17 && LedgerCopyPage.columns.last == "finished_at")
    }
}
