import Crypto
import Foundation

extension SimulatorCertificates {
    /// A provider JWT signed with this directory's `.p8` key, for load generators such as h2load that cannot
    /// sign their own (`bugle-sim jwt DIR`). Valid for the simulator's JWT max age from `issuedAt`.
    /// - Throws: when the key file cannot be read or parsed.
    public func providerJWT(issuedAt: Date = Date()) throws -> String {
        let pem = try String(contentsOfFile: keyFile, encoding: .utf8)
        let key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(Int(issuedAt.timeIntervalSince1970))}"#
        let signingInput = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
