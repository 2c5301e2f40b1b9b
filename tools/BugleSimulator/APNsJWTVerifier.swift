import Crypto
import Foundation
import NIOConcurrencyHelpers

/// Verifies APNs provider tokens (ES256 JWTs) and caches the verdict per distinct token string, so the
/// signature is checked once per token rather than once per request.
///
/// Checks: three base64url parts; header `alg` = `ES256` and a known `kid`; claims `iss` = team and `iat`
/// as an integer or a numeric string of seconds; signature as raw R‖S (64 bytes) or DER over
/// `header.claims`. Unknown header and claim fields are ignored. The age check (`iat` vs. now) is not
/// cached: callers compare ``Verdict/valid(issuedAt:keyID:)`` against their clock on every request.
final class APNsJWTVerifier: Sendable {
    /// The cached result of verifying one token string.
    enum Verdict: Sendable, Equatable {
        /// Signature and claims are fine; `issuedAt` is the `iat` in seconds since 1970.
        case valid(issuedAt: Int64, keyID: String)
        /// Not acceptable (`InvalidProviderToken`).
        case invalid
    }

    private let teamID: String
    private let keys: [String: P256.Signing.PublicKey]
    private let cache = NIOLockedValueBox<[String: Verdict]>([:])
    private let cacheLimit = 4096

    /// Creates a verifier.
    /// - Parameters:
    ///   - teamID: Required `iss`.
    ///   - keys: Public keys by key id.
    init(teamID: String, keys: [String: P256.Signing.PublicKey]) {
        self.teamID = teamID
        self.keys = keys
    }

    /// Verifies `jwt`, using the cache when the same string was seen before.
    /// - Parameter jwt: The token after `bearer `.
    func verify(_ jwt: String) -> Verdict {
        if let cached = cache.withLockedValue({ $0[jwt] }) {
            return cached
        }
        let verdict = Self.verifyUncached(jwt, teamID: teamID, keys: keys)
        cache.withLockedValue { cache in
            if cache.count >= cacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[jwt] = verdict
        }
        return verdict
    }

    static func verifyUncached(_ jwt: String, teamID: String, keys: [String: P256.Signing.PublicKey]) -> Verdict {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = base64URLDecode(parts[0]),
            let claimsData = base64URLDecode(parts[1]),
            let signatureData = base64URLDecode(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any],
            header["alg"] as? String == "ES256",
            let keyID = header["kid"] as? String,
            let key = keys[keyID],
            claims["iss"] as? String == teamID,
            let issuedAt = numericSeconds(claims["iat"])
        else {
            return .invalid
        }
        let signingInput = Data(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let signature: P256.Signing.ECDSASignature?
        if signatureData.count == 64 {
            signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData)
        } else {
            signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureData)
        }
        guard let signature, key.isValidSignature(signature, for: signingInput) else {
            return .invalid
        }
        return .valid(issuedAt: issuedAt, keyID: keyID)
    }

    private static func numericSeconds(_ value: Any?) -> Int64? {
        if let string = value as? String {
            return Int64(string)
        }
        if let number = value as? NSNumber {
            let double = number.doubleValue
            guard double == double.rounded(), abs(double) < 1e15 else { return nil }
            return number.int64Value
        }
        return nil
    }

    static func base64URLDecode(_ part: Substring) -> Data? {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        let remainder = text.utf8.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { text += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: text)
    }
}
