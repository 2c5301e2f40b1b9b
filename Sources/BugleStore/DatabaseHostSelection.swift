import BugleCore
import Logging
import PostgresNIO

/// Picks the server a configuration with a host list (`host=db1,db2`, `PGHOST=db1,db2`) uses, as libpq does: the
/// first, in order, that accepts the login and satisfies `target_session_attrs` (`read-write`: its sessions can write;
/// `primary`: not a standby in recovery). So after a failover, the same URL finds the new primary when Bugle starts or
/// resumes. Each server's password is found for that server (the password file matches by host).
///
/// A configuration with one host and `target_session_attrs=any` is returned as it is, without a probe.
public enum DatabaseHostSelection {
    /// The configuration of the server to use, with its password resolved.
    /// - Parameters:
    ///   - environment: Where `PGPASSWORD` and the password file are found.
    /// - Throws: ``StoreError`` with code `connectionFailed` listing each server and why it was passed over.
    public static func choose(
        _ configuration: DatabaseConfiguration, environment: [String: String], logger: Logger
    ) async throws -> DatabaseConfiguration {
        let candidates = configuration.candidates.map { $0.resolvingPassword(environment: environment) }
        if candidates.count == 1, configuration.targetSessionAttributes == .any { return candidates[0] }
        var passedOver: [String] = []
        for candidate in candidates {
            let limit = candidate.connectTimeout + .seconds(5)
            do {
                if let reason = try await OperationDeadline.run(within: limit, { try await Self.unsuitability(of: candidate, logger: logger) }) {
                    passedOver.append("\(candidate.endpointDescription): \(reason)")
                    continue
                }
                if !passedOver.isEmpty {
                    logger.warning("using the database server \(candidate.endpointDescription); passed over \(passedOver.joined(separator: "; "))")
                }
                return candidate
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                passedOver.append("\(candidate.endpointDescription): \(StoreError.safeDescription(of: error))" + candidate.refusedLoginNote(error))
            }
        }
        throw StoreError(
            .connectionFailed,
            "no database server of the list is usable (target_session_attrs=\(configuration.targetSessionAttributes.rawValue)): "
                + passedOver.joined(separator: "; "))
    }

    /// Why `candidate` will not do, or nil when it will; throws when it cannot be reached or refuses the login.
    private static func unsuitability(of candidate: DatabaseConfiguration, logger: Logger) async throws -> String? {
        let (connection, _) = try await Database.connect(candidate, logger: logger)
        do {
            let writability = try await ServerWritability.read(connection.answeredQuery(ServerWritability.query, logger: logger))
            try? await connection.close()
            switch candidate.targetSessionAttributes {
            case .readWrite where writability.readOnly: return "its sessions are read-only (target_session_attrs=read-write)"
            case .primary where writability.standby: return "a standby in recovery (target_session_attrs=primary)"
            case .any, .readWrite, .primary: return nil
            }
        } catch {
            try? await connection.close()
            throw error
        }
    }
}
