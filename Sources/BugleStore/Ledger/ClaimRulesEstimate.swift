import BugleCore
import Foundation
import Logging
import PostgresNIO

/// What dedupe and the frequency cap would skip of a dry run's recipients if the run claimed them now: a run judges
/// both as it claims each recipient (``PostgresCampaignStore``), against what other runs sent by then, so a dry run
/// can only say how things stand at this moment. Read-only: it reserves nothing.
///
/// Mirrors the claim: a user another run already notified (or reserved) for the campaign's notification type in the
/// run's dedupe period is skipped with all their devices; of the others, a user whom `count` runs (test sends aside)
/// reached in the cap's window, or whose slots other capped runs hold, is skipped by the cap.
public struct ClaimRulesEstimate: Sendable {
    /// Recipients (devices) whose users dedupe would skip now.
    public private(set) var deduped: Int64 = 0
    /// Recipients whose users the frequency cap would skip now (of those dedupe keeps).
    public private(set) var capped: Int64 = 0
    /// The dedupe period a run made now would take (nil: no dedupe).
    public let periodKey: String?
    /// The periods the recipients judged are in: the run's, or with local-time delivery each recipient's own
    /// (``RecipientPeriods``).
    public private(set) var periodsJudged: Set<String> = []
    /// The cap judged (nil: none).
    public let cap: FrequencyCap?

    private let notificationType: String
    private let client: PostgresClient
    private let logger: Logger
    /// False when the database has no Bugle schema: nobody was notified through it, so nothing is skipped.
    private let ledgerExists: Bool

    /// Nil when the campaign has neither dedupe nor a frequency cap.
    public static func make(for campaign: Campaign, now: Date, client: PostgresClient, logger: Logger) async throws -> ClaimRulesEstimate? {
        let periodKey = PeriodKey.key(for: campaign, now: now)
        let cap = campaign.delivery.frequencyCap
        guard periodKey != nil || cap != nil else { return nil }
        let rows = try await client.answeredQuery(
            "SELECT to_regclass('bugle.notification_log') IS NOT NULL AND to_regclass('bugle.user_sends') IS NOT NULL", logger: logger)
        var exists = false
        for try await (value,) in rows.decode((Bool,).self) { exists = value }
        return ClaimRulesEstimate(
            periodKey: periodKey, cap: cap, notificationType: campaign.notificationType, client: client, logger: logger, ledgerExists: exists)
    }

    private init(periodKey: String?, cap: FrequencyCap?, notificationType: String, client: PostgresClient, logger: Logger, ledgerExists: Bool) {
        self.periodKey = periodKey
        self.cap = cap
        self.notificationType = notificationType
        self.client = client
        self.logger = logger
        self.ledgerExists = ledgerExists
    }

    /// Judges one page of recipients, given by their users' ids (one entry per device, so a user with two devices counts
    /// twice, as the run's skipped rows do).
    /// - Parameter periodKeys: each recipient's own dedupe period, empty for the run's; none at all for the run's.
    public mutating func add(userIDs: [String], periodKeys: [String] = []) async throws {
        let keys = periodKeys.count == userIDs.count ? periodKeys : [String](repeating: "", count: userIDs.count)
        if let periodKey {
            for key in Set(keys) { periodsJudged.insert(key.isEmpty ? periodKey : key) }
        }
        guard ledgerExists, !userIDs.isEmpty else { return }
        let rows = try await client.answeredQuery(query(userIDs, keys), logger: logger)
        for try await (deduped, capped) in rows.decode((Int64, Int64).self) {
            self.deduped += deduped
            self.capped += capped
        }
    }

    private func query(_ userIDs: [String], _ periodKeys: [String]) -> PostgresQuery {
        // The same tests as the claim's, without its reservations; a rule the campaign lacks is a NULL parameter, and
        // CASE keeps its subquery from running at all.
        let capCount = cap.map { Int64($0.count) }
        let capSeconds = cap.map { Double($0.perSeconds) }
        return """
            SELECT count(*) FILTER (WHERE deduped)::bigint, count(*) FILTER (WHERE capped AND NOT deduped)::bigint
              FROM (SELECT
                      CASE WHEN \(periodKey)::text IS NULL THEN false ELSE EXISTS (
                        SELECT 1 FROM bugle.notification_log l
                         WHERE l.user_id = u.user_id AND l.notification_type = \(notificationType) AND l.period_key = coalesce(nullif(u.period_key, ''), \(periodKey)::text))
                      END AS deduped,
                      CASE WHEN \(capCount)::bigint IS NULL THEN false ELSE (SELECT count(*) FROM (
                        SELECT x.run_id FROM bugle.run_recipients x
                         WHERE x.user_id = u.user_id AND x.state = 'sent'
                           AND x.finished_at > now() - make_interval(secs => \(capSeconds)::float8)
                           AND NOT EXISTS (SELECT 1 FROM bugle.runs t WHERE t.id = x.run_id AND t.kind = 'test')
                        UNION
                        SELECT s.run_id FROM bugle.user_sends s
                         WHERE s.user_id = u.user_id AND s.at > now() - make_interval(secs => \(capSeconds)::float8)) reached) >= \(capCount)::bigint
                      END AS capped
                      FROM unnest(\(userIDs)::text[], \(periodKeys)::text[]) AS u(user_id, period_key)) judged
            """
    }
}
