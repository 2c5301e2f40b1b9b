import Foundation

/// libpq's connection service file (`pg_service.conf`): sections `[name]`, each of `keyword=value` lines, `#` starting
/// a comment line. A service names a set of connection settings, so `postgres://?service=prod` (or `PGSERVICE=prod`)
/// reaches the server the operators described once.
///
/// Found as libpq finds it: the per-user file (`PGSERVICEFILE`, else `~/.pg_service.conf`) first; when the service
/// is not there, the system file `pg_service.conf` in `PGSYSCONFDIR` (Debian's libpq: `/etc/postgresql-common`).
/// A missing file is skipped; a service found in neither is an error. As libpq does, the first value of a keyword in
/// the section wins, a line without `=` or with a keyword libpq does not know is an error naming the file and line,
/// and `service` cannot name another service. A keyword libpq knows but Bugle does not read is ignored or refused as
/// `LibpqKeywordPolicy` says, as it is in the URL and the environment.
struct ServiceFile: Sendable, Hashable {
    /// The system directory libpq's Debian build reads `pg_service.conf` from when `PGSYSCONFDIR` is not set.
    static let defaultSystemDirectory = "/etc/postgresql-common"

    /// The file's path.
    var path: String

    /// The settings of `service`: from the per-user file when it has the section, else from the system file.
    /// - Throws: ``StoreError`` when neither has the section, or a file that has it cannot be read or holds a bad
    ///   line in it.
    static func settings(of service: String, environment: [String: String]) throws -> ConnectionParameters {
        let user = environment["PGSERVICEFILE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ConnectionParameters.homeFile(".pg_service.conf", environment: environment)
        let directory = environment["PGSYSCONFDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultSystemDirectory
        let system = ConnectionParameters.file("pg_service.conf", in: directory)
        for path in [user, system] {
            if let settings = try ServiceFile(path: path).section(service) {
                return settings
            }
        }
        throw StoreError(
            .invalidDatabaseURL,
            "database service \(Self.printable(service)) is not defined: neither \(user) nor \(system) has a [\(Self.printable(service))] section"
        )
    }

    /// The section `[service]`'s settings, or `nil` when the file does not exist or has no such section.
    func section(_ service: String) throws -> ConnectionParameters? {
        guard FileManager.default.fileExists(atPath: self.path) else { return nil }
        guard let data = FileManager.default.contents(atPath: self.path), let text = String(data: data, encoding: .utf8) else {
            throw StoreError(.invalidDatabaseURL, "cannot read the database service file \(self.path)")
        }
        var settings: ConnectionParameters?
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.drop(while: { $0 == " " || $0 == "\t" })
                .reversed().drop(while: { $0 == " " || $0 == "\t" || $0 == "\r" }).reversed()
            let number = index + 1
            if line.isEmpty || line.first == "#" { continue }
            if line.first == "[" {
                if settings != nil { break }
                if line.last == "]", String(line.dropFirst().dropLast()) == service {
                    settings = ConnectionParameters()
                }
                continue
            }
            guard settings != nil else { continue }
            try self.read(String(line), line: number, service: service, into: &settings)
        }
        return settings
    }

    /// Adds one `keyword=value` line of the wanted section (the first value of a keyword wins); a libpq keyword Bugle
    /// does not read is ignored or refused as `LibpqKeywordPolicy` says.
    private func read(_ line: String, line number: Int, service: String, into settings: inout ConnectionParameters?) throws {
        let place = "database service file \(self.path) line \(number)"
        guard let equals = line.firstIndex(of: "=") else {
            throw StoreError(.invalidDatabaseURL, "\(place): expected keyword=value")
        }
        let keyword = String(line[..<equals])
        let value = String(line[line.index(after: equals)...])
        if keyword == "service" {
            throw StoreError(.invalidDatabaseURL, "\(place): service: a service cannot name another service")
        }
        let origin = ConnectionParameters.Origin.serviceFile(path: self.path, line: number, service: service)
        guard ConnectionParameters.keywords.contains(keyword) else {
            if try settings?.consider(keyword, value, origin: origin) == true { return }
            throw StoreError(.invalidDatabaseURL, "\(place): \(Self.printable(keyword)): unknown keyword (no spaces around '=')")
        }
        if settings?[keyword] == nil {
            settings?.set(keyword, value, origin: origin)
        }
    }

    /// A name echoed in an error only when it looks like one, so a mangled line cannot put a password in a message.
    static func printable(_ name: String) -> String {
        let isPlain = name.count <= 63 && name.allSatisfy { $0.isLetter || $0.isNumber || "_-.".contains($0) }
        return isPlain ? name : "(unprintable name)"
    }
}
