import Foundation

/// The PostgreSQL server programs the embedded cluster needs: `initdb`, `pg_ctl` and `postgres`, from one directory.
public struct PostgresBinaries: Sendable, Hashable {
    /// The directory holding all three programs.
    public var directory: String

    /// Absolute path of `initdb`.
    public var initdb: String { self.directory + "/initdb" }
    /// Absolute path of `pg_ctl`.
    public var pgCtl: String { self.directory + "/pg_ctl" }
    /// Absolute path of `postgres`.
    public var postgres: String { self.directory + "/postgres" }

    /// Uses the programs in `directory`.
    /// - Parameter directory: A directory that contains `initdb`, `pg_ctl` and `postgres`.
    public init(directory: String) {
        self.directory = directory
    }

    /// Finds the programs: each `PATH` entry first, then `/usr/lib/postgresql/<version>/bin` with the highest
    /// version (Debian's layout, where they are not on `PATH`).
    /// - Parameter environment: The environment whose `PATH` is searched.
    /// - Returns: The first directory holding all three programs.
    /// - Throws: ``StoreError`` with code `postgresNotInstalled`, telling the user to install the Debian package
    ///   `postgresql`.
    public static func locate(environment: [String: String]) throws -> PostgresBinaries {
        let fileManager = FileManager.default
        func complete(_ directory: String) -> Bool {
            ["initdb", "pg_ctl", "postgres"].allSatisfy { fileManager.isExecutableFile(atPath: directory + "/" + $0) }
        }
        let pathEntries = (environment["PATH"] ?? "").split(separator: ":").map(String.init).filter { !$0.isEmpty }
        if let found = pathEntries.first(where: complete) {
            return PostgresBinaries(directory: found)
        }
        let debianRoot = "/usr/lib/postgresql"
        let versions = ((try? fileManager.contentsOfDirectory(atPath: debianRoot)) ?? [])
            .compactMap { name -> (name: String, key: [Int])? in
                let key = name.split(separator: ".").compactMap { Int($0) }
                return key.isEmpty ? nil : (name, key)
            }
            .sorted { $0.key.lexicographicallyPrecedes($1.key) }
            .reversed()
        for version in versions where complete("\(debianRoot)/\(version.name)/bin") {
            return PostgresBinaries(directory: "\(debianRoot)/\(version.name)/bin")
        }
        throw StoreError(
            .postgresNotInstalled,
            "PostgreSQL server programs (initdb, pg_ctl, postgres) were not found on PATH or in "
                + "/usr/lib/postgresql/*/bin. Install the Debian package `postgresql` "
                + "(for example `apt-get install -y postgresql`), or set BUGLE_DATABASE_URL to use an existing server."
        )
    }
}
