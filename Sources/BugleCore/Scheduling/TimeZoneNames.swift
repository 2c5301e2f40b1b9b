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
        // The same name in other letter case first: `asia/kolkata` is too far from `Asia/Kolkata` by edit distance,
        // which suggested `Asia/Almaty`.
        if let suggestion = inOtherCase(identifier) ?? EditDistance.closest(to: identifier, among: TimeZone.knownTimeZoneIdentifiers) {
            message += " (did you mean '\(suggestion)'?)"
        }
        return message
    }

    /// The known name `identifier` spells in other letter case: one of the listed names, or an alias Foundation accepts
    /// but does not list (`Asia/Kolkata` beside the listed `Asia/Calcutta`) with each word capitalized.
    static func inOtherCase(_ identifier: String) -> String? {
        let lowered = identifier.lowercased()
        if let listed = known.first(where: { $0.lowercased() == lowered }) { return listed }
        let capitalized = lowered.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.split(separator: "_", omittingEmptySubsequences: false).map { word in
                word.split(separator: "-", omittingEmptySubsequences: false).map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: "-")
            }.joined(separator: "_")
        }.joined(separator: "/")
        return capitalized != identifier && isKnown(capitalized) ? capitalized : nil
    }
}
