import Crypto
import Foundation

/// AWS Signature Version 4 for one request without a body, as workload identity federation needs it: Google's STS
/// receives a signed `GetCallerIdentity` request (never sent to AWS by Bugle) and has AWS check it.
///
/// The canonical request is the method, the path (`/` when empty), the query with its parameters sorted and
/// RFC 3986-encoded, every header lowercased and sorted with its value trimmed, the signed header names, and the
/// SHA-256 of the empty body. The signing key is derived from the secret through the date, region, service and
/// `aws4_request`. Neither the secret nor the session token appears in a description or error.
struct AWSRequestSigner: Sendable {
    /// An access key, its secret, and the session token of temporary credentials.
    struct Credentials: Sendable {
        var accessKeyID: String
        var secretAccessKey: String
        var sessionToken: String?
    }

    /// A signed request: the headers to send (those given, plus `host`, `x-amz-date`, `x-amz-security-token` and
    /// `Authorization`).
    struct Signed: Sendable, Equatable {
        var headers: [String: String]
    }

    var credentials: Credentials
    var region: String
    var service: String

    /// Signs `method url` with `headers` at `date`.
    /// - Parameters:
    ///   - url: An absolute URL; its host (with a non-default port) is the `host` header.
    ///   - headers: Further headers to sign (names in any case).
    /// - Returns: Every header of the signed request, `Authorization` included.
    func sign(method: String, url: URL, headers: [String: String], date: Date) -> Signed {
        let stamp = Self.timestamp(date)
        let day = String(stamp.prefix(8))
        var all: [String: String] = [:]
        for (name, value) in headers { all[name.lowercased()] = value }
        let host = url.host ?? ""
        all["host"] = url.port.map { "\(host):\($0)" } ?? host
        all["x-amz-date"] = stamp
        if let token = credentials.sessionToken { all["x-amz-security-token"] = token }

        let names = all.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(Self.trimmed(all[$0] ?? ""))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let canonical = [
            method, url.path.isEmpty ? "/" : url.path, Self.canonicalQuery(url.query ?? ""), canonicalHeaders, signedHeaders,
            Self.hex(SHA256.hash(data: Data())),
        ].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let toSign = ["AWS4-HMAC-SHA256", stamp, scope, Self.hex(SHA256.hash(data: Data(canonical.utf8)))].joined(separator: "\n")

        var key = SymmetricKey(data: Data(("AWS4" + credentials.secretAccessKey).utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        let signature = Self.hex(HMAC<SHA256>.authenticationCode(for: Data(toSign.utf8), using: key))
        var signed = headers
        signed["host"] = all["host"]
        signed["x-amz-date"] = stamp
        if let token = credentials.sessionToken { signed["x-amz-security-token"] = token }
        signed["Authorization"] =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signed(headers: signed)
    }

    /// `YYYYMMDD'T'HHMMSS'Z'` in UTC.
    static func timestamp(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let day = String(format: "%04d%02d%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
        let time = String(format: "%02d%02d%02d", parts.hour ?? 0, parts.minute ?? 0, parts.second ?? 0)
        return day + "T" + time + "Z"
    }

    /// The query's `name=value` pairs sorted by name (then value), each part RFC 3986-encoded once.
    static func canonicalQuery(_ query: String) -> String {
        func encoded(_ text: Substring) -> String {
            FCMExternalAccountClient.formEncoded(String(text).removingPercentEncoding ?? String(text))
        }
        var pairs: [(name: String, value: String)] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            pairs.append((encoded(parts[0]), parts.count > 1 ? encoded(parts[1]) : ""))
        }
        pairs.sort { left, right in left.name == right.name ? left.value < right.value : left.name < right.name }
        return pairs.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
    }

    /// A header value trimmed, its inner runs of spaces made one.
    private static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }

    private static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        digest.map { String(format: "%02x", $0) }.joined()
    }
}
