import BugleStore
import Foundation
import Logging

/// Thrown by ``RunExecution/execute(campaign:runID:client:lanes:output:worker:mode:leaveWhenIdle:idleGrace:serverReplaced:logger:)``
/// when its worker stopped because the database stopped answering (no lease renewal for half the TTL) and
/// `--database-outage-limit` is above 0: the command then waits for the database and resumes the run
/// (``DatabaseOutageRecovery``).
struct DatabaseLost: Error, CustomStringConvertible {
    let runID: Int64
    /// The last ledger error, safely described, when the worker ended on one.
    let detail: String?

    var description: String { "run \(runID): the database stopped answering" + (detail.map { " (\($0))" } ?? "") }
}

/// Wiring: `run`, `resume` and `worker` ride through a database outage (a restart, a failover). When their run stops
/// with ``DatabaseLost``, they wait for the database to answer again (for a host list with `target_session_attrs`: for
/// the server that now will do, such as a promoted standby), then go on with the run as `bugle resume` (or, for a
/// worker, `bugle worker`) would, in the same process. What the stopped worker held follows the run's ambiguous policy.
enum DatabaseOutageRecovery {
    /// Runs `first`; each time it, or a later `again`, stops with ``DatabaseLost``, waits for the database (at most
    /// `limit` seconds each time), then runs `again` with the run's id.
    /// - Throws: ``StoreError`` (`connectionFailed`) when the database did not answer within `limit` seconds.
    static func riding(
        _ options: GlobalOptions,
        limit: Int,
        json: Bool,
        logger: Logger,
        _ first: () async throws -> Int32,
        then again: (Int64) async throws -> Int32
    ) async throws -> Int32 {
        var lost: DatabaseLost
        do {
            return try await first()
        } catch let error as DatabaseLost {
            lost = error
        }
        while true {
            try await waitForDatabase(options, after: lost, limit: limit, json: json, logger: logger)
            do {
                return try await again(lost.runID)
            } catch let error as DatabaseLost {
                lost = error
            }
        }
    }

    /// Returns once a session opens (the server chosen, connected, its schema current and writable through this
    /// login), retrying every 1–5 s.
    private static func waitForDatabase(_ options: GlobalOptions, after lost: DatabaseLost, limit: Int, json: Bool, logger: Logger) async throws {
        let console = Console(jsonOnStdout: json)
        console.say("\(lost); waiting up to \(limit) s for it to answer again (of a host list: for the server that now will do)")
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(limit)
        var delay = Duration.seconds(1)
        while true {
            do {
                let server = try await DatabaseSession.withServer(options, logger: logger) { _, configuration in configuration.endpointDescription }
                console.say("run \(lost.runID): the database answers again (\(server)); resuming the run")
                return
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                let why = StoreError.safeDescription(of: error)
                guard clock.now + delay < deadline else {
                    throw StoreError(
                        .connectionFailed,
                        "\(lost); it did not answer again within \(limit) s (last: \(why)); `bugle resume \(lost.runID)` goes on once it does")
                }
                logger.notice("the database does not answer yet", metadata: ["error": "\(why)"])
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }
}
