import Logging
import PostgresNIO

/// Seeds a deterministic demo/benchmark device set with one `generate_series` statement per batch:
/// half iOS, half Android (every 20th Android device is a web browser), locales cycling through
/// en, de, pt-BR, pt, fr, es-MX; `deadPercent` of tokens start with the simulators' "dead" prefix
/// (APNs: `dead…`, FCM: `dead-…`) so they come back as unregistered.
public struct DemoSeeder: Sendable {
    private let client: PostgresClient
    private let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// What a ``seed(count:deadPercent:batch:)`` did.
    public struct Seeded: Sendable, Equatable {
        /// Devices this call inserted (ids already present were left alone).
        public var inserted: Int64
        /// Rows in `bugle.devices` afterwards, whoever inserted them.
        public var devices: Int64
    }

    /// Inserts devices with ids `1...count` (existing ids are left alone).
    /// - Returns: How many rows were inserted, and how many `bugle.devices` holds now.
    @discardableResult
    public func seed(count: Int, deadPercent: Int = 2, batch: Int = 500_000) async throws -> Seeded {
        var inserted: Int64 = 0
        var start = 1
        while start <= count {
            let end = min(count, start + batch - 1)
            let rows = try await client.answeredQuery(
                """
                WITH inserted AS (
                INSERT INTO bugle.devices (id, user_id, token, platform, locale, timezone, app_version)
                SELECT i,
                       'user-' || ((i + 1) / 2)::text,
                       CASE WHEN i % 2 = 1
                            THEN (CASE WHEN (i / 2) % 100 < \(deadPercent) THEN 'dead' ELSE 'a0c1' END) || substr(md5(i::text) || md5((i * 7)::text), 5)
                            ELSE (CASE WHEN (i / 2) % 100 < \(deadPercent) THEN 'dead-' ELSE 'fcm-' END) || md5(i::text) || ':APA91b' || substr(md5((i * 3)::text), 1, 20)
                       END,
                       CASE WHEN i % 2 = 1 THEN 'ios' WHEN i % 40 = 0 THEN 'web' ELSE 'android' END,
                       (ARRAY['en', 'de', 'pt-BR', 'pt', 'fr', 'es-MX'])[1 + (i % 6)],
                       (ARRAY['Europe/Berlin', 'America/Sao_Paulo', 'Asia/Kolkata', 'America/St_Johns', 'UTC'])[1 + (i % 5)],
                       '5.' || (i % 10)::text
                  FROM generate_series(\(start)::bigint, \(end)::bigint) AS i
                ON CONFLICT DO NOTHING
                RETURNING 1)
                SELECT count(*)::bigint FROM inserted
                """,
                logger: logger
            )
            for try await (added,) in rows.decode((Int64,).self) { inserted += added }
            start = end + 1
        }
        _ = try await client.answeredQuery("SELECT setval(pg_get_serial_sequence('bugle.devices', 'id'), greatest((SELECT max(id) FROM bugle.devices), 1))", logger: logger).collect()
        _ = try await client.answeredQuery("ANALYZE bugle.devices", logger: logger).collect()
        var devices: Int64 = 0
        for try await (total,) in try await client.answeredQuery("SELECT count(*)::bigint FROM bugle.devices", logger: logger).decode((Int64,).self) {
            devices = total
        }
        return Seeded(inserted: inserted, devices: devices)
    }
}
