import BugleCore

/// The report's `finished_at` text, `2026-11-26T03:24:22.517Z`, written from PostgreSQL's binary `timestamptz`.
///
/// It is exactly what `to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')` gives, milliseconds truncated,
/// which the report used to ask the server for: about 0.3 CPU-seconds of PostgreSQL's per 1,000,000 rows.
/// `infinity` and `-infinity` give nothing, as `to_char` gives NULL for them.
enum ReportTimestamp {
    /// 2000-01-01 in microseconds since 1970.
    private static let postgresEpoch: Int64 = 946_684_800_000_000
    private static let microsecondsPerDay: Int64 = 86_400_000_000

    /// Appends the text of `microseconds` (since 2000-01-01 UTC) to `out`.
    static func append(microsecondsSince2000 microseconds: Int64, to out: inout [UInt8]) {
        guard microseconds != .max, microseconds != .min else { return }
        let (sinceUnix, overflow) = microseconds.addingReportingOverflow(postgresEpoch)
        guard !overflow else { return }
        var days = sinceUnix / microsecondsPerDay
        var ofDay = sinceUnix % microsecondsPerDay
        if ofDay < 0 {
            days -= 1
            ofDay += microsecondsPerDay
        }
        let date = CivilDate(daysSince1970: Int(days))
        let millisecond = Int(ofDay / 1000)
        let second = millisecond / 1000
        appendDigits(date.year, width: 4, to: &out)
        out.append(UInt8(ascii: "-"))
        appendDigits(date.month, width: 2, to: &out)
        out.append(UInt8(ascii: "-"))
        appendDigits(date.day, width: 2, to: &out)
        out.append(UInt8(ascii: "T"))
        appendDigits(second / 3600, width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(second / 60 % 60, width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(second % 60, width: 2, to: &out)
        out.append(UInt8(ascii: "."))
        appendDigits(millisecond % 1000, width: 3, to: &out)
        out.append(UInt8(ascii: "Z"))
    }

    /// `value` in decimal, zero-padded to at least `width` digits (a negative year keeps its sign first).
    private static func appendDigits(_ value: Int, width: Int, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var divisor: UInt = 1
        var digits = 1
        while divisor <= magnitude / 10 {
            divisor *= 10
            digits += 1
        }
        for _ in digits..<max(width, digits) { out.append(UInt8(ascii: "0")) }
        var rest = magnitude
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}
