import BugleCore
import Foundation
import _CryptoExtras

/// The RS256 JWT a service account signs to obtain an access token (JWT-bearer grant, PROTOCOLS.md §2.5):
/// header `{"alg":"RS256","kid":<private_key_id>,"typ":"JWT"}`, claims `iss` (client email), `scope`,
/// `aud` (the token URI), `iat` and `exp` = `iat` + 3600.
public enum FCMAssertion {
    /// The scope `messages:send` needs.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    private struct Header: Encodable {
        var alg = "RS256"
        var kid: String
        var typ = "JWT"
    }

    private struct Claims: Encodable {
        var aud: String
        var exp: Int64
        var iat: Int64
        var iss: String
        var scope: String
    }

    /// Builds and signs an assertion.
    /// - Parameters:
    ///   - account: The service account.
    ///   - issuedAt: `iat`, seconds since 1970.
    ///   - lifetime: `exp - iat` in seconds (Google's maximum, 3600, by default).
    /// - Returns: The compact JWT.
    /// - Throws: A signing error from the crypto library.
    public static func make(account: FCMServiceAccount, issuedAt: Int64, lifetime: Int64 = 3600) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try encoder.encode(Header(kid: account.privateKeyID))
        let claims = try encoder.encode(
            Claims(
                aud: account.tokenURI.absoluteString,
                exp: issuedAt + lifetime,
                iat: issuedAt,
                iss: account.clientEmail,
                scope: scope
            )
        )
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try account.privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}
