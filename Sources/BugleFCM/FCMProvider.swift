import BugleCore
import BugleHTTP2
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Synchronization

/// The FCM lane: HTTP v1 `messages:send` over multiplexed HTTP/2 connections with an OAuth2 access token
/// from a service account, and classification of every answer into a ``SendOutcome``.
///
/// Handled inside ``send(_:)`` (never seen by the runner):
/// - one token refresh and retry after a 401 without an `FcmError` detail (and up to three retries when the refused
///   token had already run out or been replaced while the request waited);
/// - immediate retries of requests known not to have been processed (REFUSED_STREAM, GOAWAY, unwritten);
/// - the payload breaker: `threshold` payload-level `INVALID_ARGUMENT`s in a row, with no delivery between
///   them, halt the run (every recipient shares the message, so it would fail for all of them).
public final class FCMProvider: PushProvider {
    /// Retries of one message after 401s for tokens that had run out or been replaced while it waited.
    static let staleTokenRetryLimit = 3

    /// Lane options that are not part of the providers file.
    public struct Options: Sendable {
        /// Accept a service-account file that group/others can read (`--allow-readable-keys`).
        public var allowReadableKeys: Bool
        /// Immediate retries of "known not processed" failures inside one send.
        public var safeRetryLimit: Int
        /// Payload-level `INVALID_ARGUMENT`s in a row that halt the run.
        public var invalidPayloadHaltThreshold: Int
        /// Event loops (nil = the shared singleton group).
        public var eventLoopGroup: (any EventLoopGroup)?
        /// Where `proxy_credentials_env` and `https_proxy` / `no_proxy` are looked up.
        public var environment: [String: String]

        /// Creates options.
        public init(
            allowReadableKeys: Bool = false,
            safeRetryLimit: Int = 3,
            invalidPayloadHaltThreshold: Int = 10,
            eventLoopGroup: (any EventLoopGroup)? = nil,
            environment: [String: String] = ProcessInfo.processInfo.environment
        ) {
            self.allowReadableKeys = allowReadableKeys
            self.safeRetryLimit = safeRetryLimit
            self.invalidPayloadHaltThreshold = invalidPayloadHaltThreshold
            self.eventLoopGroup = eventLoopGroup
            self.environment = environment
        }
    }


    public var kind: ProviderKind { .fcm }

    /// The variable naming the credentials file when the `fcm:` section names none, as Google's client libraries read it.
    public static let credentialsVariable = "GOOGLE_APPLICATION_CREDENTIALS"

    /// The project messages are sent for.
    public let projectID: String
    private let options: Options
    private let tokens: FCMAccessTokenCache<ContinuousClock>
    private let pool: HTTP2ConnectionPool
    /// The connections to credentials endpoints (none with the metadata server).
    private let tokenPools: [HTTP2ConnectionPool]
    private let authority: String
    private let path: String
    private let timeout: TimeAmount
    /// Payload-level `INVALID_ARGUMENT`s since the last delivery.
    private let invalidPayloadsInARow = Mutex(0)
    private let logger: Logger
    /// The last "access token unavailable" warning: its reason, when it was logged, and how many sends met the same
    /// reason since (logged at debug). One warning per send was about 65 a second while the token endpoint was down.
    private let tokenWarning = Mutex<(reason: String, at: ContinuousClock.Instant?, since: Int)>(("", nil, 0))

    /// Where the lane's access tokens come from.
    private enum TokenSource {
        /// The account's `token_uri`, or `fetcher` when given (tests).
        case serviceAccount(FCMServiceAccount, fetcher: (any FCMAccessTokenFetching)?)
        /// Google Cloud's metadata server.
        case metadataServer(FCMMetadataServerAddress)
        /// Workload identity federation (an AWS source reads its region and credentials from the environment first).
        case externalAccount(FCMExternalAccount, environment: [String: String])
    }

    /// Creates the lane from the providers file's `fcm:` section: with `credentials: service_account` (the default)
    /// reads the service account (`service_account_file`, else `GOOGLE_APPLICATION_CREDENTIALS`); with
    /// `credentials: metadata_server` asks Google Cloud's metadata server (`GCE_METADATA_HOST`, else
    /// `169.254.169.254`) for the attached service account's tokens and sends for `project_id`.
    /// - Parameters:
    ///   - settings: The `fcm:` section.
    ///   - environment: Process environment (for `GOOGLE_APPLICATION_CREDENTIALS` and `GCE_METADATA_HOST`).
    ///   - options: Lane options.
    ///   - logger: Logger (never receives tokens, assertions or keys).
    /// - Throws: ``FCMConfigurationError``.
    public convenience init(
        settings: FCMSettings,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        options: Options = Options(),
        logger: Logger
    ) throws(FCMConfigurationError) {
        switch settings.credentials {
        case .serviceAccount:
            let path: String
            let variable: String?
            if let file = settings.serviceAccountFile {
                (path, variable) = (file, nil)
            } else if let value = environment[Self.credentialsVariable], !value.isEmpty {
                // Judged as the providers file's service_account_file is: a secret pasted here would be printed
                // whole as a path that cannot be read.
                if let secret = PastedSecret.judge(value) { throw .pastedInEnvironment(variable: Self.credentialsVariable, secret) }
                (path, variable) = (value, Self.credentialsVariable)
            } else {
                throw .noServiceAccount
            }
            let credentials: (projectID: String, source: TokenSource)
            do {
                credentials = try Self.credentials(at: path, settings: settings, environment: environment, options: options)
            } catch {
                // A file the variable names: said with the variable, since the providers file names none.
                throw variable.map { .fromEnvironment(variable: $0, path: path, error) } ?? error
            }
            try self.init(settings: settings, projectID: credentials.projectID, tokenSource: credentials.source, options: options, logger: logger)
        case .metadataServer:
            guard let projectID = settings.projectID else { throw .unsupported("credentials: metadata_server needs project_id") }
            let address = try FCMMetadataServerAddress.from(environment: environment)
            try self.init(settings: settings, projectID: projectID, tokenSource: .metadataServer(address), options: options, logger: logger)
        }
    }

    /// The project and token source of the credentials file at `path`: a service account, or an `external_account`.
    /// - Throws: ``FCMConfigurationError`` naming the file.
    private static func credentials(
        at path: String, settings: FCMSettings, environment: [String: String], options: Options
    ) throws(FCMConfigurationError) -> (projectID: String, source: TokenSource) {
        switch try FCMCredentialFile.load(path: path, allowReadableKeys: options.allowReadableKeys) {
        case .serviceAccount(let account):
            return (settings.projectID ?? account.projectID, .serviceAccount(account, fetcher: nil))
        case .externalAccount(let account):
            if case .executable = account.source, environment[FCMExecutableSource.allowVariable] != "1" {
                throw .unsupported(
                    "\(path) has an executable credential_source, which runs a program: set \(FCMExecutableSource.allowVariable)=1 to allow it")
            }
            guard let projectID = settings.projectID else {
                throw .unsupported("\(path) is an external_account (workload identity federation), which names no project: set project_id in the fcm: section")
            }
            return (projectID, .externalAccount(account, environment: environment))
        }
    }

    /// Creates the lane with an explicit account and, optionally, a token source (tests).
    /// - Parameters:
    ///   - settings: The `fcm:` section (endpoint, CA, connections, timeout, `project_id`).
    ///   - account: The service account.
    ///   - tokenFetcher: Token source; nil = the account's token endpoint.
    ///   - options: Lane options.
    ///   - logger: Logger.
    /// - Throws: ``FCMConfigurationError``.
    public convenience init(
        settings: FCMSettings,
        account: FCMServiceAccount,
        tokenFetcher: (any FCMAccessTokenFetching)?,
        options: Options = Options(),
        logger: Logger
    ) throws(FCMConfigurationError) {
        try self.init(
            settings: settings, projectID: settings.projectID ?? account.projectID,
            tokenSource: .serviceAccount(account, fetcher: tokenFetcher), options: options, logger: logger)
    }

    private init(
        settings: FCMSettings,
        projectID: String,
        tokenSource: TokenSource,
        options: Options,
        logger: Logger
    ) throws(FCMConfigurationError) {
        self.projectID = projectID
        self.options = options
        self.logger = logger
        self.authority = settings.endpoint.authority
        self.path = "/v1/projects/\(projectID)/messages:send"
        let timeout = TimeAmount.nanoseconds(Int64(max(0.001, settings.timeoutSeconds) * 1e9))
        self.timeout = timeout

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        tls.certificateVerification = .fullVerification
        if let caFile = settings.caFile {
            switch TrustedCertificates.load(caFile) {
            case .success(let certificates): tls.additionalTrustRoots = [.certificates(certificates)]
            case .failure(.unreadable): throw .unreadableFile(path: caFile)
            case .failure(.noCertificate): throw .invalidCertificate(path: caFile)
            }
        }
        let group = options.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        /// A pool to `host:port`, through the section's proxy (FCM's own, and each credentials endpoint's).
        func makePool(host: String, port: Int, connections: Int = 1, _ serviceName: String) throws(FCMConfigurationError) -> HTTP2ConnectionPool {
            var configuration = HTTP2ConnectionPool.Configuration(host: host, port: port, connections: connections, tls: tls, serviceName: serviceName)
            configuration.waitForPings(asLongAsRequests: timeout)
            configuration.proxy = try Self.proxy(settings: settings, host: host, environment: options.environment)
            if let proxy = configuration.proxy { logger.info("\(serviceName) connections go through the proxy \(proxy)") }
            do {
                return try HTTP2ConnectionPool(configuration: configuration, group: group, logger: logger)
            } catch let error as ProxyConfigurationError {
                throw .proxy(error)
            } catch {
                throw .unsupported("TLS configuration rejected: \(error)")
            }
        }
        /// The pool to a credentials endpoint (the service account's `token_uri`, STS, IAM credentials).
        func makePool(_ url: URL, _ serviceName: String) throws(FCMConfigurationError) -> HTTP2ConnectionPool {
            try makePool(host: url.host ?? "", port: url.port ?? 443, serviceName)
        }
        self.pool = try makePool(host: settings.endpoint.host, port: settings.endpoint.port, connections: max(1, settings.connections), "FCM")
        let fetcher: any FCMAccessTokenFetching
        switch tokenSource {
        case .serviceAccount(let account, let given):
            let pool = try makePool(account.tokenURI, "OAuth2 token endpoint")
            self.tokenPools = [pool]
            fetcher = given ?? FCMTokenEndpointClient(account: account, pool: pool, timeout: timeout, epochSeconds: { Int64(Date().timeIntervalSince1970) })
        case .metadataServer(let address):
            // Link-local and plain HTTP: never through the section's proxy (the server refuses proxied requests).
            self.tokenPools = []
            fetcher = FCMMetadataTokenClient(address: address, timeout: timeout, group: group)
            logger.info("FCM access tokens come from the metadata server at \(address)")
        case .externalAccount(let account, let environment):
            let sts = try makePool(account.tokenURL, "STS")
            var iam: FCMTokenRequest?
            if let url = account.impersonationURL {
                let pool = try makePool(url, "IAM credentials")
                iam = FCMTokenRequest(url: url, pool: pool, source: .federation)
            }
            self.tokenPools = [sts] + (iam.map { [$0.pool] } ?? [])
            // An https:// subject-token URL: HTTP/1.1 over TLS, trusting the system's CAs and the section's ca_file,
            // through the section's proxy (no_proxy applies) like the other endpoints. A plain http:// one is a
            // link-local metadata service: always direct.
            var urlTLS: NIOSSLContext?
            var urlTunnel: ProxyTunnel?
            if case .url(let host, _, _, _, true) = account.source {
                var http1 = tls
                http1.applicationProtocols = ["http/1.1"]
                do {
                    urlTLS = try NIOSSLContext(configuration: http1)
                } catch {
                    throw .unsupported("TLS configuration rejected: \(error)")
                }
                urlTunnel = try Self.tunnel(settings: settings, host: host, environment: options.environment)
                if let urlTunnel { logger.info("the subject token URL goes through the proxy \(urlTunnel.proxy)") }
            }
            fetcher = FCMExternalAccountClient(
                account: account, sts: FCMTokenRequest(url: account.tokenURL, pool: sts, source: .federation), iam: iam, timeout: timeout, group: group,
                environment: environment, urlTLS: urlTLS, urlTunnel: urlTunnel)
            logger.info("FCM access tokens come from workload identity federation", metadata: ["impersonating": "\(account.impersonationURL != nil)"])
        }
        self.tokens = FCMAccessTokenCache(fetcher: fetcher, clock: ContinuousClock())
    }

    /// Sends one message and classifies the answer. Never throws.
    /// - Parameter request: The rendered message (`{"message": …}` with the token inside).
    public func send(_ request: PushRequest) async -> SendOutcome {
        await send(request, refused: nil)
    }

    /// Starts one message on a free stream with the cached access token, without suspending. An answer that needs
    /// more than classifying (a safe retry, a 401) continues in a task through the path ``send(_:)`` takes.
    public func startSend(_ request: PushRequest, completion: @escaping @Sendable (SendOutcome) -> Void) -> Bool {
        guard let bearer = tokens.freshToken(), let connection = pool.leaseNow() else { return false }
        let headers = headerBlock(bearer: bearer)
        pool.start(on: connection, headers: headers, body: ByteBuffer(bytes: request.body), deadline: NIODeadline.now() + timeout) { [self] response in
            switch verdict(response) {
            case .outcome(let outcome): completion(outcome)
            case .unauthorized: Task { completion(await send(request, refused: bearer)) }
            }
        } unanswered: { [self] error in
            // Known not processed (nil): sent again from the start, with its own retries and deadline.
            if let outcome = HTTP2TransportError.outcomeWithoutRetry(of: error) {
                completion(outcome)
            } else {
                Task { completion(await send(request, refused: nil)) }
            }
        }
        return true
    }

    /// Logs an unavailable access token as a warning when its reason changed or a minute passed since the last one
    /// (with how many sends met it meanwhile), else at debug.
    private func warnTokenUnavailable(_ reason: String) {
        let now = ContinuousClock.now
        let repeated = tokenWarning.withLock { last -> Int? in
            if reason == last.reason, let at = last.at, now - at < .seconds(60) {
                last.since += 1
                return nil
            }
            defer { last = (reason, now, 0) }
            return last.reason == reason ? last.since : 0
        }
        if let repeated {
            logger.warning("FCM access token unavailable", metadata: ["error": "\(reason)", "sends_since_last_warning": "\(repeated)"])
        } else {
            logger.debug("FCM access token unavailable", metadata: ["error": "\(reason)"])
        }
    }

    /// ``send(_:)``, after FCM answered 401 to the access token `refused` when that is set.
    private func send(_ request: PushRequest, refused: String?) async -> SendOutcome {
        let deadline = NIODeadline.now() + timeout
        let body = ByteBuffer(bytes: request.body)
        var refreshedAfter401 = false
        var staleRetries = 0
        var safeRetries = 0
        if let refused, let next = await unauthorized(refused, staleRetries: 0, refreshedAfter401: false) {
            (staleRetries, refreshedAfter401) = next
        }
        while true {
            let bearer: String
            do {
                bearer = try await tokens.token()
            } catch {
                switch error {
                case .rejected:
                    return .halt(code: "OAUTH_REJECTED", message: error.description)
                case .unavailable:
                    // The lane's outage, not the recipient's: with a delay (none of its own) the lane pauses and backs
                    // off, nothing is charged, and the outage breaker halts a long one. Without it each failed fetch, at
                    // once, was charged as the recipient's retry: a minute without tokens failed the whole audience
                    // `attempts_exhausted`, and the run said `completed`.
                    warnTokenUnavailable(error.description)
                    return .retry(.provider, code: "OAUTH_UNAVAILABLE", after: .zero)
                }
            }
            let response: HTTP2Response
            do {
                // A request that waited for a stream is not written once its worker's lease gate closed meanwhile.
                guard let answer = try await pool.execute(
                    headers: headerBlock(bearer: bearer), body: body, deadline: deadline, stillWanted: { request.gateIsOpen }
                ) else {
                    return .withdrawn
                }
                response = answer
            } catch let error as HTTP2TransportError {
                if error.isSafeToRetry && safeRetries < options.safeRetryLimit && NIODeadline.now() < deadline {
                    safeRetries += 1
                    continue
                }
                return error.outcome
            } catch {
                return .ambiguous(code: "transport_error")
            }

            switch verdict(response) {
            case .outcome(let outcome):
                return outcome
            case .unauthorized:
                guard let next = await unauthorized(bearer, staleRetries: staleRetries, refreshedAfter401: refreshedAfter401) else {
                    return classify(response)
                }
                (staleRetries, refreshedAfter401) = next
            }
        }
    }

    /// The request's header fields with an access token.
    private func headerBlock(bearer: String) -> HTTP2HeaderBlock {
        var headers = HTTP2HeaderBlock(capacity: 128 + bearer.utf8.count)
        headers.add(.methodPOST)
        headers.add(.schemeHTTPS)
        headers.add(.authority, value: authority)
        headers.add(.path, value: path)
        headers.add(.authorization, value: "Bearer ", bearer)
        headers.addIndexed(name: "content-type", value: "application/json")
        return headers
    }

    /// What an answer means: an outcome, or a 401 without a reason, which a new access token may cure.
    private enum Verdict {
        case outcome(SendOutcome)
        case unauthorized
    }

    private func verdict(_ response: HTTP2Response) -> Verdict {
        if response.status == 401, FCMError.parse(httpStatus: 401, body: response.body?.readableBytesView ?? ByteBuffer().readableBytesView).reason == nil {
            return .unauthorized
        }
        return .outcome(classify(response))
    }

    /// The outcome of an answer (the payload breaker counts on it).
    private func classify(_ response: HTTP2Response) -> SendOutcome {
        if response.status == 200 {
            invalidPayloadsInARow.withLock { $0 = 0 }
            return .delivered(providerMessageID: FCMMessageName.read(response.body))
        }
        let error = FCMError.parse(httpStatus: response.status, body: response.body?.readableBytesView ?? ByteBuffer().readableBytesView)
        let retryAfter = response.retryAfterSeconds.map { Duration.seconds($0) }
        let outcome = FCMErrorClassifier.classify(error, retryAfter: retryAfter, projectID: projectID)
        if case .rejected("INVALID_ARGUMENT") = outcome {
            return payloadRejected(error)
        }
        return outcome
    }

    /// After a 401 for `bearer`: a token that ran out (or was replaced) while its request waited is simply retried with
    /// the current one; a token that was valid when refused gets one refresh, and a second refusal halts the run.
    /// - Returns: The retry counts for sending again, or nil when the 401 stands.
    private func unauthorized(_ bearer: String, staleRetries: Int, refreshedAfter401: Bool) async -> (Int, Bool)? {
        if staleRetries < Self.staleTokenRetryLimit, await tokens.isStale(bearer) {
            await tokens.invalidate(bearer)
            return (staleRetries + 1, refreshedAfter401)
        }
        if !refreshedAfter401 {
            await tokens.invalidate(bearer)
            return (staleRetries, true)
        }
        return nil
    }

    /// Fetches the first access token and opens the connections, so the first messages are not held up
    /// (and then released at once) by the handshake.
    public func prepare() async {
        async let token: Void = { _ = try? await self.tokens.token() }()
        await pool.warmUp(deadline: .now() + timeout)
        await token
    }

    /// Closes all connections.
    public func shutdown() async {
        await pool.shutdown()
        for pool in tokenPools { await pool.shutdown() }
    }

    /// Access tokens fetched so far (diagnostics and tests).
    public func accessTokenFetches() async -> Int {
        await tokens.fetchCount
    }

    // MARK: Payload breaker

    private func payloadRejected(_ error: FCMError) -> SendOutcome {
        let count = invalidPayloadsInARow.withLock { count in
            count += 1
            return count
        }
        guard count >= options.invalidPayloadHaltThreshold else { return .rejected(code: "INVALID_ARGUMENT") }
        let detail = error.message.map { ": \($0)" } ?? ""
        return .halt(code: "INVALID_ARGUMENT", message: "FCM rejected the message \(count) times in a row\(detail)")
    }

    /// The section's proxy for `host` (`proxy:`, else `https_proxy` / `all_proxy` unless `no_proxy` lists the host).
    private static func proxy(settings: FCMSettings, host: String, environment: [String: String]) throws(FCMConfigurationError) -> HTTPProxy? {
        do throws(ProxyConfigurationError) {
            return try HTTPProxy.resolve(settings.proxy, caFile: settings.proxyCAFile, host: host, environment: environment)
        } catch {
            throw .proxy(error)
        }
    }

    /// The tunnel through the section's proxy to `host`, or nil when it is reached directly.
    private static func tunnel(settings: FCMSettings, host: String, environment: [String: String]) throws(FCMConfigurationError) -> ProxyTunnel? {
        do throws(ProxyConfigurationError) {
            return try ProxyTunnel.resolve(settings.proxy, caFile: settings.proxyCAFile, host: host, environment: environment)
        } catch {
            throw .proxy(error)
        }
    }
}
