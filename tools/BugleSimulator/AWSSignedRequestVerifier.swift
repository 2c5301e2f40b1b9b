import Crypto
import Foundation

/// What AWS itself would check of the signed `GetCallerIdentity` request an AWS workload hands Google's STS as its
/// subject token (`urn:ietf:params:aws:token-type:aws4_request`), for the simulator's STS:
///
/// - the token is URL-encoded JSON of `url`, `method` and `headers` (`[{"key", "value"}]`);
/// - `POST` to `https://sts[.<region>].amazonaws.com` with `Action=GetCallerIdentity&Version=2011-06-15`;
/// - `host` is the URL's; `x-goog-cloud-target-resource` is the pool provider exchanges must name; `x-amz-date` within
///   15 minutes of now;
/// - `Authorization` is `AWS4-HMAC-SHA256` with a credential scope of the configured access key, the date of
///   `x-amz-date`, the URL's region and `sts`; its signed headers cover `host`, `x-amz-date`,
///   `x-goog-cloud-target-resource` and, for temporary credentials, `x-amz-security-token` (which must be the session's);
/// - the signature is Signature Version 4's over those headers and an empty body, with the configured secret.
///
/// Failures are described as Google's STS relays AWS's answer, without echoing the token.
struct AWSSignedRequestVerifier: Sendable {
    let account: FCMSimulatorConfiguration.AWSAccount
    let audience: String

    /// `nil` when the token is a request this account signed; else why not.
    func problem(with subjectToken: String, now: Double) -> String? {
        guard let json = subjectToken.removingPercentEncoding,
            let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any],
            let urlText = object["url"] as? String, let list = object["headers"] as? [[String: String]]
        else { return "The subject token is not a serialized AWS request." }
        var headers: [String: String] = [:]
        for entry in list {
            guard let key = entry["key"], let value = entry["value"] else { return "The subject token's headers are malformed." }
            headers[key.lowercased()] = value
        }
        guard object["method"] as? String == "POST" else { return "The AWS request must be a POST." }
        guard let url = URLComponents(string: urlText), url.scheme == "https", let host = url.host,
            let region = Self.region(ofHost: host),
            url.queryItems?.contains(URLQueryItem(name: "Action", value: "GetCallerIdentity")) == true,
            url.queryItems?.contains(URLQueryItem(name: "Version", value: "2011-06-15")) == true
        else { return "The AWS request is not a GetCallerIdentity request to AWS STS." }
        guard headers["host"] == host else { return "The AWS request's host header does not match its URL." }
        guard headers["x-goog-cloud-target-resource"] == audience else {
            return "The AWS request's x-goog-cloud-target-resource does not name this workload identity pool provider."
        }
        guard let stamp = headers["x-amz-date"], let signedAt = Self.date(stamp), abs(signedAt - now) <= 900 else {
            return "Received invalid AWS response of type RequestExpired with error message: Request has expired."
        }
        guard let authorization = headers["authorization"], let parts = Self.authorizationParts(authorization) else {
            return "Received invalid AWS response of type IncompleteSignature with error message: Authorization header is malformed."
        }
        let scope = parts.credential.split(separator: "/").map(String.init)
        guard scope.count == 5, scope[0] == account.accessKeyID else {
            return "Received invalid AWS response of type InvalidClientTokenId with error message: The security token included in the request is invalid."
        }
        guard scope[1] == String(stamp.prefix(8)), scope[2] == region, scope[3] == "sts", scope[4] == "aws4_request" else {
            return "Received invalid AWS response of type SignatureDoesNotMatch with error message: Credential should be scoped correctly."
        }
        let signed = parts.signedHeaders.split(separator: ";").map(String.init)
        var required = ["host", "x-amz-date", "x-goog-cloud-target-resource"]
        if let session = account.sessionToken {
            guard headers["x-amz-security-token"] == session else {
                return "Received invalid AWS response of type InvalidClientTokenId with error message: The security token included in the request is invalid."
            }
            required.append("x-amz-security-token")
        }
        guard required.allSatisfy(signed.contains), signed == signed.sorted(), signed.allSatisfy({ headers[$0] != nil }) else {
            return "Received invalid AWS response of type SignatureDoesNotMatch with error message: SignedHeaders is incomplete."
        }
        let expected = signature(url: url, headers: headers, signed: signed, stamp: stamp, region: region)
        guard expected == parts.signature else {
            return "Received invalid AWS response of type SignatureDoesNotMatch with error message: The request signature we calculated does not match the signature you provided."
        }
        return nil
    }

    /// Signature Version 4 of the request as AWS computes it.
    private func signature(url: URLComponents, headers: [String: String], signed: [String], stamp: String, region: String) -> String {
        let query = (url.percentEncodedQuery ?? "").split(separator: "&").map(String.init).sorted().joined(separator: "&")
        var canonical = "POST\n" + (url.path.isEmpty ? "/" : url.path) + "\n" + query + "\n"
        for name in signed { canonical += name + ":" + (headers[name] ?? "").trimmingCharacters(in: .whitespaces) + "\n" }
        canonical += "\n" + signed.joined(separator: ";") + "\n" + Self.hexDigest(Data())
        let day = String(stamp.prefix(8))
        let material = "AWS4-HMAC-SHA256\n\(stamp)\n\(day)/\(region)/sts/aws4_request\n" + Self.hexDigest(Data(canonical.utf8))
        let signingKey = [day, region, "sts", "aws4_request"].reduce(SymmetricKey(data: Data("AWS4\(account.secretAccessKey)".utf8))) {
            SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data($1.utf8), using: $0)))
        }
        return Data(HMAC<SHA256>.authenticationCode(for: Data(material.utf8), using: signingKey)).map { String(format: "%02x", $0) }.joined()
    }

    private static func hexDigest(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    /// `sts.amazonaws.com` is us-east-1; `sts.<region>.amazonaws.com` names its region.
    static func region(ofHost host: String) -> String? {
        if host == "sts.amazonaws.com" { return "us-east-1" }
        let labels = host.split(separator: ".")
        guard labels.count == 4, labels[0] == "sts", labels[2] == "amazonaws", labels[3] == "com" else { return nil }
        return String(labels[1])
    }

    /// `YYYYMMDDTHHMMSSZ` as seconds since 1970.
    static func date(_ stamp: String) -> Double? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.date(from: stamp)?.timeIntervalSince1970
    }

    /// `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`.
    static func authorizationParts(_ value: String) -> (credential: String, signedHeaders: String, signature: String)? {
        guard value.hasPrefix("AWS4-HMAC-SHA256 ") else { return nil }
        var fields: [String: String] = [:]
        for item in value.dropFirst("AWS4-HMAC-SHA256 ".count).split(separator: ",") {
            let pair = item.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { fields[pair[0]] = pair[1] }
        }
        guard let credential = fields["Credential"], let signedHeaders = fields["SignedHeaders"], let signature = fields["Signature"] else {
            return nil
        }
        return (credential, signedHeaders, signature)
    }
}
