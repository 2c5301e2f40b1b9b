import Foundation

/// libpq's connection keywords (`host`, `port`, `dbname`, …), each with where it was given: the database URL, a
/// service file's line, or an environment variable. ``DatabaseConfiguration/init(parameters:)`` turns them into a
/// configuration, and its errors name the place a bad value came from.
///
/// As libpq does, a keyword the URL gives wins over the named service's (``ServiceFile``), which wins over the
/// environment's (`PGHOST`, `PGPORT`, …); see ``fillingDefaults(environment:)``.
public struct ConnectionParameters: Sendable, Hashable {
    /// Where a keyword's value was given.
    public enum Origin: Sendable, Hashable, CustomStringConvertible {
        /// The database URL (its authority, path or query).
        case url
        /// A line of a service file, in the section of the named service.
        case serviceFile(path: String, line: Int, service: String)
        /// An environment variable.
        case environment(variable: String)

        /// For messages: "the URL", "PGHOST", "service prod (/etc/pg_service.conf line 4)".
        public var description: String {
            switch self {
            case .url: return "the URL"
            case .serviceFile(let path, let line, let service): return "service \(service) (\(path) line \(line))"
            case .environment(let variable): return variable
            }
        }
    }

    /// One keyword's value and origin.
    public struct Setting: Sendable, Hashable {
        public var value: String
        public var origin: Origin

        /// A parse error naming where the bad value came from, never the value.
        func error(_ keyword: String, _ problem: String) -> StoreError {
            switch self.origin {
            case .url:
                return StoreError(.invalidDatabaseURL, "invalid database URL: \(keyword): \(problem)")
            case .serviceFile(let path, let line, let service):
                return StoreError(
                    .invalidDatabaseURL, "invalid database service \(service): \(path) line \(line): \(keyword): \(problem)")
            case .environment(let variable):
                return StoreError(.invalidDatabaseURL, "invalid database setting: \(variable) (\(keyword)): \(problem)")
            }
        }
    }

    /// The keywords Bugle reads, in any source. Anything else is refused by name.
    public static let keywords: Set<String> = [
        "host", "port", "user", "password", "dbname", "sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword",
        "passfile", "application_name", "connect_timeout", "channel_binding", "service", "target_session_attrs", "options",
    ]

    /// libpq's environment variables for the keywords above, read when neither the URL nor the service gives the
    /// keyword. `PGPASSWORD` and `PGPASSFILE` are read later, by ``DatabaseConfiguration/resolvingPassword(environment:)``.
    public static let environmentVariables: [(variable: String, keyword: String)] = [
        ("PGHOST", "host"), ("PGPORT", "port"), ("PGDATABASE", "dbname"), ("PGUSER", "user"),
        ("PGSSLMODE", "sslmode"), ("PGSSLROOTCERT", "sslrootcert"), ("PGSSLCERT", "sslcert"), ("PGSSLKEY", "sslkey"),
        ("PGAPPNAME", "application_name"), ("PGCONNECT_TIMEOUT", "connect_timeout"),
        ("PGCHANNELBINDING", "channel_binding"), ("PGTARGETSESSIONATTRS", "target_session_attrs"), ("PGOPTIONS", "options"),
    ]

    /// The settings by keyword.
    public private(set) var settings: [String: Setting] = [:]
    /// libpq keywords given but not used (they only tune the connection; see `LibpqKeywordPolicy`), with their origins,
    /// for a notice. Never a value.
    public private(set) var ignored: [String] = []

    /// No settings.
    public init() {}

    /// The value of `keyword`, if given.
    public subscript(keyword: String) -> String? {
        self.settings[keyword]?.value
    }

    /// Sets `keyword` (replacing an earlier value: within one URL, the last one wins, as in libpq).
    mutating func set(_ keyword: String, _ value: String, origin: Origin) {
        self.settings[keyword] = Setting(value: value, origin: origin)
    }

    /// Takes a keyword Bugle does not read: notes it when it only tunes the connection, refuses it when it asks for a
    /// protection Bugle cannot give, and reports whether libpq knows it at all (false: the caller's own error).
    mutating func consider(_ keyword: String, _ value: String, origin: Origin) throws -> Bool {
        switch LibpqKeywordPolicy.verdict(keyword, value) {
        case .ignored:
            self.ignored.append("\(keyword) (from \(origin))")
            return true
        case .refused(let why):
            throw Setting(value: value, origin: origin).error(keyword, "not supported: " + why)
        case .unknown:
            return false
        }
    }

    /// Forgets `keyword` (an empty value in the URL counts as none).
    mutating func remove(_ keyword: String) {
        self.settings[keyword] = nil
    }

    /// These parameters with what they lack taken from the service they name (`service`, else `PGSERVICE`), then from
    /// the environment, as libpq takes its defaults. An empty variable counts as unset.
    /// - Parameter environment: Where `PGSERVICE`, `PGSERVICEFILE`, `PGSYSCONFDIR`, `HOME` and the variables of
    ///   ``environmentVariables`` are read.
    /// - Throws: ``StoreError`` when the service is found nowhere, or its file cannot be read or has a bad line.
    public func fillingDefaults(environment: [String: String]) throws -> ConnectionParameters {
        var filled = self
        let service = self.settings["service"]?.value ?? environment["PGSERVICE"].flatMap { $0.isEmpty ? nil : $0 }
        if let service {
            let section = try ServiceFile.settings(of: service, environment: environment)
            for (keyword, setting) in section.settings where filled.settings[keyword] == nil {
                filled.settings[keyword] = setting
            }
            filled.ignored += section.ignored
        }
        for (variable, keyword) in Self.environmentVariables where filled.settings[keyword] == nil {
            if let value = environment[variable], !value.isEmpty {
                filled.set(keyword, value, origin: .environment(variable: variable))
            }
        }
        for (variable, keyword) in LibpqKeywordPolicy.environmentVariables {
            if let value = environment[variable], !value.isEmpty {
                _ = try filled.consider(keyword, value, origin: .environment(variable: variable))
            }
        }
        return filled
    }

    /// `name` in `directory`, with one `/` between.
    static func file(_ name: String, in directory: String) -> String {
        (directory.hasSuffix("/") ? directory : directory + "/") + name
    }

    /// `name` in the home directory as libpq finds it: `HOME`, else the account's.
    static func homeFile(_ name: String, environment: [String: String]) -> String {
        file(name, in: environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory())
    }

    /// Which keywords came from outside the URL, for `bugle db status`: "host (line 2), port (line 3) from service prod
    /// in /etc/postgresql-common/pg_service.conf; user from PGUSER". `nil` when the URL gave everything. Never a value.
    public var outsideOrigins: String? {
        var services: [String: [(line: Int, keyword: String)]] = [:]
        var parts: [String] = []
        for (keyword, setting) in self.settings {
            switch setting.origin {
            case .url:
                continue
            case .serviceFile(let path, let line, let service):
                services["service \(service) in \(path)", default: []].append((line, keyword))
            case .environment(let variable):
                parts.append("\(keyword) from \(variable)")
            }
        }
        for (source, keywords) in services {
            let listed = keywords.sorted { $0.line < $1.line }.map { "\($0.keyword) (line \($0.line))" }
            parts.append(listed.joined(separator: ", ") + " from " + source)
        }
        return parts.isEmpty ? nil : parts.sorted().joined(separator: "; ")
    }
}
