import BugleCore
import BugleRunner
import BugleStore
import Foundation
import Logging
import PostgresNIO

/// Thrown by ``RunExecution/execute(campaign:runID:client:lanes:output:worker:mode:leaveWhenIdle:idleGrace:probeFirst:logger:)``
/// when its worker stopped because the database stopped answering (no lease renewal for half the TTL) and
/// `--database-outage-limit` is above 0: the command then waits for the database and resumes the run
/// (``DatabaseOutageRecovery``).
struct DatabaseLost: Error, CustomStringConvertible {
    let runID: Int64
    /// The last ledger error, safely described, when the worker ended on one.
    let detail: String?
    /// The writes the worker gave up on its old connections, to be made through a new session first.
    let handover: Handover?
    /// False when the operator stopped the command (Ctrl-C, SIGTERM) during the outage: the handover is written, and
    /// the command then ends (exit 3) instead of going on with the run.
    var goesOn = true

    var description: String { "run \(runID): the database stopped answering" + (detail.map { " (\($0))" } ?? "") }
}

/// Wiring: `run`, `resume` and `worker` ride through a database outage (a restart, a failover). When their run stops
/// with ``DatabaseLost``, they wait for the database to answer again (for a host list with `target_session_attrs`: for
/// the server that now will do, such as a promoted standby), make there the ledger writes the stopped worker handed
/// over, then go on with the run as `bugle resume` (or, for a worker, `bugle worker`) would, in the same process.
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
        var stumbles = 0
        while true {
            try await waitForDatabase(options, after: lost, limit: limit, json: json, logger: logger)
            // Ctrl-C or SIGTERM while waiting: what the worker held is written (above), and the command ends.
            if SignalTrap.shared.interrupted { lost.goesOn = false }
            guard lost.goesOn else {
                Console(jsonOnStdout: json).say("run \(lost.runID): stopped as asked; `bugle resume \(lost.runID)` goes on")
                return ExitCodes.paused
            }
            do {
                return try await again(lost.runID)
            } catch let error as DatabaseLost {
                lost = error
                stumbles = 0
            } catch where stumbles < 3 && isDatabaseError(error) {
                // A server just back may still turn a session away; what was handed over is written already.
                stumbles += 1
                lost = DatabaseLost(runID: lost.runID, detail: StoreError.safeDescription(of: error), handover: nil)
            }
        }
    }

    /// ``riding(_:limit:json:logger:_:then:)`` for a command that acts on one stored run: `body` runs first with
    /// `afterOutage` false, and after each outage with it true.
    static func riding(
        _ options: GlobalOptions,
        runID: Int64,
        limit: Int,
        json: Bool,
        logger: Logger,
        _ body: (_ runID: Int64, _ afterOutage: Bool) async throws -> Int32
    ) async throws -> Int32 {
        try await riding(options, limit: limit, json: json, logger: logger) {
            try await body(runID, false)
        } then: { runID in
            try await body(runID, true)
        }
    }

    /// Whether `error` came from PostgreSQL or the connection to it (not from the run's own logic).
    private static func isDatabaseError(_ error: any Error) -> Bool {
        if error is PSQLError || error is PostgresTransactionError { return true }
        guard let error = error as? StoreError else { return false }
        if error.code == .connectionFailed || error.code == .query { return true }
        // The server ended the session under another step (the schema check as the command starts again): a worker
        // back first and taking the run over ends the sessions of this process's expired lease, new ones included.
        return StoreError.isEndedSession(error)
    }

    /// Returns once a session opens (the server chosen, connected, its schema current and writable through this
    /// login) and the handed-over writes are made there, retrying every 0.5–2 s.
    private static func waitForDatabase(_ options: GlobalOptions, after lost: DatabaseLost, limit: Int, json: Bool, logger: Logger) async throws {
        let console = Console(jsonOnStdout: json)
        console.say("\(lost); waiting up to \(limit) s for it to answer again (of a host list: for the server that now will do)")
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(limit)
        var delay = Duration.milliseconds(500)
        while true {
            do {
                try await DatabaseSession.withServer(options, logger: logger) { client, configuration in
                    console.say(
                        "run \(lost.runID): the database answers again (\(configuration.endpointDescription)); "
                            + (lost.goesOn && !SignalTrap.shared.interrupted ? "resuming the run" : "recording what this worker held before stopping"))
                    if let handover = lost.handover {
                        try await write(handover, client: client, console: console, logger: logger)
                    }
                }
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
                delay = min(delay * 2, .seconds(2))
            }
        }
    }

    /// Records the handed-over outcomes and hands back the lost claims' rows under the stopped worker's lease. When the
    /// lease is gone there (another worker reaped it), nothing is written: that worker's takeover already decided them.
    private static func write(_ handover: Handover, client: PostgresClient, console: Console, logger: Logger) async throws {
        let store = PostgresCampaignStore(client: client, sessionTag: DatabaseSession.sessionTag, logger: logger)
        let runID = handover.lease.runID
        guard try await store.record(handover.lease, outcomes: handover.outcomes) else {
            console.say("run \(runID): the \(handover.outcomes.count) outcome(s) this worker held were not written: another worker took its recipients over")
            return
        }
        let released = try await store.releaseUnheld(handover.lease, claimIDs: handover.lostClaimIDs)
        console.say(
            "run \(runID): wrote the \(handover.outcomes.count) outcome(s) this worker held"
                + (released > 0 ? "; handed back \(released) claimed recipient(s) it never sent" : ""))
    }
}
