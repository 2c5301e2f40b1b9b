/// UNIX seconds as a PostgreSQL `timestamptz` literal in UTC, to the microsecond: `2026-11-25 06:30:00.250000+00`.
///
/// Rounded to the microsecond as `to_timestamp(float8)` rounds (seconds from PostgreSQL's epoch, 2000-01-01, times a
/// million, half to even), so a value written through `COPY` equals the one `to_timestamp` would have stored.
enum UTCTimestampText {
    /// 2000-01-01 in UNIX seconds.
    private static let postgresEpoch: Double = 946_684_800

    static func format(secondsSince1970 seconds: Double) -> String {
        let sincePostgresEpoch = ((seconds - postgresEpoch) * 1_000_000).rounded(.toNearestOrEven)
        let micros = Int64(sincePostgresEpoch) + Int64(postgresEpoch) * 1_000_000
        let (days, microOfDay) = floorDivide(micros, 86_400_000_000)
        let (year, month, day) = civilDate(daysSince1970: days)
        let secondOfDay = microOfDay / 1_000_000
        let fraction = microOfDay % 1_000_000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2)) \(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):"
            + "\(pad(secondOfDay % 60, 2)).\(pad(fraction, 6))+00"
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value / divisor
        let remainder = value % divisor
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's days-to-civil algorithm).
    private static func civilDate(daysSince1970 days: Int64) -> (Int64, Int64, Int64) {
        let shifted = days + 719_468
        let era = floorDivide(shifted, 146_097).0
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
