/// The deterministic per-token behaviour of the legacy simulator, by the token's first two bytes (its
/// first four hex digits), applied to notifications that passed every other check:
///
/// | Prefix | Behaviour |
/// |---|---|
/// | `bad0` | error response status 8 (invalid token), then close |
/// | `dead` | accepted, and the token joins the feedback list (app uninstalled) at the acceptance time |
///
/// Every other token is accepted silently. The same prefixes mean `BadDeviceToken` and 410 `Unregistered`
/// in the HTTP/2 simulator.
public enum LegacyAPNsTokenScript: Sendable, Equatable {
    /// Status 8.
    case invalidToken
    /// Accepted, then reported by the feedback service.
    case uninstalled

    /// The scripted behaviour for a binary token, or nil for "accept".
    /// - Parameter token: The token bytes.
    public static func script(for token: [UInt8]) -> LegacyAPNsTokenScript? {
        guard token.count >= 2 else { return nil }
        switch (token[0], token[1]) {
        case (0xBA, 0xD0): return .invalidToken
        case (0xDE, 0xAD): return .uninstalled
        default: return nil
        }
    }
}
