import Foundation
import NIOCore
import NIOHTTP1

/// Builds the subject token of an AWS `credential_source` (``FCMAWSCredentialSource``): a `GetCallerIdentity` request
/// to the region's AWS STS, signed with the workload's AWS credentials and naming the workload identity pool provider
/// in `x-goog-cloud-target-resource`, serialized as Google's STS expects (URL-encoded JSON of its URL, method and
/// headers). Bugle never sends the request to AWS: Google's STS does, to learn who signed it.
///
/// The region and credentials are read at each exchange (instance credentials rotate). Instance metadata answering
/// 401, 403 or 404 is a refusal (no role attached, IMDSv2 required); an unreachable service, a timeout, 429 or a 5xx is
/// retried. No secret, session token or signature appears in an error.
struct FCMAWSSubjectToken: Sendable {
    /// How long an IMDSv2 session token asked for lives (it is used for one exchange).
    static let sessionTokenSeconds = 300

    let source: FCMAWSCredentialSource
    /// The workload identity pool provider (the configuration's `audience`).
    let audience: String
    /// Where `AWS_REGION`, `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`
    /// are read.
    let environment: [String: String]
    let timeout: TimeAmount
    let group: any EventLoopGroup
    /// The signing time.
    var now: @Sendable () -> Date = { Date() }

    /// The serialized, signed `GetCallerIdentity` request.
    func make() async throws(FCMAuthError) -> String {
        var metadata = InstanceMetadata(source: source, timeout: timeout, group: group)
        let region = try await self.region(&metadata)
        let credentials = try await self.credentials(&metadata)
        let text = source.verificationURL.replacingOccurrences(of: "{region}", with: region)
        guard let url = URL(string: text) else {
            throw .rejected("regional_cred_verification_url is not a URL for region \(region)", from: .federation)
        }
        let signer = AWSRequestSigner(credentials: credentials, region: region, service: "sts")
        let signed = signer.sign(method: "POST", url: url, headers: ["x-goog-cloud-target-resource": audience], date: now())
        return Self.serialize(url: text, headers: signed.headers)
    }

    /// `{"headers": [{"key", "value"}…], "method": "POST", "url"}`, keys and headers sorted, URL-encoded.
    static func serialize(url: String, headers: [String: String]) -> String {
        let list = headers.sorted { $0.key < $1.key }.map { ["key": $0.key, "value": $0.value] }
        let object: [String: Any] = ["headers": list, "method": "POST", "url": url]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return FCMExternalAccountClient.formEncoded(String(decoding: data, as: UTF8.self))
    }

    private func region(_ metadata: inout InstanceMetadata) async throws(FCMAuthError) -> String {
        for variable in ["AWS_REGION", "AWS_DEFAULT_REGION"] {
            if let region = environment[variable], !region.isEmpty { return region }
        }
        guard let url = source.regionURL else {
            throw .rejected("no AWS region: AWS_REGION is not set and credential_source has no region_url", from: .federation)
        }
        let zone = String(decoding: try await metadata.get(url, what: "region_url"), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard zone.count > 1, zone.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
            throw .rejected("region_url did not answer an availability zone", from: .federation)
        }
        return String(zone.dropLast())
    }

    private func credentials(_ metadata: inout InstanceMetadata) async throws(FCMAuthError) -> AWSRequestSigner.Credentials {
        if let key = environment["AWS_ACCESS_KEY_ID"], !key.isEmpty, let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty {
            let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return AWSRequestSigner.Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token)
        }
        guard let url = source.credentialsURL else {
            throw .rejected(
                "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set and credential_source has no url",
                from: .federation)
        }
        let role = String(decoding: try await metadata.get(url, what: "url"), as: UTF8.self)
            .split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        guard !role.isEmpty, role.allSatisfy({ $0.isLetter || $0.isNumber || "+=,.@_-".contains($0) }) else {
            throw .rejected("the instance metadata named no usable IAM role (credential_source.url)", from: .federation)
        }
        var roleURL = url
        roleURL.path = (url.path.hasSuffix("/") ? url.path : url.path + "/") + role
        let body = try await metadata.get(roleURL, what: "url (role \(role))")
        let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        guard let key = object?["AccessKeyId"] as? String, !key.isEmpty, let secret = object?["SecretAccessKey"] as? String, !secret.isEmpty
        else {
            throw .rejected("the instance metadata's credentials for role \(role) lack AccessKeyId or SecretAccessKey", from: .federation)
        }
        return AWSRequestSigner.Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: object?["Token"] as? String)
    }
}

/// EC2's instance metadata service for one exchange: plain HTTP, with an IMDSv2 session token asked for once when the
/// source names where.
private struct InstanceMetadata {
    let source: FCMAWSCredentialSource
    let timeout: TimeAmount
    let group: any EventLoopGroup
    private var sessionToken: String?

    init(source: FCMAWSCredentialSource, timeout: TimeAmount, group: any EventLoopGroup) {
        self.source = source
        self.timeout = timeout
        self.group = group
    }

    /// The body of `GET url`, or the reason there is none.
    mutating func get(_ url: FCMAWSCredentialSource.MetadataURL, what: String) async throws(FCMAuthError) -> [UInt8] {
        var headers: [(String, String)] = []
        if let tokenURL = source.sessionTokenURL {
            if sessionToken == nil {
                let answer = try await exchange(
                    .PUT, tokenURL, headers: [("X-aws-ec2-metadata-token-ttl-seconds", String(FCMAWSSubjectToken.sessionTokenSeconds))],
                    what: "imdsv2_session_token_url")
                sessionToken = String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            headers.append(("X-aws-ec2-metadata-token", sessionToken ?? ""))
        }
        return try await exchange(.GET, url, headers: headers, what: what)
    }

    private func exchange(
        _ method: HTTPMethod, _ url: FCMAWSCredentialSource.MetadataURL, headers: [(String, String)], what: String
    ) async throws(FCMAuthError) -> [UInt8] {
        let place = "the instance metadata service at \(url.host):\(url.port) (credential_source.\(what))"
        let answer: PlainHTTPExchange.Answer
        do {
            answer = try await PlainHTTPExchange.send(
                method, host: url.host, port: url.port, path: url.path, headers: headers, timeout: timeout, group: group)
        } catch {
            throw .unavailable("\(place): \(error)", from: .federation)
        }
        switch answer.status {
        case 200:
            return answer.body
        case 401 where source.sessionTokenURL == nil:
            throw .rejected(
                "\(place) answered HTTP 401: the instance requires IMDSv2; add imdsv2_session_token_url to credential_source",
                from: .federation)
        case 404 where what.hasPrefix("url"):
            throw .rejected("\(place) answered HTTP 404: no IAM role is attached to the instance", from: .federation)
        case 429, 500...:
            throw .unavailable("\(place) answered HTTP \(answer.status)", from: .federation)
        default:
            throw .rejected("\(place) answered HTTP \(answer.status)", from: .federation)
        }
    }
}
