import Foundation

/// Checks IANA time-zone identifiers (campaign `timezone` keys, devices' `timezone` column).
public enum TimeZoneNames {
    /// The identifiers the system knows, looked up before asking Foundation (a device import checks one per row).
    private static let known = Set(TimeZone.knownTimeZoneIdentifiers)

    /// Whether `identifier` names a time zone (an IANA name, or an alias Foundation accepts such as `UTC`).
    public static func isKnown(_ identifier: String) -> Bool {
        known.contains(identifier) || TimeZone(identifier: identifier) != nil
    }

    /// Why `identifier` is refused, with the closest known name when one is near; nil when it is known.
    /// - Parameter shown: How the value is quoted in the message.
    public static func problem(_ identifier: String, shown: String) -> String? {
        guard !isKnown(identifier) else { return nil }
        var message = "unknown time zone \(shown); expected an IANA identifier such as UTC, Europe/Berlin or America/New_York"
        if let suggestion = EditDistance.closest(to: identifier, among: TimeZone.knownTimeZoneIdentifiers) {
            message += " (did you mean '\(suggestion)'?)"
        }
        return message
    }
}
