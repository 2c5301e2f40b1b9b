import BugleCore
@testable import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

/// postgres-nio 1.33.2 never answers a statement written to a connection the server has already closed (its write
/// fails with no promise to fail). Bugle's transactions and held connections check first; these end the session under
/// them and expect an error within seconds. A hang shows as `OperationDeadline.Exceeded` after 30 s.
@Suite("Sessions the server ends under a transaction or a held connection (real PostgreSQL)", .serialized)
struct OpenConnectionTests {
    static let logger = LedgerTestSupport.logger

    @Test("a transaction whose session is ended during a statement fails at once, and the client goes on (postgres-nio's own hung in its ROLLBACK)")
    func transactionSessionEnded() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            let outcome = try await OperationDeadline.run(within: .seconds(30)) { () -> String in
                do {
                    try await client.withOpenTransaction(logger: Self.logger) { connection in
                        var pid: Int32 = 0
                        for try await (value,) in try await connection.query("SELECT pg_backend_pid()", logger: Self.logger).decode((Int32,).self) {
                            pid = value
                        }
                        // Another pooled connection ends this session while its statement runs: once the session is
                        // seen running it (a fixed delay was once longer than the statement on a loaded machine).
                        async let ended: Void = {
                            for _ in 0..<1500 {
                                let running = try? await LedgerTestSupport.scalar(
                                    client, "SELECT count(*)::bigint FROM pg_stat_activity WHERE pid = \(pid) AND query LIKE 'SELECT pg_sleep%'",
                                    as: Int64.self)
                                if running == 1 { break }
                                try? await Task.sleep(for: .milliseconds(20))
                            }
                            _ = try? await client.answeredQuery("SELECT pg_terminate_backend(\(pid))", logger: Self.logger).collect()
                        }()
                        do {
                            _ = try await connection.query("SELECT pg_sleep(20)", logger: Self.logger).collect()
                        } catch {
                            await ended
                            throw error
                        }
                        await ended
                    }
                    return "committed"
                } catch {
                    return StoreError.sqlState(of: error) ?? "\(error)"
                }
            }
            #expect(outcome == "57P01", "\(outcome)")
            // The pool may hand the ended session's connection out once more (its next query fails at once): it goes
            // on within a few attempts.
            #expect(await Self.answers(client))
        }
    }

    @Test("the segment's reader whose session is ended between pages fails at once instead of waiting for ever for the next page")
    func readerSessionEnded() async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            try await LedgerTestSupport.seed(client, count: 5000)
            let segment = LedgerTestSupport.campaign(pageSize: 250).segment
            let outcome = try await OperationDeadline.run(within: .seconds(30)) { () -> String in
                let reader = SegmentReader(client: client, segment: segment, useReaderRole: true, logger: Self.logger)
                var pages = 0
                do {
                    _ = try await reader.read { _ in
                        pages += 1
                        guard pages == 1 else { return }
                        // End the reader's session while this page is handled, and wait until it is gone before the
                        // reader asks for its next page. Its producer may be fetching a page ahead at this moment (the
                        // session active, not idle): every session of this database inside a transaction but this one
                        // is ended, again, until none is left (an earlier version ended only idle ones, once, and
                        // then waited for ever when the session had been active).
                        while try await LedgerTestSupport.scalar(
                            client,
                            """
                            SELECT count(pg_terminate_backend(pid))::bigint FROM pg_stat_activity
                             WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
                            """,
                            as: Int64.self
                        ) ?? 0 > 0 {
                            try await Task.sleep(for: .milliseconds(20))
                        }
                    }
                    return "read \(pages) pages"
                } catch {
                    return "failed after \(pages) page(s): \(error)"
                }
            }
            #expect(outcome.hasPrefix("failed after"), "\(outcome)")
            #expect(await Self.answers(client))
        }
    }

    /// The race the open check cannot close: the connection closes after the check, before the statement is written.
    /// Here the statement (or the materialization's `COPY`) is sent past the check on a connection already closed,
    /// which postgres-nio would leave unanswered for ever; the watch fails it.
    @Test("a statement or a COPY that reaches its connection after the connection closed fails within seconds instead of waiting for ever", arguments: ["statement", "copy"])
    func statementAfterClose(_ kind: String) async throws {
        try await LedgerTestSupport.withFreshDatabase { client in
            _ = try await client.answeredQuery("CREATE TABLE bugle.copied (n int)", logger: Self.logger).collect()
            let outcome = try await OperationDeadline.run(within: .seconds(30)) { () -> String in
                try await client.withConnection { connection in
                    var pid: Int32 = 0
                    for try await (value,) in try await connection.query("SELECT pg_backend_pid()", logger: Self.logger).decode((Int32,).self) {
                        pid = value
                    }
                    _ = try await client.answeredQuery("SELECT pg_terminate_backend(\(pid))", logger: Self.logger).collect()
                    try? await connection.closeFuture.get()
                    do {
                        if kind == "copy" {
                            try await connection.watchedCopy(table: "copied", columns: ["n"], logger: Self.logger) { writer in
                                try await writer.write(ByteBuffer(string: "1\n"))
                            }
                        } else {
                            _ = try await connection.watchedQuery("SELECT 1", logger: Self.logger).collect()
                        }
                        return "answered"
                    } catch let error as StoreError {
                        return "\(error.code)"
                    }
                }
            }
            #expect(outcome == "\(StoreError.Code.connectionFailed)", "\(outcome)")
            #expect(await Self.answers(client))
        }
    }

    /// Whether `client` answers a query within five attempts.
    static func answers(_ client: PostgresClient) async -> Bool {
        for _ in 1...5 {
            if let one = try? await LedgerTestSupport.scalar(client, "SELECT 1::bigint", as: Int64.self), one == 1 { return true }
        }
        return false
    }
}
