import Foundation
import NIOCore

/// Gets access tokens from Google Cloud's metadata server for the service account attached to the workload (GKE
/// Workload Identity, Compute Engine, Cloud Run), so no key file exists anywhere:
/// `GET /computeMetadata/v1/instance/service-accounts/default/token?scopes=…firebase.messaging` with
/// `Metadata-Flavor: Google`, over plain HTTP/1.1 to `GCE_METADATA_HOST` (else `169.254.169.254`), never through a proxy.
///
/// A 404 (no service account attached, or the pod's Kubernetes service account bound to none) or a 403 is refused
/// for good and halts the lane; a 5xx, 429, an unreachable server or a timeout is unavailable and retried by the lane,
/// which keeps a still-valid token meanwhile.
final class FCMMetadataTokenClient: FCMAccessTokenFetching {
    static let path = "/computeMetadata/v1/instance/service-accounts/default/token?scopes=" + FCMAssertion.scope

    private let address: FCMMetadataServerAddress
    private let timeout: TimeAmount
    private let group: any EventLoopGroup

    /// A client of the metadata server at `address`, each exchange bounded by `timeout`.
    init(address: FCMMetadataServerAddress, timeout: TimeAmount, group: any EventLoopGroup) {
        self.address = address
        self.timeout = timeout
        self.group = group
    }

    func fetch() async throws(FCMAuthError) -> FCMAccessToken {
        let source = FCMTokenSource.metadataServer(address.description)
        let answer: PlainHTTPExchange.Answer
        do {
            answer = try await PlainHTTPExchange.send(
                host: address.host, port: address.port, path: Self.path, headers: [("Metadata-Flavor", "Google")],
                timeout: timeout, group: group)
        } catch {
            let hint = address == .standard ? " (is Bugle running on Google Cloud? elsewhere, use service_account_file)" : ""
            throw .unavailable("\(error)\(hint)", from: source)
        }
        switch answer.status {
        case 200:
            let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any]
            guard let value = object?["access_token"] as? String, !value.isEmpty else {
                throw .unavailable("answered 200 without access_token", from: source)
            }
            return FCMAccessToken(value: value, lifetime: .seconds(max(1, FCMTokenRequest.expiresIn(object))))
        case 404:
            throw .rejected(
                "404: no service account is attached to this workload (on GKE, bind the pod's Kubernetes service account "
                    + "to a Google service account with Workload Identity)", from: source)
        case 403:
            throw .rejected("403: the request was refused (a proxy in between, or a missing Metadata-Flavor header)", from: source)
        default:
            if FCMTokenRequest.isTransient(status: answer.status, error: nil) { throw .unavailable("HTTP \(answer.status)", from: source) }
            throw .rejected("HTTP \(answer.status)", from: source)
        }
    }
}
