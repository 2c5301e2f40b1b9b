import Crypto
import Foundation

/// Mints and checks the FCM simulator's OAuth2 access tokens. Tokens are stateless, so the simulator keeps
/// no token table and a CLI (`bugle-sim fcm-token`) can mint valid tokens offline for h2load or curl:
///
/// `ya29.sim.<base64url(expiry in ms since 1970, decimal)>.<base64url(HMAC-SHA256(secret, "ya29.sim.<expiry part>"))>`
///
/// The secret lives in the simulator directory's `fcm.json` (mode 0600).
public struct FCMAccessTokenAuthority: Sendable {
    /// The result of checking a presented token.
    public enum Verdict: Sendable, Equatable {
        /// Authentic and unexpired; `expiresAt` is in seconds since 1970.
        case valid(expiresAt: Double)
        /// Authentic but expired.
        case expired
        /// Not a token of this simulator.
        case invalid
    }

    private static let prefix = "ya29.sim."
    private let secret: SymmetricKey

    /// Creates an authority.
    /// - Parameter secret: The HMAC secret (from ``SimulatorCertificates/fcmTokenSecret``).
    public init(secret: SymmetricKey) {
        self.secret = secret
    }

    /// Mints a token that expires at `expiresAt`.
    /// - Parameter expiresAt: Expiry in seconds since 1970 (kept to the millisecond).
    public func mint(expiresAt: Double) -> String {
        let milliseconds = Int64((expiresAt * 1000).rounded(.down))
        let expiryPart = Base64URL.encode(Array(String(milliseconds).utf8))
        let signed = Self.prefix + expiryPart
        let mac = HMAC<SHA256>.authenticationCode(for: Data(signed.utf8), using: secret)
        return signed + "." + Base64URL.encode(mac)
    }

    /// Checks a token presented as `Authorization: Bearer <token>`.
    /// - Parameters:
    ///   - token: The token text.
    ///   - now: Current wall-clock seconds since 1970.
    public func verify(_ token: some StringProtocol, now: Double) -> Verdict {
        let utf8 = token.utf8
        guard utf8.count < 512, utf8.starts(with: Self.prefix.utf8) else { return .invalid }
        let rest = utf8.dropFirst(Self.prefix.utf8.count)
        guard let dot = rest.firstIndex(of: UInt8(ascii: ".")) else { return .invalid }
        let expiryPart = Array(rest[..<dot])
        let macPart = String(decoding: rest[rest.index(after: dot)...], as: UTF8.self)
        guard let mac = Base64URL.decode(macPart), mac.count == 32 else { return .invalid }
        let signed = Array(Self.prefix.utf8) + expiryPart
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signed, using: secret) else {
            return .invalid
        }
        guard let decimal = Base64URL.decode(String(decoding: expiryPart, as: UTF8.self)),
            let milliseconds = Int64(String(decoding: decimal, as: UTF8.self))
        else {
            return .invalid
        }
        let expiresAt = Double(milliseconds) / 1000
        return now < expiresAt ? .valid(expiresAt: expiresAt) : .expired
    }
}
