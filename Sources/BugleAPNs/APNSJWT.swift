import BugleCore
import Crypto
import Foundation

/// ES256 JSON Web Tokens as APNs wants them (PROTOCOLS.md §1.5).
public enum APNSJWT {
    private struct Header: Encodable {
        var alg = "ES256"
        var kid: String
    }

    private struct Claims: Encodable {
        var iss: String
        var iat: Int64
    }

    /// Builds and signs one JWT (pure apart from ECDSA's random nonce).
    /// - Parameters:
    ///   - privateKey: Signing key.
    ///   - keyID: `kid`.
    ///   - teamID: `iss`.
    ///   - issuedAt: `iat`, seconds since 1970 (encoded as a JSON integer).
    public static func make(
        privateKey: P256.Signing.PrivateKey,
        keyID: String,
        teamID: String,
        issuedAt: Int64
    ) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding two flat structs of strings and an integer cannot fail.
        let header = (try? encoder.encode(Header(kid: keyID))) ?? Data()
        let claims = (try? encoder.encode(Claims(iss: teamID, iat: issuedAt))) ?? Data()
        let signingInput = base64URL(header) + "." + base64URL(claims)
        let signature = (try? privateKey.signature(for: Data(signingInput.utf8)).rawRepresentation) ?? Data()
        return signingInput + "." + base64URL(signature)
    }

    /// Base64url without padding.
    /// - Parameter data: Bytes to encode.
    public static func base64URL(_ data: Data) -> String {
        Base64URL.encode(data)
    }
}
