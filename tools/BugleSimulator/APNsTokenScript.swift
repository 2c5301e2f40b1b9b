/// The deterministic per-token outcome scheme of the simulator: a request whose device token starts with
/// one of these (lower- or upper-case) hex prefixes gets the scripted answer once it passed every other
/// check (method, path, auth, headers, payload).
///
/// | Prefix | Answer |
/// |---|---|
/// | `dead` | 410 `Unregistered` with `timestamp` (ms) |
/// | `e410` | 410 `ExpiredToken` with `timestamp` (ms) |
/// | `bad0` | 400 `BadDeviceToken` |
/// | `4001` | 400 `DeviceTokenNotForTopic` |
/// | `4290` | 429 `TooManyRequests` |
/// | `5000` | 500 `InternalServerError` |
/// | `5030` | 503 `ServiceUnavailable` |
/// | `5031` | 503 `Shutdown` |
/// | `fa11` | never answered (hang) |
///
/// Tokens whose first hex digit is `0`–`3` never match a prefix, so test generators that want
/// "always delivered" tokens can set the first nibble to 0–3.
public enum APNsTokenScript: Sendable, Equatable {
    /// Answer with this status and reason (410 adds a timestamp).
    case error(status: Int, reason: String)
    /// Never answer.
    case hang

    /// Fixed table of prefixes (all lowercase, 4 hex digits).
    public static let table: [(prefix: String, script: APNsTokenScript)] = [
        ("dead", .error(status: 410, reason: "Unregistered")),
        ("e410", .error(status: 410, reason: "ExpiredToken")),
        ("bad0", .error(status: 400, reason: "BadDeviceToken")),
        ("4001", .error(status: 400, reason: "DeviceTokenNotForTopic")),
        ("4290", .error(status: 429, reason: "TooManyRequests")),
        ("5000", .error(status: 500, reason: "InternalServerError")),
        ("5030", .error(status: 503, reason: "ServiceUnavailable")),
        ("5031", .error(status: 503, reason: "Shutdown")),
        ("fa11", .hang),
    ]

    /// The scripted outcome for a token, or nil for "treat normally".
    /// - Parameter token: The device token from `:path`.
    public static func script(for token: Substring) -> APNsTokenScript? {
        guard token.utf8.count >= 4 else { return nil }
        let prefix = token.prefix(4).lowercased()
        for entry in table where entry.prefix == prefix {
            return entry.script
        }
        return nil
    }
}
