import Foundation

extension ConnectionParameters {
    /// The keywords a `postgres://` or `postgresql://` URL gives: user and password from its user info, host and port
    /// from its authority, `dbname` from its path, and any of ``keywords`` as query parameters (a query parameter
    /// replaces the part of the URL it names, as in libpq). libpq's other form, a key=value connection string
    /// (`host=db1 port=5432 dbname=app user=bugle`), is read too: see ``init(keywordValues:)``.
    ///
    /// - Parameter url: The URL text. It may contain a password; the text is never included in errors.
    /// - Throws: ``StoreError/Code-swift.struct/invalidDatabaseURL`` naming the bad part (scheme, user, password,
    ///   host, port, database, a query parameter). Values are checked later, by
    ///   ``DatabaseConfiguration/init(parameters:)``.
    public init(url: String) throws {
        let text = url.trimmingCharacters(in: .whitespacesAndNewlines)
        var rest: Substring
        if text.hasPrefix("postgres://") {
            rest = text.dropFirst("postgres://".count)
        } else if text.hasPrefix("postgresql://") {
            rest = text.dropFirst("postgresql://".count)
        } else if !text.contains("://"), text.contains("=") {
            try self.init(keywordValues: text)
            return
        } else {
            throw Self.urlError(
                "scheme: the URL must start with postgres:// or postgresql:// (postgres://user@host:5432/db), "
                    + "or be libpq's key=value form (host=… port=… dbname=… user=…)")
        }
        self.init()

        // Authority ends at the first '/', '?' or '#' (RFC 3986); userinfo is everything up to its last '@'.
        if rest.contains("#") {
            throw Self.urlError("fragment: '#' is not allowed; percent-encode it (%23) inside a password")
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]

        var hostPart = authority
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPart = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                self.setFromURL("user", try Self.decode(userInfo[..<colon], part: "user"))
                self.setFromURL("password", try Self.decode(userInfo[userInfo.index(after: colon)...], part: "password"))
            } else {
                self.setFromURL("user", try Self.decode(userInfo, part: "user"))
            }
        }

        try self.setHosts(hostPart)

        if rest.hasPrefix("/") {
            let pathEnd = rest.firstIndex(of: "?") ?? rest.endIndex
            let path = rest[rest.index(after: rest.startIndex)..<pathEnd]
            rest = rest[pathEnd...]
            self.setFromURL("dbname", try Self.decode(path, part: "database"))
        }

        if rest.hasPrefix("?") {
            for pair in rest.dropFirst().split(separator: "&", omittingEmptySubsequences: true) {
                let equals = pair.firstIndex(of: "=") ?? pair.endIndex
                let name = try Self.decode(pair[..<equals], part: "query parameter name")
                let rawValue = equals < pair.endIndex ? pair[pair.index(after: equals)...] : ""
                let part = "query parameter '\(ServiceFile.printable(name))'"
                let value = try Self.decode(rawValue, part: part)
                if Self.keywords.contains(name) {
                    self.setFromURL(name, value)
                } else if try !self.consider(name, value, origin: .url) {
                    throw Self.urlError("\(part): unknown parameter")
                }
            }
        }
    }

    /// The keywords of libpq's key=value connection string, as `PQconnectdb` reads one: `keyword = value` pairs
    /// separated by white space, a value in single quotes when it holds white space or is empty, `\'` and `\\`
    /// escaped. Each keyword is taken as the URL's query parameter of that name is (errors say "database URL", the
    /// setting's name).
    /// - Parameter text: The connection string. It may contain a password; no value is included in errors.
    /// - Throws: ``StoreError/Code-swift.struct/invalidDatabaseURL`` naming the keyword, or the pair's position.
    init(keywordValues text: String) throws {
        self.init()
        let characters = Array(text)
        var index = 0
        var position = 0
        func skipSpace() {
            while index < characters.count, characters[index].isWhitespace { index += 1 }
        }
        /// A value up to white space (or, quoted, up to its closing quote), its backslash escapes undone.
        func readValue(quoted: Bool) -> String? {
            var value = ""
            while index < characters.count {
                let character = characters[index]
                index += 1
                if character == "\\", index < characters.count {
                    value.append(characters[index])
                    index += 1
                } else if quoted ? character == "'" : character.isWhitespace {
                    return value
                } else {
                    value.append(character)
                }
            }
            return quoted ? nil : value
        }
        while true {
            skipSpace()
            guard index < characters.count else { break }
            position += 1
            var keyword = ""
            while index < characters.count, !characters[index].isWhitespace, characters[index] != "=" {
                keyword.append(characters[index])
                index += 1
            }
            skipSpace()
            guard index < characters.count, characters[index] == "=" else {
                throw Self.urlError("key=value connection string: pair \(position) has no '=' (keyword=value, separated by spaces)")
            }
            index += 1
            skipSpace()
            let quoted = index < characters.count && characters[index] == "'"
            if quoted { index += 1 }
            let name = ServiceFile.printable(keyword)
            guard let value = readValue(quoted: quoted) else {
                throw Self.urlError("key=value connection string: \(name): a quoted value without its closing quote")
            }
            if Self.keywords.contains(keyword) {
                self.setFromURL(keyword, value)
            } else if try !self.consider(keyword, value, origin: .url) {
                throw Self.urlError("key=value connection string: \(name): unknown keyword")
            }
        }
    }

    /// The URL's hosts, as libpq reads them: `h1:p1,h2:p2`, each host a name, an IP literal (IPv6 in brackets,
    /// `[::1]:5432`) or a percent-encoded socket directory, each with its own optional port. A host without one takes
    /// libpq's default port (5432) when another host of the list has one; when none has, `port` is left to the query,
    /// the service or `PGPORT`. A list with an empty host (`a,,b`, a trailing comma) is refused.
    private mutating func setHosts(_ hostPart: Substring) throws {
        guard !hostPart.isEmpty else { return }
        let elements = hostPart.split(separator: ",", omittingEmptySubsequences: false)
        if elements.count == 1 {
            // One host: `host`, `host:port`, `[v6]:port`, or `:port` alone (the default host on another port).
            let (host, port) = try Self.hostAndPort(hostPart, position: 1)
            self.setFromURL("host", host)
            if let port { self.setFromURL("port", port) }
            return
        }
        var hosts: [String] = []
        var ports: [String] = []
        for (index, element) in elements.enumerated() {
            let (host, port) = try Self.hostAndPort(element, position: index + 1)
            guard !host.isEmpty else {
                throw Self.urlError("host: host \(index + 1) of the list is empty (give each host between the commas)")
            }
            hosts.append(host)
            ports.append(port ?? "")
        }
        self.setFromURL("host", hosts.joined(separator: ","))
        if ports.contains(where: { !$0.isEmpty }) {
            self.setFromURL("port", ports.joined(separator: ","))
        }
    }

    /// One host of the URL's list and its port, if it has one: `name`, `name:port`, `[v6]` or `[v6]:port`.
    private static func hostAndPort(_ element: Substring, position: Int) throws -> (host: String, port: String?) {
        if element.hasPrefix("[") {
            guard let close = element.firstIndex(of: "]") else {
                throw Self.urlError("host: unterminated '[' in an IPv6 address (host \(position) of the list)")
            }
            let host = String(element[element.index(after: element.startIndex)..<close])
            let after = element[element.index(after: close)...]
            guard !after.isEmpty else { return (host, nil) }
            guard after.hasPrefix(":") else { throw Self.urlError("host: unexpected text after ']' (host \(position) of the list)") }
            return (host, String(after.dropFirst()))
        }
        guard let colon = element.lastIndex(of: ":") else {
            return (try Self.decode(element, part: "host"), nil)
        }
        return (try Self.decode(element[..<colon], part: "host"), String(element[element.index(after: colon)...]))
    }

    /// An empty value in the URL counts as not given, except a password (an empty password is one).
    private mutating func setFromURL(_ keyword: String, _ value: String) {
        if value.isEmpty && keyword != "password" {
            self.remove(keyword)
        } else {
            self.set(keyword, value, origin: .url)
        }
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
}

extension DatabaseConfiguration {
    /// The socket directory libpq's Debian build uses when no host is given anywhere.
    public static let defaultSocketDirectory = "/var/run/postgresql"

    /// Parses a `postgres://` or `postgresql://` URL (see the type's documentation for the accepted form), reading
    /// nothing else: no service file, no environment. See ``init(url:environment:)`` for libpq's defaults.
    ///
    /// - Throws: ``StoreError/Code-swift.struct/invalidDatabaseURL`` naming the bad part, or
    ///   ``StoreError/Code-swift.struct/unsupportedConfiguration`` for TLS over a Unix socket.
    public init(url: String) throws {
        try self.init(parameters: ConnectionParameters(url: url))
    }

    /// Parses a URL and takes what it leaves out as libpq does: from the service it names (`service`, else
    /// `PGSERVICE`; see ``ServiceFile``), then from `PGHOST`, `PGPORT`, `PGDATABASE`, `PGUSER`, `PGSSLMODE`,
    /// `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`, `PGAPPNAME`, `PGCONNECT_TIMEOUT` and `PGCHANNELBINDING`. So
    /// `postgres://` alone reaches the server the environment describes. The password is found later, by
    /// ``resolvingPassword(environment:)``.
    /// - Throws: as ``init(url:)``, with errors naming the service file's line or the variable a bad value came from.
    public init(url: String, environment: [String: String]) throws {
        try self.init(parameters: ConnectionParameters(url: url).fillingDefaults(environment: environment))
    }

    /// A configuration from libpq keywords. Defaults follow libpq: the Unix socket in ``defaultSocketDirectory`` when
    /// no host is given, port 5432, user = the operating-system user, database = the user name (left `nil`),
    /// `sslmode=prefer` for TCP and `disable` for a Unix socket.
    /// - Throws: ``StoreError`` naming the keyword and where its bad value came from (never the value).
    public init(parameters: ConnectionParameters) throws {
        let settings = parameters.settings
        let endpoints = try Self.endpoints(host: settings["host"], port: settings["port"])
        var sslMode: SSLMode?
        if let setting = settings["sslmode"] {
            guard let mode = SSLMode(rawValue: setting.value) else {
                throw setting.error("sslmode", "must be one of " + SSLMode.allCases.map(\.rawValue).joined(separator: ", "))
            }
            sslMode = mode
        }
        var connectTimeout = Duration.seconds(10)
        if let setting = settings["connect_timeout"] {
            guard let seconds = Int(setting.value), seconds > 0, seconds <= 3600 else {
                throw setting.error("connect_timeout", "must be a whole number of seconds from 1 to 3600")
            }
            connectTimeout = .seconds(seconds)
        }
        if let setting = settings["channel_binding"] {
            try Self.checkChannelBinding(setting)
        }
        let clientCertificate = settings["sslcert"]?.value
        let clientKey = settings["sslkey"]?.value
        guard (clientCertificate == nil) == (clientKey == nil) else {
            let setting = settings["sslcert"] ?? settings["sslkey"]
            throw setting?.error(
                clientCertificate == nil ? "sslkey" : "sslcert",
                "sslcert and sslkey go together: give both (a client certificate and its key), or neither"
            ) ?? StoreError(.invalidDatabaseURL, "sslcert and sslkey go together")
        }
        if let setting = settings["sslpassword"], clientKey == nil {
            throw setting.error("sslpassword", "the passphrase of an encrypted sslkey: give sslcert and sslkey with it")
        }
        let resolvedUser = settings["user"]?.value ?? NSUserName()
        guard !resolvedUser.isEmpty else {
            throw StoreError(.invalidDatabaseURL, "invalid database URL: user: no user name given and the operating-system user is unknown")
        }

        var targetSessionAttributes = TargetSessionAttributes.any
        if let setting = settings["target_session_attrs"] {
            guard let value = TargetSessionAttributes(rawValue: setting.value) else {
                throw setting.error(
                    "target_session_attrs",
                    "must be any, read-write or primary (Bugle writes, so it never chooses a standby)")
            }
            targetSessionAttributes = value
        }
        for endpoint in endpoints {
            guard case .unixSocket = endpoint else { continue }
            switch sslMode {
            case .require, .verifyCA, .verifyFull:
                let origin = settings["sslmode"].map { " (from \($0.origin))" } ?? ""
                throw StoreError(
                    .unsupportedConfiguration,
                    "sslmode=\(sslMode?.rawValue ?? "")\(origin) cannot be honoured over a Unix socket: "
                        + "PostgreSQL never offers TLS there; use sslmode=disable or a TCP host"
                )
            case .allow, .prefer, .disable, nil:
                break
            }
        }

        self.init(
            endpoint: endpoints[0],
            username: resolvedUser,
            password: settings["password"]?.value,
            database: settings["dbname"]?.value,
            sslMode: Self.sslMode(sslMode, on: endpoints[0]),
            sslRootCertificatePath: settings["sslrootcert"]?.value,
            applicationName: settings["application_name"]?.value ?? "bugle",
            connectTimeout: connectTimeout
        )
        self.sslCertificatePath = clientCertificate
        self.sslKeyPath = clientKey
        self.sslKeyPassword = settings["sslpassword"]?.value
        self.passwordFilePath = settings["passfile"]?.value
        if let setting = settings["password"], case .serviceFile(let path, let line, _) = setting.origin {
            self.passwordSource = .file(path: path, line: line)
        }
        if let setting = settings["options"] {
            do throws(SessionOptions.Problem) {
                self.segmentOptions = try SessionOptions.parse(setting.value)
            } catch {
                throw setting.error("options", error.description)
            }
        }
        self.settingOrigins = parameters.outsideOrigins
        self.ignoredSettings = parameters.ignored
        self.requestedSSLMode = sslMode
        self.alternateEndpoints = Array(endpoints.dropFirst())
        self.targetSessionAttributes = targetSessionAttributes
    }

    /// The TLS mode `requested` (or none) comes to on `endpoint`: `prefer` by default over TCP, `disable` over a Unix
    /// socket, which never offers TLS, so `allow` and `prefer` mean `disable` there.
    static func sslMode(_ requested: SSLMode?, on endpoint: Endpoint) -> SSLMode {
        guard case .unixSocket = endpoint else { return requested ?? .prefer }
        guard let requested, requested != .allow, requested != .prefer else { return .disable }
        return requested
    }

    /// The servers `host` and `port` name, in order, as libpq reads them: comma-separated hosts (names, IP literals, or
    /// absolute paths of socket directories), and one port for all of them or one per host (an empty one in the list is
    /// 5432). No host at all is ``defaultSocketDirectory``; no port is 5432.
    static func endpoints(host: ConnectionParameters.Setting?, port: ConnectionParameters.Setting?) throws -> [Endpoint] {
        let hosts = host.map { $0.value.split(separator: ",", omittingEmptySubsequences: false).map(String.init) } ?? [defaultSocketDirectory]
        if let host, hosts.contains(where: \.isEmpty) {
            throw host.error("host", "an empty name in the list")
        }
        var ports = [5432]
        if let port {
            ports = try port.value.split(separator: ",", omittingEmptySubsequences: false).map {
                // An empty port in a list is libpq's default (`postgres://a:5433,b/db` gives `port=5433,`).
                if $0.isEmpty, port.value.contains(",") { return 5432 }
                guard let number = Int($0), (1...65535).contains(number) else {
                    let hint = port.origin == .url ? " (if the password contains '/', '?', '#' or '@', percent-encode it)" : ""
                    throw port.error("port", "must be a number from 1 to 65535\(hint)")
                }
                return number
            }
        }
        if ports.count != 1, ports.count != hosts.count, let port {
            throw port.error("port", "give one port, or one for each host (\(hosts.count))")
        }
        return hosts.enumerated().map { index, name in
            let number = ports.count == 1 ? ports[0] : ports[index]
            return name.hasPrefix("/") ? .unixSocket(directory: name, port: number) : .tcp(host: name, port: number)
        }
    }

    /// `channel_binding`: `disable` and `prefer` are honoured (Bugle's client offers SCRAM-SHA-256 without channel
    /// binding); `require` cannot be, and is refused rather than silently weakened.
    private static func checkChannelBinding(_ setting: ConnectionParameters.Setting) throws {
        switch setting.value {
        case "disable", "prefer":
            return
        case "require":
            throw StoreError(
                .unsupportedConfiguration,
                "channel_binding=require (from \(setting.origin)) cannot be honoured: Bugle's PostgreSQL client "
                    + "(postgres-nio) authenticates with SCRAM-SHA-256 without channel binding. Use channel_binding=prefer "
                    + "with sslmode=verify-full, which authenticates the server by its certificate instead"
            )
        default:
            throw setting.error("channel_binding", "must be one of disable, prefer, require")
        }
    }
}
