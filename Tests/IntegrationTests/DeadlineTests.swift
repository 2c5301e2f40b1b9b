import BugleCore
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Testing

/// `delivery.not_after` through the built executable: a run refuses to start after the deadline, and one that
/// reaches it stops claiming and ends paused with the reason in its summary.
/// A timing suite (``TimingPhase``): the deadline falls a few seconds into a paced run.
@Suite("delivery.not_after (built executable, simulators, real PostgreSQL)", .serialized, .enabled(if: TimingPhase.isActive, TimingPhase.reason))
struct DeadlineTests {
    static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: date)
    }

    @Test("a campaign whose not_after has passed exits 1 and creates no run; validate and the dry run say so too")
    func refusedAfterDeadline() async throws {
        try await CrashFixture.with(devices: 40) { fixture in
            let campaign = try fixture.campaign(policy: .drop, window: 50, notAfter: "2020-01-01T00:00:00Z")
            // `validate` and `--dry-run` used to say ok and "40 would be sent".
            for arguments in [["run", campaign, "--quiet"], ["validate", campaign, "--offline"], ["run", campaign, "--dry-run"]] {
                let output = try await fixture.bugle(arguments)
                #expect(output.status == 1, "\(arguments) \(output.stderr)")
                #expect(output.stderr.contains("delivery.not_after (2020-01-01T00:00:00Z) has passed"), "\(arguments) \(output.stderr)")
            }
            #expect(try await fixture.latestRunID() == -1, "a run was created")
            #expect(fixture.delivered == 0)
        }
    }

    /// A run that reached `not_after` used to stay `paused` for good (resume refuses it), holding the dedupe
    /// reservations of users it never reached: later campaigns of the type skipped them.
    @Test("reaching not_after mid-run: claims stop, the unsent are cancelled (not_after_passed) and their reservations released; the run is completed (exit 0)")
    func reachedMidRun() async throws {
        try await CrashFixture.with(devices: 3000) { fixture in
            // 3,000 recipients at 2 × 150/s need 10 s; the deadline comes after about 3.
            let deadline = Self.iso(Date().addingTimeInterval(4))
            let campaign = try fixture.campaign(policy: .drop, window: 100, rate: 150, notAfter: deadline, dedupe: "daily")
            let output = try await fixture.bugle(["run", campaign, "--quiet", "--json"])
            #expect(output.status == 0, "\(output.stderr)")
            #expect(output.stderr.contains("delivery.not_after reached; the recipients not yet sent are cancelled"), "\(output.stderr)")
            let runID = try await fixture.latestRunID()
            let states = try await fixture.states(runID: runID)
            #expect(states["pending", default: 0] == 0 && states["retry_wait", default: 0] == 0, "\(states)")
            #expect(states["cancelled", default: 0] > 0, "\(states)")
            #expect(states["in_flight", default: 0] == 0, "\(states)")
            #expect(fixture.delivered > 0)
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
            #expect(summary["status"] as? String == "completed")
            #expect((summary["reason"] as? String)?.contains("not_after") == true, "\(summary)")
            let (reserved, cancelledCode) = try await fixture.withClient { client in
                (
                    try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.notification_log WHERE status = 'reserved'", as: Int64.self),
                    try await LedgerTestSupport.scalar(
                        client, "SELECT min(outcome_code) FROM bugle.run_recipients WHERE run_id = \(runID) AND state = 'cancelled'", as: String.self)
                )
            }
            #expect(reserved == 0, "users never reached keep their reservations")
            #expect(cancelledCode == "not_after_passed")
            let delivered = fixture.delivered
            let resumed = try await fixture.bugle(["resume", "\(runID)", "--quiet", "--csv", "-"])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(resumed.stderr.contains("run \(runID) is completed; nothing to send"), "\(resumed.stderr)")
            #expect(fixture.delivered == delivered)
        }
    }
}
