import Synchronization

/// Caches the FCM access token and refreshes it before it expires, one fetch at a time.
///
/// - The token is replaced once it is within `refreshMargin` of expiry (default: 5 minutes, at most a
///   quarter of its lifetime, so short-lived tokens are not refetched on every call).
/// - However many senders ask at once, one fetch runs; the others await its result (no stampede).
/// - After a 401 the sender calls ``invalidate(_:)`` with the refused token; the next ``token()`` fetches
///   once, and later invalidations of the same old token are ignored.
/// - ``isStale(_:)`` tells a 401 for a token that was replaced or ran out while its request waited from a refusal.
/// - A transient fetch failure while the cached token is still valid keeps the cached token.
/// - Every send asks for the token: while the cached one is fresh it is read from a lock-protected copy, without a hop
///   onto the actor (two task switches per request).
public actor FCMAccessTokenCache<C: Clock> where C.Duration == Duration {
    private struct Cached {
        var value: String
        var expiresAt: C.Instant
        var refreshAt: C.Instant
    }

    private let fetcher: any FCMAccessTokenFetching
    private let clock: C
    private let refreshMargin: Duration
    private var cached: Cached? {
        didSet { fresh.withLock { [cached] in $0 = cached } }
    }
    /// ``cached``, readable without the actor.
    private nonisolated let fresh = Mutex<Cached?>(nil)
    private var refreshing: Task<FCMAccessToken, any Error>?
    /// Fetches started so far (for tests and metrics).
    public private(set) var fetchCount = 0

    /// Creates a cache.
    /// - Parameters:
    ///   - fetcher: The token source.
    ///   - clock: Clock for expiry.
    ///   - refreshMargin: How long before expiry to refresh.
    public init(fetcher: any FCMAccessTokenFetching, clock: C, refreshMargin: Duration = .seconds(300)) {
        self.fetcher = fetcher
        self.clock = clock
        self.refreshMargin = refreshMargin
    }

    /// A token valid now.
    /// - Throws: ``FCMAuthError``.
    public nonisolated func token() async throws(FCMAuthError) -> String {
        if let value = freshToken() { return value }
        return try await tokenOrRefresh()
    }

    /// The cached token while it needs no refresh, without waiting; nil otherwise (then use ``token()``).
    public nonisolated func freshToken() -> String? {
        guard let cached = fresh.withLock({ $0 }), clock.now < cached.refreshAt else { return nil }
        return cached.value
    }

    private func tokenOrRefresh() async throws(FCMAuthError) -> String {
        let now = clock.now
        if let cached, now < cached.refreshAt {
            return cached.value
        }
        do {
            return try await refresh()
        } catch {
            if case .unavailable = error, let cached, clock.now < cached.expiresAt { return cached.value }
            throw error
        }
    }

    /// True when `token` is no longer the one to send: a newer token replaced it, or it is past its expiry by this
    /// cache's clock (a request that waited in a queue longer than the token's remaining life). A 401 for a stale
    /// token says nothing about the credentials.
    /// - Parameter token: A bearer value this cache handed out.
    public func isStale(_ token: String) -> Bool {
        guard let cached, cached.value == token else { return true }
        return clock.now >= cached.expiresAt
    }

    /// Marks `token` as refused by the server, so the next ``token()`` fetches a new one.
    /// - Parameter token: The refused bearer value.
    public func invalidate(_ token: String) {
        if cached?.value == token { cached = nil }
    }

    private func refresh() async throws(FCMAuthError) -> String {
        let task: Task<FCMAccessToken, any Error>
        if let refreshing {
            task = refreshing
        } else {
            fetchCount += 1
            let fetcher = self.fetcher
            task = Task { try await fetcher.fetch() }
            refreshing = task
        }
        let token: FCMAccessToken
        do {
            token = try await task.value
        } catch let error as FCMAuthError {
            if refreshing == task { refreshing = nil }
            throw error
        } catch {
            if refreshing == task { refreshing = nil }
            throw .unavailable(String(describing: error))
        }
        if refreshing == task {
            refreshing = nil
            let now = clock.now
            let margin = min(refreshMargin, token.lifetime / 4)
            cached = Cached(value: token.value, expiresAt: now.advanced(by: token.lifetime), refreshAt: now.advanced(by: token.lifetime - margin))
        }
        return token.value
    }
}
