import BugleCore

/// UNIX seconds as a PostgreSQL `timestamptz` literal in UTC, to the microsecond: `2026-11-25 06:30:00.250000+00`.
///
/// Rounded to the microsecond as `to_timestamp(float8)` rounds (seconds from PostgreSQL's epoch, 2000-01-01, times a
/// million, half to even), so a value written through `COPY` equals the one `to_timestamp` would have stored.
enum UTCTimestampText {
    /// 2000-01-01 in UNIX seconds.
    private static let postgresEpoch: Double = 946_684_800

    static func format(secondsSince1970 seconds: Double) -> String {
        let sincePostgresEpoch = ((seconds - postgresEpoch) * 1_000_000).rounded(.toNearestOrEven)
        let micros = Int(sincePostgresEpoch) + Int(postgresEpoch) * 1_000_000
        let (days, microOfDay) = floorDivide(micros, 86_400_000_000)
        let date = CivilDate(daysSince1970: days)
        let secondOfDay = microOfDay / 1_000_000
        let fraction = microOfDay % 1_000_000
        return "\(pad(date.year, 4))-\(pad(date.month, 2))-\(pad(date.day, 2)) \(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):"
            + "\(pad(secondOfDay % 60, 2)).\(pad(fraction, 6))+00"
    }

    private static func floorDivide(_ value: Int, _ divisor: Int) -> (Int, Int) {
        let quotient = value / divisor
        let remainder = value % divisor
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
