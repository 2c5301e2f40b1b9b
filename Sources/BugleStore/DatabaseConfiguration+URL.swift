import Foundation

extension DatabaseConfiguration {
    /// Parses a `postgres://` or `postgresql://` URL (see the type's documentation for the accepted form).
    ///
    /// Defaults follow libpq: port 5432, user = the operating-system user, database = the user name (left `nil`),
    /// `sslmode=prefer` for TCP and `disable` for a Unix socket.
    ///
    /// - Parameter url: The URL text. It may contain a password; the text is never included in errors.
    /// - Throws: ``StoreError/Code-swift.struct/invalidDatabaseURL`` naming the bad part (scheme, user, password,
    ///   host, port, database, a query parameter), or ``StoreError/Code-swift.struct/unsupportedConfiguration``
    ///   for TLS over a Unix socket.
    public init(url: String) throws {
        let text = url.trimmingCharacters(in: .whitespacesAndNewlines)
        var rest: Substring
        if text.hasPrefix("postgres://") {
            rest = text.dropFirst("postgres://".count)
        } else if text.hasPrefix("postgresql://") {
            rest = text.dropFirst("postgresql://".count)
        } else {
            throw Self.urlError("scheme: the URL must start with postgres:// or postgresql://")
        }

        // Authority ends at the first '/', '?' or '#' (RFC 3986); userinfo is everything up to its last '@'.
        if rest.contains("#") {
            throw Self.urlError("fragment: '#' is not allowed; percent-encode it (%23) inside a password")
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]

        var username: String?
        var password: String?
        var hostPart = authority
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPart = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                username = try Self.decode(userInfo[..<colon], part: "user")
                password = try Self.decode(userInfo[userInfo.index(after: colon)...], part: "password")
            } else {
                username = try Self.decode(userInfo, part: "user")
            }
        }

        var host: String?
        var port: Int?
        if hostPart.hasPrefix("[") {
            guard let close = hostPart.firstIndex(of: "]") else {
                throw Self.urlError("host: unterminated '[' in an IPv6 address")
            }
            host = String(hostPart[hostPart.index(after: hostPart.startIndex)..<close])
            let after = hostPart[hostPart.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Self.urlError("host: unexpected text after ']'") }
                port = try Self.parsePort(after.dropFirst())
            }
        } else if let colon = hostPart.lastIndex(of: ":") {
            host = try Self.decode(hostPart[..<colon], part: "host")
            port = try Self.parsePort(hostPart[hostPart.index(after: colon)...])
        } else if !hostPart.isEmpty {
            host = try Self.decode(hostPart, part: "host")
        }
        if let value = host, value.isEmpty {
            host = nil
        }
        if let value = host, value.contains(",") {
            throw Self.urlError("host: multiple hosts are not supported")
        }

        var database: String?
        if rest.hasPrefix("/") {
            let pathEnd = rest.firstIndex(of: "?") ?? rest.endIndex
            let path = rest[rest.index(after: rest.startIndex)..<pathEnd]
            rest = rest[pathEnd...]
            if !path.isEmpty {
                database = try Self.decode(path, part: "database")
            }
        }

        var sslMode: SSLMode?
        var rootCertificate: String?
        var clientCertificate: String?
        var clientKey: String?
        var clientKeyPassword: String?
        var passwordFile: String?
        var applicationName = "bugle"
        var connectTimeout = Duration.seconds(10)
        if rest.hasPrefix("?") {
            for pair in rest.dropFirst().split(separator: "&", omittingEmptySubsequences: true) {
                let equals = pair.firstIndex(of: "=") ?? pair.endIndex
                let name = try Self.decode(pair[..<equals], part: "query parameter name")
                let rawValue = equals < pair.endIndex ? pair[pair.index(after: equals)...] : ""
                let part = "query parameter '\(Self.printableName(name))'"
                let value = try Self.decode(rawValue, part: part)
                switch name {
                case "sslmode":
                    guard let mode = SSLMode(rawValue: value) else {
                        throw Self.urlError(
                            "sslmode: must be one of "
                                + SSLMode.allCases.map(\.rawValue).joined(separator: ", ")
                        )
                    }
                    sslMode = mode
                case "sslrootcert":
                    rootCertificate = value.isEmpty ? nil : value
                case "sslcert":
                    clientCertificate = value.isEmpty ? nil : value
                case "sslkey":
                    clientKey = value.isEmpty ? nil : value
                case "sslpassword":
                    clientKeyPassword = value.isEmpty ? nil : value
                case "passfile":
                    passwordFile = value.isEmpty ? nil : value
                case "host":
                    host = value.isEmpty ? nil : value
                case "port":
                    port = try Self.parsePort(Substring(value))
                case "user":
                    username = value
                case "password":
                    password = value
                case "dbname":
                    database = value.isEmpty ? nil : value
                case "application_name":
                    applicationName = value
                case "connect_timeout":
                    guard let seconds = Int(value), seconds > 0, seconds <= 3600 else {
                        throw Self.urlError("connect_timeout: must be a whole number of seconds from 1 to 3600")
                    }
                    connectTimeout = .seconds(seconds)
                default:
                    throw Self.urlError("\(part): unknown parameter")
                }
            }
        }

        guard (clientCertificate == nil) == (clientKey == nil) else {
            throw Self.urlError("sslcert and sslkey go together: give both (a client certificate and its key), or neither")
        }
        guard clientKeyPassword == nil || clientKey != nil else {
            throw Self.urlError("sslpassword is the passphrase of an encrypted sslkey: give sslcert and sslkey with it")
        }
        let resolvedUser = username.flatMap { $0.isEmpty ? nil : $0 } ?? NSUserName()
        guard !resolvedUser.isEmpty else {
            throw Self.urlError("user: no user name given and the operating-system user is unknown")
        }
        let resolvedPort = port ?? 5432

        let endpoint: Endpoint
        if let host, host.hasPrefix("/") {
            endpoint = .unixSocket(directory: host, port: resolvedPort)
            switch sslMode {
            case .require, .verifyCA, .verifyFull:
                throw StoreError(
                    .unsupportedConfiguration,
                    "sslmode=\(sslMode?.rawValue ?? "") cannot be honoured over a Unix socket: "
                        + "PostgreSQL never offers TLS there; use sslmode=disable or a TCP host"
                )
            case .allow, .prefer:
                sslMode = .disable
            case .disable, nil:
                break
            }
        } else {
            endpoint = .tcp(host: host ?? "localhost", port: resolvedPort)
        }

        self.init(
            endpoint: endpoint,
            username: resolvedUser,
            password: password,
            database: database,
            sslMode: sslMode,
            sslRootCertificatePath: rootCertificate,
            applicationName: applicationName,
            connectTimeout: connectTimeout
        )
        self.sslCertificatePath = clientCertificate
        self.sslKeyPath = clientKey
        self.sslKeyPassword = clientKeyPassword
        self.passwordFilePath = passwordFile
    }

    private static func urlError(_ message: String) -> StoreError {
        StoreError(.invalidDatabaseURL, "invalid database URL: \(message)")
    }

    private static func decode(_ text: Substring, part: String) throws -> String {
        guard let decoded = String(text).removingPercentEncoding else {
            throw Self.urlError("\(part): invalid percent-encoding")
        }
        return decoded
    }

    private static func parsePort(_ text: Substring) throws -> Int {
        guard let port = Int(text), (1...65535).contains(port) else {
            throw Self.urlError(
                "port: must be a number from 1 to 65535 (if the password contains '/', '?', '#' or '@', "
                    + "percent-encode it)"
            )
        }
        return port
    }

    /// Echoes a parameter name only when it looks like one, so a mangled password cannot end up in an error.
    private static func printableName(_ name: String) -> String {
        let isPlain = name.count <= 40 && name.allSatisfy { ("a"..."z").contains($0) || $0 == "_" }
        return isPlain ? name : "(unprintable name)"
    }
}
