import ArgumentParser
import BugleCore
import BugleStore
import Foundation

/// The one place errors become exit codes (documented in the README).
enum ExitCodes {
    /// 0: the run completed.
    static let completed: Int32 = 0
    /// 1: usage or validation error; nothing was written.
    static let usage: Int32 = 1
    /// 2: the run failed or was halted.
    static let failed: Int32 = 2
    /// 3: the run is paused and can be resumed.
    static let paused: Int32 = 3

    /// Runs a command body, printing errors to stderr and mapping them to Bugle's exit codes.
    static func guarding(_ body: () async throws -> Int32) async throws {
        let code: Int32
        do {
            code = try await body()
        } catch where StoreError.isStatementPoolingRefusal(error) {
            // A pooler switched to statement mode under a command that had connected: said as at connect.
            printError("\(StoreError.Code.unsupportedConfiguration): \(StoreError.statementPoolingRefusal)")
            code = failed
        } catch let error as ConfigurationError {
            printError(error.description)
            code = usage
        } catch let error as UsageError {
            printError(error.message)
            code = usage
        } catch let error as SegmentError {
            printError(error.description)
            code = failed
        } catch let error as StoreError where error.code == .invalidDatabaseURL {
            // A URL, service file or libpq variable that cannot be parsed: a usage error, found before connecting.
            printError(error.description)
            code = usage
        } catch let error as StoreError {
            printError(error.description + privilegeHint(error))
            code = failed
        } catch let error as FileWriteError {
            printError(error.description)
            code = failed
        } catch let error as ExitCode {
            throw error
        } catch {
            // PostgreSQL's errors print a generic line of their own; their SQLSTATE and message say what happened.
            printError("error: \(StoreError.safeDescription(of: error))" + privilegeHint(error))
            code = failed
        }
        if code != completed { throw ExitCode(code) }
    }

    /// What to do when the server refused Bugle's login a privilege (SQLSTATE 42501 `permission denied for table
    /// schema_migrations`, `… for schema bugle`): segment SQL's own refusals are ``SegmentError``s, never here.
    static func privilegeHint(_ error: any Error) -> String {
        guard StoreError.sqlState(of: error) == "42501",
            StoreError.serverMessage(of: error)?.hasPrefix("permission denied for ") == true
        else { return "" }
        return "; this database login lacks privileges on Bugle's schema: connect as the login that owns schema bugle "
            + "and its tables (the one that ran `bugle db migrate` on this database; on a database without the schema yet, "
            + "a login that may create schemas there), since migrations alter tables only their owner may alter"
    }

    static func printError(_ message: String) {
        FileHandle.standardError.write(Data(("bugle: " + message + "\n").utf8))
    }
}

/// A usage mistake found after parsing (missing file, bad combination): exit 1, nothing written.
struct UsageError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
