import Foundation

/// Where and how Bugle connects to PostgreSQL.
///
/// Build one from a libpq-style URL with ``init(url:)``:
///
/// ```
/// postgres://user:pass@db.example.com:5432/app?sslmode=verify-full&sslrootcert=/etc/ssl/pg-ca.pem
/// postgresql://bugle@/bugle?host=/var/lib/bugle/1234abcd/socket     (Unix socket directory)
/// postgres://bugle@%2Ftmp%2Fpg/bugle                                 (percent-encoded socket directory)
/// postgres://bugle@db1:5432,db2:5433/app                             (a host list, each host with its port)
/// host=db1 port=5432 dbname=app user=bugle                           (libpq's key=value form)
/// ```
///
/// Recognised query parameters: `sslmode` (`disable` | `allow` | `prefer` | `require` | `verify-ca` |
/// `verify-full`), `sslrootcert` (a PEM file, or `system`), `sslcert` and `sslkey` (a client certificate and its
/// PEM key, for servers and poolers that authenticate by certificate; the key must not be readable by
/// group or others, as libpq requires), `sslpassword` (the passphrase of an encrypted `sslkey`), `host` (a host name,
/// or an absolute path naming a Unix-socket directory), `port`, `user`, `password`, `passfile` (a libpq password
/// file; see ``resolvingPassword(environment:)``), `dbname`, `application_name`, `connect_timeout` (seconds),
/// `channel_binding` (`disable` | `prefer`; `require` is refused: the client has no channel binding), `service` (a
/// section of libpq's service file, see ``ServiceFile``) and `target_session_attrs` (`any` | `read-write` | `primary`,
/// for a host list: `host=a,b` with one port or one each; see ``DatabaseHostSelection``). Anything else is rejected by name. With
/// ``init(url:environment:)`` what the URL leaves out comes from the service, then from libpq's environment variables.
/// No host anywhere means the Unix socket in ``defaultSocketDirectory``, as libpq's does. Special characters in the user or password (`@ / ? # :`) must be
/// percent-encoded.
///
/// ``description`` prints the URL with the password replaced by `***`, and parse errors name the bad part of the
/// URL without echoing its text, so neither can leak a password into a log. For the TLS mapping see
/// ``SSLMode`` and `postgresClientConfiguration()`.
public struct DatabaseConfiguration: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// How the server is reached.
    public enum Endpoint: Sendable, Hashable {
        /// TCP to `host:port`.
        case tcp(host: String, port: Int)
        /// The Unix-domain socket `<directory>/.s.PGSQL.<port>`.
        case unixSocket(directory: String, port: Int)
    }

    /// libpq's `sslmode`, and what Bugle does for each value.
    ///
    /// | mode | TCP behaviour |
    /// | --- | --- |
    /// | `disable` | plaintext only |
    /// | `allow`, `prefer` | TLS when the server offers it, else plaintext (postgres-nio `.prefer`); the certificate is not checked |
    /// | `require` | TLS or fail, never plaintext; the certificate is not checked unless `sslrootcert` is given (libpq semantics), so it protects against eavesdropping but not against an active attacker |
    /// | `verify-ca` | TLS or fail; the chain must lead to `sslrootcert` (or the system roots); the host name is not checked |
    /// | `verify-full` | TLS or fail; chain and host name are verified |
    ///
    /// Every TLS mode uses TLS 1.2 as the minimum version. Over a Unix socket the server never offers TLS, so
    /// `allow`/`prefer` mean `disable` there and `require`/`verify-*` are rejected rather than silently ignored.
    public enum SSLMode: String, Sendable, Hashable, CaseIterable {
        /// Never use TLS.
        case disable
        /// Treated like ``prefer`` (postgres-nio has no "plaintext first" mode).
        case allow
        /// TLS if offered, plaintext otherwise. The default for TCP.
        case prefer
        /// TLS or fail; no certificate check unless a root certificate is configured.
        case require
        /// TLS or fail; verify the certificate chain but not the host name.
        case verifyCA = "verify-ca"
        /// TLS or fail; verify the chain and the host name.
        case verifyFull = "verify-full"
    }

    /// How the server is reached.
    public var endpoint: Endpoint
    /// The role to log in as.
    public var username: String
    /// The password, if any. Never printed.
    public var password: String?
    /// The database to open; `nil` means the server default (the user name).
    public var database: String?
    /// The TLS mode; see ``SSLMode``.
    public var sslMode: SSLMode
    /// A PEM file of trusted root certificates (`sslrootcert`); `nil` means the system trust store.
    public var sslRootCertificatePath: String?
    /// The client certificate (`sslcert`, PEM, with its chain) presented when the server asks for one.
    public var sslCertificatePath: String?
    /// The client certificate's private key (`sslkey`, PEM; 0600, or 0640 when owned by root).
    public var sslKeyPath: String?
    /// The passphrase of an encrypted ``sslKeyPath`` (`sslpassword`). Never printed.
    public var sslKeyPassword: String?
    /// The password file named by the URL's `passfile` (see ``resolvingPassword(environment:)``).
    public var passwordFilePath: String?
    /// Where ``password`` came from, once ``resolvingPassword(environment:)`` has looked; `nil` before.
    public var passwordSource: PasswordSource?
    /// libpq keywords that were given but only tune the connection, so Bugle does not use them (`keepalives (from
    /// service prod (…))`, `sslsni (from PGSSLSNI)`): logged once at start, and printed by `bugle db status`.
    public var ignoredSettings: [String] = []
    /// libpq's `options` (server settings), applied to the transactions that run segment SQL only.
    public var segmentOptions = SessionOptions()
    /// The servers after ``endpoint`` that a host list (`host=a,b,c`) names, tried in order by
    /// ``DatabaseHostSelection`` when an earlier one is unreachable or does not satisfy ``targetSessionAttributes``.
    public var alternateEndpoints: [Endpoint] = []
    /// libpq's `target_session_attrs`: which server of the list will do.
    public var targetSessionAttributes = TargetSessionAttributes.any
    /// The `sslmode` asked for, if any (``sslMode`` is what it comes to on ``endpoint``).
    var requestedSSLMode: SSLMode?

    /// libpq's `target_session_attrs`, as far as a program that writes can use it.
    public enum TargetSessionAttributes: String, Sendable, Hashable {
        /// Any server that accepts the login.
        case any
        /// One whose sessions can write (`transaction_read_only` off).
        case readWrite = "read-write"
        /// One that is not a standby in recovery.
        case primary
    }

    /// Which settings came from a service file or the environment rather than the URL, for `bugle db status`
    /// (see ``ConnectionParameters/outsideOrigins``); never a value.
    public var settingOrigins: String?
    /// Sent to the server as `application_name`, visible in `pg_stat_activity`.
    public var applicationName: String
    /// The tag ``taggingSessions(_:)`` appended to ``applicationName``: the process's own, left out of ``description``
    /// (an error naming the server showed `application_name=bugle%2012455:2438088973`).
    public private(set) var sessionTag: String?
    /// How long to wait for a TCP/Unix connection to open.
    public var connectTimeout: Duration
    /// Whether Bugle's session settings (`jit`, `idle_in_transaction_session_timeout`) are sent as startup
    /// parameters. ``Database`` turns it off when the server refuses them, as PgBouncer does unless told to ignore
    /// them; ledger transactions set both for themselves either way.
    public var sessionSettingsAtStartup = true

    /// Creates a configuration from its parts.
    /// - Parameters:
    ///   - endpoint: How the server is reached.
    ///   - username: The role to log in as.
    ///   - password: The password, if any.
    ///   - database: The database to open; `nil` for the server default.
    ///   - sslMode: The TLS mode; `nil` picks `prefer` for TCP and `disable` for a Unix socket.
    ///   - sslRootCertificatePath: A PEM file of trusted roots, or `nil` for the system store.
    ///   - applicationName: The `application_name` reported to the server.
    ///   - connectTimeout: How long to wait for a connection to open.
    /// This configuration with `tag` appended to its `application_name` (`bugle 1234:987654`), so this process's
    /// sessions can be found in `pg_stat_activity`. The name is kept to printable ASCII and to the 63 bytes the
    /// server keeps, shortening the given name rather than the tag.
    /// - Parameter tag: Printable ASCII, unique to the process (at most 40 bytes).
    public func taggingSessions(_ tag: String) -> DatabaseConfiguration {
        var copy = self
        let base = String(String.UnicodeScalarView(applicationName.unicodeScalars.filter { (0x20...0x7E).contains($0.value) }))
        let room = max(0, 63 - 1 - tag.utf8.count)
        copy.applicationName = String(base.prefix(room)) + " " + tag
        copy.sessionTag = tag
        return copy
    }

    public init(
        endpoint: Endpoint,
        username: String,
        password: String? = nil,
        database: String? = nil,
        sslMode: SSLMode? = nil,
        sslRootCertificatePath: String? = nil,
        applicationName: String = "bugle",
        connectTimeout: Duration = .seconds(10)
    ) {
        self.endpoint = endpoint
        self.username = username
        self.password = password
        self.database = database
        switch endpoint {
        case .tcp: self.sslMode = sslMode ?? .prefer
        case .unixSocket: self.sslMode = sslMode ?? .disable
        }
        self.sslRootCertificatePath = sslRootCertificatePath
        self.applicationName = applicationName
        self.connectTimeout = connectTimeout
    }

    /// A configuration for a server listening on a Unix-domain socket, such as the embedded cluster.
    /// - Parameters:
    ///   - directory: The socket directory (the server's `-k` / `unix_socket_directories`).
    ///   - port: The port number that names the socket file `.s.PGSQL.<port>`.
    ///   - username: The role to log in as.
    ///   - database: The database to open.
    /// - Returns: A configuration with TLS disabled and no password.
    public static func unixSocket(
        directory: String,
        port: Int = 5432,
        username: String,
        database: String?
    ) -> DatabaseConfiguration {
        DatabaseConfiguration(
            endpoint: .unixSocket(directory: directory, port: port),
            username: username,
            database: database,
            sslMode: .disable
        )
    }

    /// A copy that opens another database on the same server with the same credentials.
    /// - Parameter database: The database name.
    /// - Returns: The modified copy.
    public func with(database: String?) -> DatabaseConfiguration {
        var copy = self
        copy.database = database
        return copy
    }

    /// The full path of the Unix-domain socket file, or `nil` for TCP.
    public var unixSocketPath: String? {
        guard case .unixSocket(let directory, let port) = self.endpoint else { return nil }
        let trimmed = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        return "\(trimmed)/.s.PGSQL.\(port)"
    }

    // MARK: - Descriptions

    /// The configuration as a URL with the password replaced by `***`; a password found outside the URL (`PGPASSWORD`,
    /// a password or service file: see ``passwordSource``) is not shown as one, since the URL given had none.
    public var description: String {
        var text = "postgres://" + Self.encode(self.username, allowed: .urlUserAllowed)
        if self.password != nil, self.passwordSource == nil || self.passwordSource == .url {
            text += ":***"
        }
        text += "@"
        var query: [(name: String, value: String)] = []
        switch self.endpoint {
        case .tcp(let host, let port):
            text += host.contains(":") ? "[\(host)]" : host
            text += ":\(port)"
        case .unixSocket(let directory, let port):
            query.append(("host", directory))
            query.append(("port", String(port)))
        }
        text += "/" + Self.encode(self.database ?? "", allowed: .urlPathAllowed)
        query.append(("sslmode", self.sslMode.rawValue))
        if let root = self.sslRootCertificatePath {
            query.append(("sslrootcert", root))
        }
        if let certificate = self.sslCertificatePath, let key = self.sslKeyPath {
            query.append(("sslcert", certificate))
            query.append(("sslkey", key))
            if self.sslKeyPassword != nil {
                query.append(("sslpassword", "***"))
            }
        }
        if let file = self.passwordFilePath {
            query.append(("passfile", file))
        }
        let given = sessionTag.map { applicationName.hasSuffix(" " + $0) ? String(applicationName.dropLast($0.utf8.count + 1)) : applicationName } ?? applicationName
        if given != "bugle" {
            query.append(("application_name", given))
        }
        if !self.alternateEndpoints.isEmpty {
            query.append(("then", self.candidates.dropFirst().map(\.endpointDescription).joined(separator: ",")))
        }
        if self.targetSessionAttributes != .any {
            query.append(("target_session_attrs", self.targetSessionAttributes.rawValue))
        }
        // Each value percent-encoded where a URL needs it (`application_name=bugle 123:456` printed a space, so the URL
        // could not be pasted back), `/` and `:` left readable.
        return text + "?" + query.map { $0.name + "=" + Self.encodeQueryValue($0.value) }.joined(separator: "&")
    }

    private static func encodeQueryValue(_ value: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+#")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// Same as ``description``: redacted.
    public var debugDescription: String { self.description }

    private static func encode(_ text: String, allowed: CharacterSet) -> String {
        var set = allowed
        set.remove(charactersIn: ":@/?#")
        return text.addingPercentEncoding(withAllowedCharacters: set) ?? text
    }
}
