import Crypto
import Foundation
import _CryptoExtras

/// Checks the JWT-bearer assertion of an OAuth2 token request (PROTOCOLS.md §2.5, §4.2 item 2), in this
/// order: three base64url parts with JSON header and claims → header `alg` = `RS256` → `iss` = the service
/// account's `client_email` (else 401 `invalid_client`) → `kid`, when present, = `private_key_id` →
/// RS256 signature (PKCS#1 v1.5, SHA-256) → `aud` → `iat`/`exp` → `scope`.
struct FCMAssertionVerifier: Sendable {
    /// The verdict on one assertion.
    enum Outcome: Sendable, Equatable {
        /// Grant an access token.
        case granted
        /// Answer an OAuth error: `status`, `error` and `error_description`.
        case rejected(status: Int, error: String, description: String)
    }

    /// Scopes that allow `messages.send`.
    static let acceptedScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging",
        "https://www.googleapis.com/auth/cloud-platform",
    ]

    /// Longest accepted `exp - iat` (before skew), seconds.
    static let maxLifetime: Double = 3600

    static let invalidSignature = Outcome.rejected(status: 400, error: "invalid_grant", description: "Invalid JWT Signature.")
    static let badTimes = Outcome.rejected(
        status: 400,
        error: "invalid_grant",
        description:
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
    )

    let clientEmail: String
    let privateKeyID: String
    let key: _RSA.Signing.PublicKey
    /// Tolerated clock skew, seconds.
    let skew: Double

    /// Verifies an assertion.
    /// - Parameters:
    ///   - assertion: The compact JWT (never logged or echoed).
    ///   - now: Wall-clock seconds since 1970.
    ///   - audiences: Accepted `aud` values.
    func verify(_ assertion: Substring, now: Double, audiences: Set<String>) -> Outcome {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(parts[0]),
            let claimsBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2]),
            let header = try? SimulatorJSON.parse(headerBytes), case .object = header,
            let claims = try? SimulatorJSON.parse(claimsBytes), case .object = claims
        else {
            return .rejected(status: 400, error: "invalid_grant", description: "Invalid JWT: malformed assertion.")
        }
        guard header["alg"]?.stringValue == "RS256" else { return Self.invalidSignature }
        guard claims["iss"]?.stringValue == clientEmail else {
            return .rejected(status: 401, error: "invalid_client", description: "The OAuth client was not found.")
        }
        if let kid = header["kid"], kid != .null {
            guard kid.stringValue == privateKeyID else { return Self.invalidSignature }
        }
        let signingInput = Array(assertion.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let signature = _RSA.Signing.RSASignature(rawRepresentation: signatureBytes)
        guard key.isValidSignature(signature, for: signingInput, padding: .insecurePKCS1v1_5) else {
            return Self.invalidSignature
        }
        guard let audience = claims["aud"]?.stringValue, audiences.contains(audience) else {
            return .rejected(status: 400, error: "invalid_grant", description: "Invalid JWT: Failed audience check.")
        }
        guard case .number(let issuedAt)? = claims["iat"], case .number(let expiresAt)? = claims["exp"],
            expiresAt > issuedAt,
            expiresAt - issuedAt <= Self.maxLifetime + skew,
            issuedAt <= now + skew,
            expiresAt > now - skew
        else {
            return Self.badTimes
        }
        let scopes = (claims["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        guard scopes.contains(where: Self.acceptedScopes.contains) else {
            return .rejected(
                status: 400,
                error: "invalid_scope",
                description: "Invalid OAuth scope or ID token audience provided."
            )
        }
        return .granted
    }
}
