import Foundation
import NIOCore
import Synchronization

/// Gets access tokens from Google Cloud's metadata server for the service account attached to the workload (GKE
/// Workload Identity, Compute Engine, Cloud Run), so no key file exists anywhere:
/// `GET /computeMetadata/v1/instance/service-accounts/default/token?scopes=…firebase.messaging` with
/// `Metadata-Flavor: Google`, over plain HTTP/1.1 to `GCE_METADATA_HOST` (else `169.254.169.254`), never through a proxy.
///
/// A 404 (no service account attached, or the pod's Kubernetes service account bound to none) or a 403 is refused
/// for good and halts the lane; a 5xx, 429, an unreachable server or a timeout is unavailable and retried by the lane,
/// which keeps a still-valid token meanwhile. But a server that has never answered at all, for ``noServerGrace`` since
/// the first attempt, is taken for none: Bugle is not on Google Cloud (or `GCE_METADATA_HOST` is wrong), and the lane
/// halts with that, rather than waiting for the provider-outage breaker's ten minutes. A metadata server still
/// starting (GKE's, for a pod's first seconds) answers well within it.
final class FCMMetadataTokenClient: FCMAccessTokenFetching {
    static let path = "/computeMetadata/v1/instance/service-accounts/default/token?scopes=" + FCMAssertion.scope
    /// How long a metadata server that has never answered is waited for.
    static let noServerGrace = Duration.seconds(60)

    private let address: FCMMetadataServerAddress
    private let timeout: TimeAmount
    private let group: any EventLoopGroup
    private let grace: Duration
    /// Whether the server has ever answered, and when the first exchange without an answer began.
    private let contact = Mutex<(answered: Bool, firstSilence: ContinuousClock.Instant?)>((false, nil))

    /// A client of the metadata server at `address`, each exchange bounded by `timeout`; a server silent for `grace`
    /// since the first attempt, having never answered, is refused (see the type's documentation).
    init(
        address: FCMMetadataServerAddress, timeout: TimeAmount, group: any EventLoopGroup, grace: Duration = noServerGrace
    ) {
        self.address = address
        self.timeout = timeout
        self.group = group
        self.grace = grace
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
            let now = ContinuousClock.now
            let silentFor = contact.withLock { contact -> Duration? in
                guard !contact.answered else { return nil }
                let first = contact.firstSilence ?? now
                contact.firstSilence = first
                return now - first
            }
            if let silentFor, silentFor >= grace {
                throw .rejected(
                    "no metadata server has answered in \(silentFor.components.seconds) s of trying (\(error))\(hint)", from: source)
            }
            throw .unavailable("\(error)\(hint)", from: source)
        }
        contact.withLock { $0.answered = true }
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
