import Foundation
import PostgresNIO

/// Where a ``DatabaseConfiguration``'s password came from, so a refused login can say which password was tried
/// (never the password itself).
public enum PasswordSource: Sendable, Hashable {
    /// The URL's user info or its `password` parameter.
    case url
    /// The `PGPASSWORD` environment variable.
    case environment
    /// A line of a password file, or of a service file's section.
    case file(path: String, line: Int)
    /// None was found; the text says where Bugle looked.
    case missing(looked: String)
    /// A password file has a line for this server but cannot be used; the text says why and what to do.
    case unusableFile(String)

    /// One sentence for a refused login.
    public var explanation: String {
        switch self {
        case .url: return "the password came from the database URL"
        case .environment: return "the password came from PGPASSWORD"
        case .file(let path, let line): return "the password came from \(path) line \(line)"
        case .missing(let looked): return "no password was given: \(looked)"
        case .unusableFile(let message): return "no password was given: \(message)"
        }
    }
}

extension DatabaseConfiguration {
    /// This configuration with its password found as libpq finds it when the URL has none: `PGPASSWORD`, then the
    /// password file (the URL's `passfile`, else `PGPASSFILE`, else `~/.pgpass`; see ``PasswordFile``). Sets
    /// ``passwordSource`` either way.
    ///
    /// Nothing here fails: a password file that cannot be used is recorded as ``PasswordSource/unusableFile(_:)``,
    /// which the caller logs, and which a refused login then explains. A server that asks for no password (trust,
    /// peer or certificate authentication) is still reached.
    /// - Parameters:
    ///   - environment: Where `PGPASSWORD`, `PGPASSFILE` and `HOME` are read.
    /// - Returns: The configuration with ``password`` and ``passwordSource`` set.
    public func resolvingPassword(environment: [String: String]) -> DatabaseConfiguration {
        var copy = self
        if self.password != nil {
            copy.passwordSource = self.passwordSource ?? .url
            return copy
        }
        if let password = environment["PGPASSWORD"], !password.isEmpty {
            copy.password = password
            copy.passwordSource = .environment
            return copy
        }
        let path = Self.passwordFilePath(explicit: self.passwordFilePath, environment: environment)
        let key = PasswordFile.Key(self)
        do {
            switch try PasswordFile(path: path).lookup(key) {
            case .password(let password, let line):
                copy.password = password
                copy.passwordSource = .file(path: path, line: line)
            case .noFile:
                copy.passwordSource = .missing(
                    looked: "none in the URL, PGPASSWORD is not set, and there is no password file \(path)")
            case .noMatch:
                copy.passwordSource = .missing(
                    looked: "none in the URL, PGPASSWORD is not set, and no line of \(path) matches \(key.description)")
            }
        } catch let error as StoreError {
            copy.passwordSource = .unusableFile(error.message)
        } catch {
            copy.passwordSource = .unusableFile("cannot read the password file \(path)")
        }
        return copy
    }

    /// The password file libpq would read: `passfile`, else `PGPASSFILE`, else `.pgpass` in `HOME` (or the account's
    /// home directory).
    static func passwordFilePath(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let file = environment["PGPASSFILE"], !file.isEmpty { return file }
        return ConnectionParameters.homeFile(".pgpass", environment: environment)
    }

    /// What to add to a failed login's message: where the password came from (``passwordSource``) when `error` is
    /// the login refused for its credentials, else nothing.
    func refusedLoginNote(_ error: any Error) -> String {
        guard Self.isRefusedLogin(error), let source = passwordSource else { return "" }
        return "; " + source.explanation
    }

    /// Whether `error` is the server (or the client) refusing this login for its credentials: a wrong password
    /// (SQLSTATE 28P01; PgBouncer says 08P01 "SASL authentication failed"), a rejected authorization (28000), or a
    /// password asked for and none given.
    static func isRefusedLogin(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        if error.code == .authMechanismRequiresPassword { return true }
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state == "28P01" || state == "28000" || error.serverInfo?[.message]?.contains("authentication failed") == true
    }
}
