import Crypto
import Foundation
import NIOConcurrencyHelpers

/// Mints and caches APNs provider tokens: ES256 JWTs with header `{"alg":"ES256","kid":...}` and claims
/// `{"iss":<team>,"iat":<integer seconds>}`, signed as raw R‖S and base64url-encoded.
///
/// Timing (Apple: refresh no more than once per 20 minutes, no less than once per 60): the cached token is
/// re-minted once it is `refreshAfter` old (default 50 minutes), and never sooner than
/// `minimumInterval` (default 20 minutes) after the previous mint — also not after `ExpiredProviderToken`.
/// Refresh timing uses the injected `clock`; `iat` comes from the injected wall clock.
///
/// Every request asks for the token, so the cache sits behind a lock, not in an actor: an actor hop per request (two
/// task switches) cost more than the whole of a request's header encoding. A mint (about once an hour) holds the
/// lock for one signature.
public final class APNSAuthenticationTokenSigner<C: Clock>: APNSBearerTokenSource where C.Duration == Duration {
    private struct Cached {
        var token: String
        var mintedAt: C.Instant
    }

    private struct State {
        var cached: Cached?
        var mintCount = 0
    }

    private let privateKey: P256.Signing.PrivateKey
    private let keyID: String
    private let teamID: String
    private let clock: C
    private let epochSeconds: @Sendable () -> Int64
    private let refreshAfter: Duration
    private let minimumInterval: Duration
    private let state = NIOLockedValueBox(State())

    /// Number of tokens minted so far (for tests and metrics).
    public var mintCount: Int { state.withLockedValue { $0.mintCount } }

    /// Creates a signer.
    /// - Parameters:
    ///   - privateKey: The `.p8` key.
    ///   - keyID: 10-character key id (`kid`).
    ///   - teamID: 10-character team id (`iss`).
    ///   - clock: Clock for refresh timing.
    ///   - refreshAfter: Age at which the cached token is replaced (default 50 minutes).
    ///   - minimumInterval: Minimum time between two mints (default 20 minutes).
    ///   - epochSeconds: Wall clock for `iat`, in seconds since 1970.
    public init(
        privateKey: P256.Signing.PrivateKey,
        keyID: String,
        teamID: String,
        clock: C,
        refreshAfter: Duration = .seconds(50 * 60),
        minimumInterval: Duration = .seconds(20 * 60),
        epochSeconds: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
        self.clock = clock
        self.refreshAfter = refreshAfter
        self.minimumInterval = minimumInterval
        self.epochSeconds = epochSeconds
    }

    /// The token to send now.
    public func currentToken() -> String {
        state.withLockedValue { state in
            let now = clock.now
            if let cached = state.cached, cached.mintedAt.duration(to: now) < refreshAfter {
                return cached.token
            }
            if let cached = state.cached, cached.mintedAt.duration(to: now) < minimumInterval {
                return cached.token
            }
            return mint(now: now, into: &state)
        }
    }

    /// A token to retry with after `ExpiredProviderToken`, honouring the minimum interval.
    /// - Parameter rejected: The refused token.
    public func tokenAfterExpiry(rejected: String) -> String? {
        state.withLockedValue { state in
            let now = clock.now
            guard let cached = state.cached else { return mint(now: now, into: &state) }
            if cached.token != rejected { return cached.token }
            guard cached.mintedAt.duration(to: now) >= minimumInterval else { return nil }
            return mint(now: now, into: &state)
        }
    }

    private func mint(now: C.Instant, into state: inout State) -> String {
        let token = APNSJWT.make(privateKey: privateKey, keyID: keyID, teamID: teamID, issuedAt: epochSeconds())
        state.cached = Cached(token: token, mintedAt: now)
        state.mintCount += 1
        return token
    }
}
