import Logging
import PostgresNIO

/// Marks a run's segment as being read, for as long as the process reading it lives: a session-level advisory lock
/// held on one pooled connection while the body runs. It is released when the body ends, or, when the process dies,
/// as soon as PostgreSQL sees its connection close. `bugle resume` of a run left `materializing` takes it without
/// waiting: held means the segment is still being read elsewhere; free means its reader died, and the run is
/// materialized again from zero.
public enum MaterializationLock {
    /// The first key of every run's lock (ASCII "bugm"); the second is the run id.
    static let namespace: Int32 = 0x6275_676D

    /// Runs `body` holding run `runID`'s lock.
    /// - Parameters:
    ///   - wait: Wait for the lock (a new run: nobody else can hold it), or give up at once.
    /// - Returns: `body`'s result, or nil when `wait` is false and another session holds the lock.
    public static func holding<R: Sendable>(
        runID: Int64, client: PostgresClient, wait: Bool, logger: Logger, _ body: () async throws -> R
    ) async throws -> R? {
        let key = Int32(truncatingIfNeeded: runID)
        return try await client.withConnection { connection -> R? in
            if wait {
                _ = try await connection.query("SELECT pg_advisory_lock(\(namespace), \(key))", logger: logger).collect()
            } else {
                var taken = false
                let rows = try await connection.query("SELECT pg_try_advisory_lock(\(namespace), \(key))", logger: logger)
                for try await (value,) in rows.decode((Bool,).self) { taken = value }
                guard taken else { return nil }
            }
            let result: R
            do {
                result = try await body()
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(namespace), \(key))", logger: logger).collect()
                throw error
            }
            _ = try await connection.query("SELECT pg_advisory_unlock(\(namespace), \(key))", logger: logger).collect()
            return result
        }
    }
}
