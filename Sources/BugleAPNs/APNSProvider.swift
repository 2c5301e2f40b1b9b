import BugleCore
import BugleHTTP2
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL

/// The APNs lane: HTTP/2 over TLS with token (JWT) or certificate auth, a pool of connections, and
/// classification of every answer into a ``SendOutcome``.
///
/// Safe to call ``send(_:)`` from many tasks at once: requests are multiplexed over the pool's
/// connections, and no lock is held across an `await`.
///
/// Handled inside `send` (never seen by the runner): one JWT refresh + retry on `ExpiredProviderToken`,
/// and up to ``Options/safeRetryLimit`` immediate retries of requests known not to have been processed
/// (REFUSED_STREAM, above a GOAWAY's last-stream-id, stream not written).
public final class APNSProvider: PushProvider {
    /// Lane options that are not part of the providers file.
    public struct Options: Sendable {
        /// Accept key files that group/others can read (`--allow-readable-keys`).
        public var allowReadableKeys: Bool
        /// Immediate retries of "known not processed" failures inside one `send`.
        public var safeRetryLimit: Int
        /// Event loops for the connections (default: the shared singleton group).
        public var eventLoopGroup: (any EventLoopGroup)?
        /// Where `auth.certificate.passphrase_env`, `proxy_credentials_env` and `https_proxy` / `no_proxy` are looked up.
        public var environment: [String: String]

        /// Creates options.
        /// - Parameters:
        ///   - allowReadableKeys: Accept group/other-readable key files.
        ///   - safeRetryLimit: Immediate safe retries per send.
        ///   - eventLoopGroup: Event loops (nil = `MultiThreadedEventLoopGroup.singleton`).
        ///   - environment: Where a passphrase variable is looked up (default: this process's environment).
        public init(
            allowReadableKeys: Bool = false,
            safeRetryLimit: Int = 3,
            eventLoopGroup: (any EventLoopGroup)? = nil,
            environment: [String: String] = ProcessInfo.processInfo.environment
        ) {
            self.allowReadableKeys = allowReadableKeys
            self.safeRetryLimit = safeRetryLimit
            self.eventLoopGroup = eventLoopGroup
            self.environment = environment
        }
    }

    public var kind: ProviderKind { .apns }

    private let settings: APNsSettings
    private let options: Options
    private let tokenSource: (any APNSBearerTokenSource)?
    private let pool: HTTP2ConnectionPool
    private let authority: String
    private let timeout: TimeAmount
    private let logger: Logger

    /// Creates the lane from the providers file's `apns:` section. Token auth reads the `.p8` key (refusing
    /// group/other-readable files unless allowed) and signs with the system clock.
    /// - Parameters:
    ///   - settings: The `apns:` section.
    ///   - options: Lane options.
    ///   - logger: Logger (never receives tokens, JWTs or keys).
    /// - Throws: ``APNSConfigurationError``.
    public convenience init(settings: APNsSettings, options: Options = Options(), logger: Logger) throws(APNSConfigurationError) {
        var tokenSource: (any APNSBearerTokenSource)?
        if case .token(let teamID, let keyID, let keyFile) = settings.auth {
            try Self.checkIdentifier(teamID, field: "team_id")
            try Self.checkIdentifier(keyID, field: "key_id")
            let key = try APNSKeyFile.loadP8(keyFile, allowReadableKeys: options.allowReadableKeys)
            tokenSource = APNSAuthenticationTokenSigner(
                privateKey: key,
                keyID: keyID,
                teamID: teamID,
                clock: ContinuousClock()
            )
        }
        try self.init(settings: settings, tokenSource: tokenSource, options: options, logger: logger)
    }

    /// Creates the lane with an explicit token source (tests inject a signer driven by a manual clock).
    /// - Parameters:
    ///   - settings: The `apns:` section (for certificate auth the client certificate is loaded from it).
    ///   - tokenSource: JWT source for token auth; nil for certificate auth.
    ///   - options: Lane options.
    ///   - logger: Logger.
    /// - Throws: ``APNSConfigurationError``.
    public init(
        settings: APNsSettings,
        tokenSource: (any APNSBearerTokenSource)?,
        options: Options = Options(),
        logger: Logger
    ) throws(APNSConfigurationError) {
        self.settings = settings
        self.options = options
        self.tokenSource = tokenSource
        self.logger = logger
        self.authority = settings.endpoint.authority
        self.timeout = .nanoseconds(Int64(max(0.001, settings.timeoutSeconds) * 1e9))

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        tls.certificateVerification = .fullVerification
        if let caFile = settings.caFile {
            let pem = try APNSKeyFile.readText(caFile)
            guard let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)), !certificates.isEmpty else {
                throw .invalidCertificate(path: caFile)
            }
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        if case .certificate(let certFile, let keyFile, let passphraseEnv) = settings.auth {
            // TLS 1.2 with a client certificate: in TLS 1.3 the client's handshake completes before the server has
            // judged the certificate, so a refused certificate would surface only as a close after requests were
            // written (ambiguous). In TLS 1.2 the server's verdict comes within the handshake: a refusal is a
            // handshake failure naming the certificate, and the lane halts with nothing sent.
            tls.maximumTLSVersion = .tlsv12
            let identity = try APNSClientIdentity.load(
                certFile: certFile, keyFile: keyFile, passphraseEnv: passphraseEnv,
                environment: options.environment, allowReadableKeys: options.allowReadableKeys
            )
            if let warning = identity.validity.warning(path: certFile) { logger.warning("\(warning)") }
            tls.certificateChain = identity.chain.map { .certificate($0) }
            tls.privateKey = .privateKey(identity.key)
        }
        var configuration = HTTP2ConnectionPool.Configuration(
            host: settings.endpoint.host, port: settings.endpoint.port, connections: max(1, settings.connections), tls: tls, serviceName: "APNs")
        configuration.waitForPings(asLongAsRequests: timeout)
        do throws(ProxyConfigurationError) {
            configuration.proxy = try HTTPProxy.resolve(settings.proxy, caFile: settings.proxyCAFile, host: settings.endpoint.host, environment: options.environment)
        } catch {
            throw .proxy(error)
        }
        if let proxy = configuration.proxy { logger.info("APNs connections go through the proxy \(proxy)") }
        do {
            self.pool = try HTTP2ConnectionPool(
                configuration: configuration, group: options.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton, logger: logger)
        } catch let error as ProxyConfigurationError {
            throw .proxy(error)
        } catch {
            if case .certificate(let certFile, let keyFile, _) = settings.auth {
                // Both loaded on their own: what TLS refuses is the pair (a key that is not the certificate's).
                let pair = keyFile.map { "the client certificate \(certFile) with the key \($0)" } ?? "the client certificate bundle \(certFile)"
                throw .unsupported("TLS refused \(pair) (\(error)); is the key the certificate's own?")
            }
            throw .unsupported("TLS configuration rejected: \(error)")
        }
    }

    /// Sends one notification and classifies the answer. Never throws; see the type's documentation for
    /// what is retried internally.
    /// - Parameter request: The rendered notification.
    public func send(_ request: PushRequest) async -> SendOutcome {
        await send(request, rejectedBearer: nil)
    }

    /// Starts one notification on a free stream without suspending. An answer that needs more than classifying (a
    /// safe retry, a JWT refresh after `ExpiredProviderToken`) continues in a task through the path ``send(_:)`` takes.
    public func startSend(_ request: PushRequest, completion: @escaping @Sendable (SendOutcome) -> Void) -> Bool {
        guard let apns = request.apns, let connection = pool.leaseNow() else { return false }
        let bearer = tokenSource?.currentToken()
        let headers = APNSRequestHeaders.make(
            deviceToken: request.token, headers: apns, topic: settings.topic, authority: authority, bearerToken: bearer
        )
        pool.start(on: connection, headers: headers, body: ByteBuffer(bytes: request.body), deadline: NIODeadline.now() + timeout) { [self] response in
            switch verdict(response, apns: apns, refreshable: bearer != nil) {
            case .outcome(let outcome): completion(outcome)
            case .expiredToken: Task { completion(await send(request, rejectedBearer: bearer)) }
            }
        } unanswered: { [self] error in
            // A GOAWAY naming a configuration error halts; known not processed (nil): sent again from the start, with
            // its own retries and deadline.
            if let outcome = Self.goAwayHalt(error) ?? HTTP2TransportError.outcomeWithoutRetry(of: error) {
                completion(outcome)
            } else {
                Task { completion(await send(request, rejectedBearer: nil)) }
            }
        }
        return true
    }

    /// ``send(_:)``, after APNs refused `rejectedBearer` as expired when that is set (a new token is asked for first).
    private func send(_ request: PushRequest, rejectedBearer: String?) async -> SendOutcome {
        guard let apns = request.apns else {
            return .rejected(code: "missing_apns_headers")
        }
        let deadline = NIODeadline.now() + timeout
        var bearer = tokenSource?.currentToken()
        var expired = rejectedBearer
        var refreshedAfterExpiry = false
        var safeRetries = 0
        let body = ByteBuffer(bytes: request.body)
        while true {
            if let rejected = expired {
                // One new JWT per send (the 20-minute rule is the signer's).
                expired = nil
                refreshedAfterExpiry = true
                guard let fresh = await tokenSource?.tokenAfterExpiry(rejected: rejected) else {
                    return .retry(.provider, code: "ExpiredProviderToken", after: .seconds(60))
                }
                bearer = fresh
            }
            let headers = APNSRequestHeaders.make(
                deviceToken: request.token,
                headers: apns,
                topic: settings.topic,
                authority: authority,
                bearerToken: bearer
            )
            let response: HTTP2Response
            do {
                // A request that waited for a stream is not written once its worker's lease gate closed meanwhile.
                guard let answer = try await pool.execute(headers: headers, body: body, deadline: deadline, stillWanted: { request.gateIsOpen }) else {
                    return .withdrawn
                }
                response = answer
            } catch let error as HTTP2TransportError {
                if let halt = Self.goAwayHalt(error) { return halt }
                if error.isSafeToRetry && safeRetries < options.safeRetryLimit && NIODeadline.now() < deadline {
                    safeRetries += 1
                    continue
                }
                return error.outcome
            } catch {
                return .ambiguous(code: "transport_error")
            }

            switch verdict(response, apns: apns, refreshable: bearer != nil && !refreshedAfterExpiry) {
            case .outcome(let outcome):
                return outcome
            case .expiredToken:
                expired = bearer
            }
        }
    }

    /// The halt a GOAWAY naming a configuration error means for the request it turned away (nil for any other error).
    private static func goAwayHalt(_ error: any Error) -> SendOutcome? {
        guard case .goingAway(_, let debugData, _) = error as? HTTP2TransportError else { return nil }
        return APNSErrorClassifier.classifyGoAway(debugData: debugData)
    }

    /// What an answer means: an outcome, or an expired JWT to replace and send again.
    private enum Verdict {
        case outcome(SendOutcome)
        case expiredToken
    }

    /// Classifies one answer.
    /// - Parameters:
    ///   - response: APNs' answer.
    ///   - apns: The request's headers (its `apns-id` when the answer names none).
    ///   - refreshable: Whether an `ExpiredProviderToken` may still be met with a new token.
    private func verdict(_ response: HTTP2Response, apns: APNsHeaders, refreshable: Bool) -> Verdict {
        let apnsID = response.headers.first(name: "apns-id")
        if response.status == 200 {
            // The development environment also answers `apns-unique-id`, the id Apple's Push Notifications Console
            // looks a push up by: that is the one worth keeping (the `apns-id` is derived from the run and device).
            return .outcome(.delivered(providerMessageID: response.headers.first(name: "apns-unique-id") ?? apnsID ?? apns.apnsID))
        }
        let errorBody = Self.decodeErrorBody(response.body)
        let reason = errorBody.reason.map(APNSError.Reason.init(rawValue:))
        if reason == .expiredProviderToken, tokenSource != nil, refreshable {
            return .expiredToken
        }
        return .outcome(APNSErrorClassifier.classify(
            status: response.status,
            reason: reason,
            timestamp: errorBody.timestamp,
            retryAfter: response.retryAfterSeconds.map { .seconds($0) },
            apnsID: apnsID
        ))
    }

    /// Opens the connections before the first notification.
    public func prepare() async {
        await pool.warmUp(deadline: .now() + timeout)
    }

    /// Closes all connections.
    public func shutdown() async {
        await pool.shutdown()
    }

    private struct ErrorBody: Decodable {
        var reason: String?
        var timestamp: Int64?
    }

    private static func decodeErrorBody(_ buffer: ByteBuffer?) -> ErrorBody {
        guard let buffer, buffer.readableBytes > 0,
            let decoded = try? JSONDecoder().decode(ErrorBody.self, from: Data(buffer.readableBytesView))
        else {
            return ErrorBody(reason: nil, timestamp: nil)
        }
        return decoded
    }

    private static func checkIdentifier(_ value: String, field: String) throws(APNSConfigurationError) {
        guard value.utf8.count == 10, value.unicodeScalars.allSatisfy({ $0.properties.isAlphabetic || ("0"..."9").contains($0) })
        else {
            throw .invalidIdentifier(field: field)
        }
    }
}
