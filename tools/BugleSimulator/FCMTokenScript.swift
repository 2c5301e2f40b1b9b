/// The deterministic per-token outcome scheme of the FCM simulator: a message whose registration token (or
/// FID) starts with one of these prefixes, compared case-insensitively on the first four characters, gets
/// the scripted answer once it passed every other check (route, access token, project, quota, body
/// validation, `validate_only`). Topic and condition messages are never scripted.
///
/// | Prefix | HTTP | `status` | `FcmError.errorCode` | Notes |
/// |---|---|---|---|---|
/// | `dead` | 404 | `NOT_FOUND` | `UNREGISTERED` | counts toward quota |
/// | `bad0` | 400 | `INVALID_ARGUMENT` | `INVALID_ARGUMENT` | "The registration token is not a valid FCM registration token"; counts toward quota |
/// | `sndr` | 403 | `PERMISSION_DENIED` | `SENDER_ID_MISMATCH` | counts toward quota |
/// | `3pa0` | 401 | `UNAUTHENTICATED` | `THIRD_PARTY_AUTH_ERROR` | no `WWW-Authenticate`; counts toward quota |
/// | `4290` | 429 | `RESOURCE_EXHAUSTED` | `QUOTA_EXCEEDED` | `Retry-After`; does not count |
/// | `5030` | 503 | `UNAVAILABLE` | `UNAVAILABLE` | `Retry-After`; does not count |
/// | `5000` | 500 | `INTERNAL` | `INTERNAL` | does not count |
/// | `fa11` | — | — | — | never answered; does not count |
///
/// Tokens with any other start (for example `live-…`) are treated normally.
public enum FCMTokenScript: Sendable, Equatable {
    /// Answer with this HTTP status, canonical status and `FcmError` code.
    case error(status: Int, canonicalStatus: String, errorCode: String, retryAfter: Bool)
    /// Never answer.
    case hang

    /// Fixed table of prefixes (all lowercase, 4 characters).
    public static let table: [(prefix: String, script: FCMTokenScript)] = [
        ("dead", .error(status: 404, canonicalStatus: "NOT_FOUND", errorCode: "UNREGISTERED", retryAfter: false)),
        ("bad0", .error(status: 400, canonicalStatus: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT", retryAfter: false)),
        ("sndr", .error(status: 403, canonicalStatus: "PERMISSION_DENIED", errorCode: "SENDER_ID_MISMATCH", retryAfter: false)),
        ("3pa0", .error(status: 401, canonicalStatus: "UNAUTHENTICATED", errorCode: "THIRD_PARTY_AUTH_ERROR", retryAfter: false)),
        ("4290", .error(status: 429, canonicalStatus: "RESOURCE_EXHAUSTED", errorCode: "QUOTA_EXCEEDED", retryAfter: true)),
        ("5030", .error(status: 503, canonicalStatus: "UNAVAILABLE", errorCode: "UNAVAILABLE", retryAfter: true)),
        ("5000", .error(status: 500, canonicalStatus: "INTERNAL", errorCode: "INTERNAL", retryAfter: false)),
        ("fa11", .hang),
    ]

    /// The scripted outcome for a token, or nil for "treat normally".
    /// - Parameter token: The registration token (or FID) from the message.
    public static func script(for token: some StringProtocol) -> FCMTokenScript? {
        guard token.utf8.count >= 4 else { return nil }
        let prefix = token.prefix(4).lowercased()
        for entry in table where entry.prefix == prefix {
            return entry.script
        }
        return nil
    }

    /// Whether the answer counts toward the project quota (4xx other than 429 do; 429, 5xx and hangs do not).
    var countsTowardQuota: Bool {
        switch self {
        case .hang: return false
        case .error(let status, _, _, _): return (400..<500).contains(status) && status != 429
        }
    }
}
