import Foundation
import NIOSSL
import PostgresNIO

#if canImport(Glibc)
import Glibc
#endif

extension DatabaseConfiguration {
    /// The postgres-nio client configuration for this database, with TLS set up per ``SSLMode``.
    ///
    /// - `disable` → `.disable`.
    /// - `allow`, `prefer` → `.prefer`, certificate not verified (libpq semantics; plaintext when the server has no TLS).
    /// - `require` → `.require`, never plaintext; certificate not verified unless ``sslRootCertificatePath`` is set,
    ///   in which case the chain is verified as for `verify-ca`.
    /// - `verify-ca` → `.require` with chain verification (`.noHostnameVerification`).
    /// - `verify-full` → `.require` with `.fullVerification`.
    ///
    /// All TLS modes set `minimumTLSVersion = .tlsv12` (NIOSSL's client default is TLS 1.0).
    /// - Returns: A configuration for `PostgresClient`.
    /// - Throws: ``StoreError`` when TLS is requested over a Unix socket.
    public func postgresClientConfiguration() throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch self.endpoint {
        case .tcp(let host, let port):
            configuration = PostgresClient.Configuration(
                host: host,
                port: port,
                username: self.username,
                password: self.password,
                database: self.database,
                tls: try self.tls()
            )
        case .unixSocket:
            switch self.sslMode {
            case .require, .verifyCA, .verifyFull:
                throw StoreError(
                    .unsupportedConfiguration,
                    "sslmode=\(self.sslMode.rawValue) cannot be honoured over a Unix socket"
                )
            case .disable, .allow, .prefer:
                break
            }
            configuration = PostgresClient.Configuration(
                unixSocketPath: self.unixSocketPath ?? "",
                username: self.username,
                password: self.password,
                database: self.database
            )
        }
        configuration.options.connectTimeout = self.connectTimeout
        // A worker frozen inside a transaction (SIGSTOP, a stalled host) would hold its row locks and stall every
        // other worker's lease takeover; the server ends such a session after 15 s, well before a lease (30 s)
        // could be taken over.
        //
        // JIT off: Bugle's statements are short, and the planner's estimates grow with the ledger (a claim's
        // `LockRows` under `Limit 500` is costed at every due row). At 10,000,000 recipients the claim crossed
        // `jit_above_cost` and spent 40 of its 54 ms compiling (auto_explain `JIT: … Emission 37 ms`).
        configuration.options.additionalStartupParameters = [("application_name", self.applicationName)]
        if self.sessionSettingsAtStartup {
            configuration.options.additionalStartupParameters += [
                ("idle_in_transaction_session_timeout", PostgresCampaignStore.idleInTransactionTimeout),
                ("jit", "off"),
            ]
        }
        return configuration
    }

    /// The TLS decision for this configuration, as plain values (what `postgresClientConfiguration()` applies).
    var tlsPlan: TLSPlan {
        switch self.sslMode {
        case .disable:
            return TLSPlan(negotiation: .disable, verification: .none, trustRootsFile: nil)
        case .allow, .prefer:
            return TLSPlan(negotiation: .prefer, verification: .none, trustRootsFile: self.trustRootsFile)
        case .require:
            let verification: TLSPlan.Verification = self.sslRootCertificatePath == nil ? .none : .chainOnly
            return TLSPlan(negotiation: .require, verification: verification, trustRootsFile: self.trustRootsFile)
        case .verifyCA:
            return TLSPlan(negotiation: .require, verification: .chainOnly, trustRootsFile: self.trustRootsFile)
        case .verifyFull:
            return TLSPlan(negotiation: .require, verification: .full, trustRootsFile: self.trustRootsFile)
        }
    }

    private var trustRootsFile: String? {
        guard let root = self.sslRootCertificatePath, root != "system" else { return nil }
        return root
    }

    private func tlsConfiguration() throws -> TLSConfiguration {
        let plan = self.tlsPlan
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        switch plan.verification {
        case .none: tls.certificateVerification = .none
        case .chainOnly: tls.certificateVerification = .noHostnameVerification
        case .full: tls.certificateVerification = .fullVerification
        }
        if let file = plan.trustRootsFile {
            tls.trustRoots = .file(file)
        }
        if let certificatePath = self.sslCertificatePath, let keyPath = self.sslKeyPath {
            try Self.checkKeyPermissions(keyPath)
            do {
                tls.certificateChain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) }
            } catch {
                throw StoreError(.unsupportedConfiguration, "cannot read sslcert \(certificatePath) (a PEM certificate)", underlying: error)
            }
            tls.privateKey = .privateKey(try Self.clientKey(keyPath, passphrase: self.sslKeyPassword))
        }
        return tls
    }

    /// The PEM key at `path`, decrypted with `passphrase` when given.
    /// - Throws: ``StoreError`` naming the file and what to check (never the passphrase or the key).
    private static func clientKey(_ path: String, passphrase: String?) throws -> NIOSSLPrivateKey {
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw StoreError(.unsupportedConfiguration, "cannot read sslkey \(path)")
        }
        if let passphrase {
            guard let key = try? NIOSSLPrivateKey(bytes: bytes, format: .pem, passphraseCallback: { (provide: ([UInt8]) -> Void) in provide(Array(passphrase.utf8)) }) else {
                throw StoreError(.unsupportedConfiguration, "cannot read sslkey \(path) with the sslpassword given: a wrong passphrase, or not a PEM key")
            }
            return key
        }
        guard let key = try? NIOSSLPrivateKey(bytes: bytes, format: .pem) else {
            let encrypted = String(decoding: bytes.prefix(4096), as: UTF8.self).contains("ENCRYPTED")
            throw StoreError(
                .unsupportedConfiguration,
                encrypted
                    ? "sslkey \(path) is encrypted: give its passphrase as sslpassword in the URL"
                    : "cannot read sslkey \(path) (a PEM private key)")
        }
        return key
    }

    /// libpq's rule for `sslkey`: no access for others, and for the group only when root owns the file (0640).
    /// - Throws: ``StoreError`` naming the file (never its contents) when it is missing or too open.
    static func checkKeyPermissions(_ path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw StoreError(.unsupportedConfiguration, "cannot read sslkey \(path): \(String(cString: strerror(errno)))")
        }
        let mode = info.st_mode & 0o777
        let allowed: mode_t = info.st_uid == 0 && geteuid() != 0 ? 0o640 : 0o600
        guard mode & ~allowed == 0 else {
            throw StoreError(
                .unsupportedConfiguration,
                "sslkey \(path) is readable by others (mode \(String(mode, radix: 8))): chmod 600 it"
                    + (allowed == 0o640 ? " (640 when root owns it)" : ""))
        }
    }

    private func tls() throws -> PostgresClient.Configuration.TLS {
        switch self.tlsPlan.negotiation {
        case .disable: return .disable
        case .prefer: return .prefer(try self.tlsConfiguration())
        case .require: return .require(try self.tlsConfiguration())
        }
    }

    /// The same settings for a single `PostgresConnection` (used to probe the server with a precise error).
    /// - Returns: A connection configuration.
    /// - Throws: ``StoreError`` when TLS is requested over a Unix socket or the TLS context cannot be built
    ///   (for example an unreadable `sslrootcert`).
    func postgresConnectionConfiguration() throws -> PostgresConnection.Configuration {
        let clientConfiguration = try self.postgresClientConfiguration()
        var configuration: PostgresConnection.Configuration
        switch self.endpoint {
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS
            do {
                switch self.tlsPlan.negotiation {
                case .disable: tls = .disable
                case .prefer: tls = .prefer(try NIOSSLContext(configuration: self.tlsConfiguration()))
                case .require: tls = .require(try NIOSSLContext(configuration: self.tlsConfiguration()))
                }
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(.unsupportedConfiguration, "cannot set up TLS (check sslrootcert)", underlying: error)
            }
            configuration = PostgresConnection.Configuration(
                host: host,
                port: port,
                username: self.username,
                password: self.password,
                database: self.database,
                tls: tls
            )
        case .unixSocket:
            configuration = PostgresConnection.Configuration(
                unixSocketPath: self.unixSocketPath ?? "",
                username: self.username,
                password: self.password,
                database: self.database
            )
        }
        configuration.options.connectTimeout = .seconds(clientConfiguration.options.connectTimeout.components.seconds)
        configuration.options.additionalStartupParameters = clientConfiguration.options.additionalStartupParameters
        return configuration
    }
}

/// What TLS a ``DatabaseConfiguration`` asks postgres-nio for; TLS 1.2 is always the minimum version.
struct TLSPlan: Sendable, Hashable {
    /// Whether TLS is attempted and whether plaintext is acceptable.
    enum Negotiation: Sendable, Hashable {
        case disable
        case prefer
        case require
    }

    /// How the server certificate is checked.
    enum Verification: Sendable, Hashable {
        case none
        case chainOnly
        case full
    }

    var negotiation: Negotiation
    var verification: Verification
    var trustRootsFile: String? = nil
}
