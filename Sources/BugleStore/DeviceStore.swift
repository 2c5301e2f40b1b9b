import BugleCore
import Foundation
import Logging
import PostgresNIO

/// Reads and writes `bugle.devices`: CSV import, single registrations, unregistering and pruning.
///
/// Upserts key on `(platform, token)`. Registering a token again moves it to the given user, refreshes the optional
/// fields it carries (empty ones keep the stored value), reactivates it, and sets `registered_at` and `last_seen`
/// to now; `registered_at` is what a later 410 timestamp is compared with.
public struct DeviceStore: Sendable {
    /// Rows per upsert statement during CSV import.
    public static let importBatchSize = 5_000

    private let client: PostgresClient
    private let logger: Logger

    /// Creates a store.
    /// - Parameters:
    ///   - client: A running client on a migrated database.
    ///   - logger: Used for queries and progress.
    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The outcome of one registration.
    public struct RegistrationResult: Sendable, Hashable {
        /// The device's `id`.
        public var deviceID: Int64
        /// `true` when the device row was created, `false` when an existing one was updated.
        public var inserted: Bool
    }

    // MARK: - CSV import

    /// Imports devices from a CSV file whose header names the columns.
    ///
    /// Required columns: `user_id`, `token`, `platform`; optional: `locale`, `timezone`, `app_version` (header names are
    /// matched case-insensitively, surrounding spaces ignored). The file is streamed and upserted in batches of
    /// ``importBatchSize`` rows, each batch its own statement, so memory stays flat and a failure part-way leaves the
    /// earlier batches imported — its error names the batch's lines and how many devices were imported before it (the
    /// upsert makes a second import of the file safe). Bad rows are skipped and reported by physical line.
    ///
    /// - Parameter path: The CSV file.
    /// - Returns: Counts and the rejected rows.
    /// - Throws: ``StoreError`` with code `fileUnreadable`, `invalidInput` (a bad or missing header), or `query`.
    public func importCSV(path: String) async throws -> DeviceImportReport {
        let reader = try CSVRecordReader(path: path)
        guard let header = try reader.next() else {
            throw StoreError(.invalidInput, "the file is empty: expected a header row naming user_id, token, platform")
        }
        let columns = try Self.columnMap(header)
        var report = DeviceImportReport()
        var batch = UpsertBatch()
        // Lines of the batch being gathered, for an error that says how far the import got.
        var batchLines: ClosedRange<Int>?
        func write(_ batch: UpsertBatch, lines: ClosedRange<Int>?) async throws {
            do {
                let counts = try await self.upsertRetryingConflicts(batch)
                report.inserted += counts.inserted
                report.updated += counts.updated
            } catch {
                let written = report.inserted + report.updated
                let span = lines.map { "lines \($0.lowerBound)–\($0.upperBound)" } ?? "the last rows"
                throw StoreError(
                    .query,
                    "\(path): \(span) could not be written (\(StoreError.safeDescription(of: error))); \(written) device(s) from the "
                        + "lines before were imported. The import is an upsert: run it again once the cause is fixed",
                    underlying: error)
            }
        }
        while let record = try reader.next() {
            report.rowsRead += 1
            if let problem = record.problem {
                let column = problem.fieldIndex.flatMap { $0 < header.fields.count ? columns.name(at: $0) : nil }
                report.record(.init(line: record.line, column: column, reason: problem.reason))
                if problem.runsToEnd { report.unreadFrom = record.line }
                continue
            }
            guard record.fields.count == columns.count else {
                report.record(
                    .init(
                        line: record.line,
                        column: nil,
                        reason: "expected \(columns.count) fields, found \(record.fields.count)"
                    )
                )
                continue
            }
            let result = DeviceRegistration.validate(
                userID: record.fields[columns.userID],
                token: record.fields[columns.token],
                platform: record.fields[columns.platform],
                locale: columns.locale.map { record.fields[$0] },
                timezone: columns.timezone.map { record.fields[$0] },
                appVersion: columns.appVersion.map { record.fields[$0] }
            )
            switch result {
            case .failure(let problem):
                report.record(.init(line: record.line, column: problem.column, reason: problem.reason))
            case .success(let registration):
                if batch.add(registration) {
                    report.duplicatesInBatch += 1
                }
                batchLines = (batchLines?.lowerBound ?? record.line)...record.line
                if batch.count >= Self.importBatchSize {
                    try await write(batch, lines: batchLines)
                    batch = UpsertBatch()
                    batchLines = nil
                }
            }
        }
        if batch.count > 0 {
            try await write(batch, lines: batchLines)
        }
        self.logger.info(
            "imported devices",
            metadata: [
                "rows": "\(report.rowsRead)", "inserted": "\(report.inserted)", "updated": "\(report.updated)",
                "skipped": "\(report.skipped)",
            ]
        )
        return report
    }

    // MARK: - Single devices

    /// Registers (or re-registers) one device with the same upsert as the CSV import.
    /// - Parameters:
    ///   - userID: The owning user; a token registered to someone else moves to this user.
    ///   - token: The provider token (iOS tokens are lowercased).
    ///   - platform: The platform.
    ///   - locale: Optional locale; `nil` keeps the stored one.
    ///   - timezone: Optional time zone; `nil` keeps the stored one.
    ///   - appVersion: Optional app version; `nil` keeps the stored one.
    /// - Returns: The device id and whether it was new.
    /// - Throws: ``StoreError`` with code `invalidInput` naming the bad column, or `query`.
    @discardableResult
    public func register(
        userID: String,
        token: String,
        platform: Platform,
        locale: String? = nil,
        timezone: String? = nil,
        appVersion: String? = nil
    ) async throws -> RegistrationResult {
        let registration: DeviceRegistration
        switch DeviceRegistration.validate(
            userID: userID,
            token: token,
            platform: platform.rawValue,
            locale: locale,
            timezone: timezone,
            appVersion: appVersion
        ) {
        case .success(let value): registration = value
        case .failure(let problem): throw StoreError(.invalidInput, "invalid device: \(problem)")
        }
        let rows = try await self.run(
            """
            INSERT INTO bugle.devices (user_id, token, platform, locale, timezone, app_version)
            VALUES (\(registration.userID), \(registration.token), \(registration.platform.rawValue),
                    \(registration.locale), \(registration.timezone), \(registration.appVersion))
            ON CONFLICT (platform, token) DO UPDATE SET
              user_id = EXCLUDED.user_id,
              locale = COALESCE(EXCLUDED.locale, devices.locale),
              timezone = COALESCE(EXCLUDED.timezone, devices.timezone),
              app_version = COALESCE(EXCLUDED.app_version, devices.app_version),
              is_active = true, registered_at = now(), last_seen = now(),
              deactivated_at = NULL, deactivation_reason = NULL
            RETURNING id, (xmax = 0)
            """,
            what: "registering a device"
        )
        for try await (id, inserted) in rows.decode((Int64, Bool).self) {
            return RegistrationResult(deviceID: id, inserted: inserted)
        }
        throw StoreError(.query, "registering a device returned no row")
    }

    /// A token as stored: APNs device tokens lowercase, everything else (FCM tokens, iOS ones included) as given.
    static func stored(_ token: String, platform: Platform) -> String {
        platform == .ios && !RecipientValidator.isFCMRegistration(token) ? token.lowercased() : token
    }

    /// Marks a device inactive with reason `unregistered`, keeping its row.
    /// - Parameters:
    ///   - token: The provider token (iOS tokens are matched case-insensitively, as stored lowercase).
    ///   - platform: The platform.
    /// - Returns: How many active devices were deactivated (0 or 1).
    /// - Throws: ``StoreError`` with code `query`.
    @discardableResult
    public func unregister(token: String, platform: Platform) async throws -> Int {
        let stored = Self.stored(token, platform: platform)
        return try await self.count(
            """
            WITH changed AS (
              UPDATE bugle.devices
                 SET is_active = false, deactivated_at = now(), deactivation_reason = 'unregistered'
               WHERE platform = \(platform.rawValue) AND token = \(stored) AND is_active
              RETURNING 1)
            SELECT count(*) FROM changed
            """,
            what: "unregistering a device"
        )
    }

    /// A token a provider reported gone (legacy APNs feedback service), and since when.
    public struct Uninstalled: Sendable, Hashable {
        /// The token (iOS tokens are matched lowercase, as stored).
        public var token: String
        /// When the provider saw the app gone.
        public var since: Date

        /// Creates an entry.
        /// - Parameters:
        ///   - token: The token.
        ///   - since: When the provider saw the app gone.
        public init(token: String, since: Date) {
            self.token = token
            self.since = since
        }
    }

    /// What ``deactivate(uninstalled:platform:reason:)`` did.
    public struct UninstalledResult: Sendable, Hashable {
        /// Devices deactivated.
        public var deactivated: Int
        /// Distinct tokens reported that matched an active device which re-registered after the report's
        /// time, and so stayed active.
        public var keptReregistered: Int
        /// Distinct tokens reported that match no active device (unknown, or already inactive).
        public var notActive: Int

        /// Creates a result.
        /// - Parameters:
        ///   - deactivated: Devices deactivated.
        ///   - keptReregistered: Tokens kept because they registered again later.
        ///   - notActive: Tokens matching no active device.
        public init(deactivated: Int, keptReregistered: Int, notActive: Int) {
            self.deactivated = deactivated
            self.keptReregistered = keptReregistered
            self.notActive = notActive
        }
    }

    /// Deactivates devices a provider reported gone, unless they registered again after the report's time —
    /// the same rule the ledger applies to an APNs 410 timestamp (`registered_at < since`). A token reported
    /// twice keeps its latest time.
    /// - Parameters:
    ///   - uninstalled: The reported tokens.
    ///   - platform: Their platform.
    ///   - reason: `deactivation_reason` to store.
    /// - Returns: Counts of deactivated, kept and unmatched tokens.
    /// - Throws: ``StoreError`` with code `query`.
    public func deactivate(uninstalled: [Uninstalled], platform: Platform, reason: String) async throws -> UninstalledResult {
        guard !uninstalled.isEmpty else { return UninstalledResult(deactivated: 0, keptReregistered: 0, notActive: 0) }
        let tokens = uninstalled.map { Self.stored($0.token, platform: platform) }
        let since = uninstalled.map { $0.since.timeIntervalSince1970 }
        let rows = try await self.run(
            """
            WITH input AS (
              SELECT token, max(since) AS since FROM unnest(\(tokens)::text[], \(since)::float8[]) AS i(token, since)
               GROUP BY token),
            matched AS (
              SELECT d.id, d.registered_at < to_timestamp(i.since) AS gone
                FROM input i JOIN bugle.devices d ON d.platform = \(platform.rawValue) AND d.token = i.token AND d.is_active),
            changed AS (
              UPDATE bugle.devices d
                 SET is_active = false, deactivated_at = now(), deactivation_reason = \(reason)
                FROM matched m
               WHERE d.id = m.id AND m.gone AND d.is_active
              RETURNING 1)
            SELECT (SELECT count(*) FROM changed), (SELECT count(*) FROM matched WHERE NOT gone),
                   (SELECT count(*) FROM input) - (SELECT count(*) FROM matched)
            """,
            what: "deactivating uninstalled devices"
        )
        for try await (deactivated, kept, unmatched) in rows.decode((Int64, Int64, Int64).self) {
            return UninstalledResult(deactivated: Int(deactivated), keptReregistered: Int(kept), notActive: Int(unmatched))
        }
        return UninstalledResult(deactivated: 0, keptReregistered: 0, notActive: 0)
    }

    /// Deactivates active devices not seen for a while, with reason `stale`.
    /// - Parameters:
    ///   - seconds: Devices whose `last_seen` is older than this many seconds are pruned; must be positive.
    ///   - dryRun: When `true`, only counts them.
    /// - Returns: How many devices were (or, in a dry run, would be) deactivated.
    /// - Throws: ``StoreError`` with code `invalidInput` for a non-positive age, or `query`.
    public func prune(notSeenFor seconds: Int, dryRun: Bool) async throws -> Int {
        guard seconds > 0 else {
            throw StoreError(.invalidInput, "the prune age must be a positive number of seconds")
        }
        let age = Int64(seconds)
        if dryRun {
            return try await self.count(
                """
                SELECT count(*) FROM bugle.devices
                 WHERE is_active AND last_seen < now() - \(age) * interval '1 second'
                """,
                what: "counting stale devices"
            )
        }
        return try await self.count(
            """
            WITH changed AS (
              UPDATE bugle.devices
                 SET is_active = false, deactivated_at = now(), deactivation_reason = 'stale'
               WHERE is_active AND last_seen < now() - \(age) * interval '1 second'
              RETURNING 1)
            SELECT count(*) FROM changed
            """,
            what: "pruning stale devices"
        )
    }

    // MARK: - Helpers

    /// A batch is one statement, rolled back whole when the server breaks a deadlock with another writer of the same
    /// devices (a run deactivating them, say): it is sent again, up to three times.
    private func upsertRetryingConflicts(_ batch: UpsertBatch) async throws -> (inserted: Int, updated: Int) {
        var attempt = 1
        while true {
            do {
                return try await self.upsert(batch)
            } catch where attempt < 3 && ["40P01", "40001"].contains(StoreError.sqlState(of: error)) {
                attempt += 1
                self.logger.info("a batch of devices met a deadlock; sending it again", metadata: ["attempt": "\(attempt)"])
            }
        }
    }

    private func upsert(_ batch: UpsertBatch) async throws -> (inserted: Int, updated: Int) {
        let rows = try await self.run(
            """
            WITH input AS (
              SELECT * FROM unnest(\(batch.userIDs)::text[], \(batch.tokens)::text[], \(batch.platforms)::text[],
                                   \(batch.locales)::text[], \(batch.timezones)::text[], \(batch.appVersions)::text[])
                AS i(user_id, token, platform, locale, timezone, app_version)),
            up AS (
              INSERT INTO bugle.devices (user_id, token, platform, locale, timezone, app_version)
              SELECT user_id, token, platform, NULLIF(locale, ''), NULLIF(timezone, ''), NULLIF(app_version, '')
                FROM input
               -- One lock order for every import: two imports of overlapping files deadlocked (SQLSTATE 40P01).
               ORDER BY platform, token
              ON CONFLICT (platform, token) DO UPDATE SET
                user_id = EXCLUDED.user_id,
                locale = COALESCE(EXCLUDED.locale, devices.locale),
                timezone = COALESCE(EXCLUDED.timezone, devices.timezone),
                app_version = COALESCE(EXCLUDED.app_version, devices.app_version),
                is_active = true, registered_at = now(), last_seen = now(),
                deactivated_at = NULL, deactivation_reason = NULL
              RETURNING (xmax = 0) AS inserted)
            SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM up
            """,
            what: "importing a batch of devices"
        )
        for try await (inserted, updated) in rows.decode((Int64, Int64).self) {
            return (Int(inserted), Int(updated))
        }
        return (0, 0)
    }

    private func count(_ query: PostgresQuery, what: String) async throws -> Int {
        let rows = try await self.run(query, what: what)
        var total: Int64 = 0
        for try await value in rows.decode(Int64.self) {
            total = value
        }
        return Int(total)
    }

    private func run(_ query: PostgresQuery, what: String) async throws -> AnsweredRows {
        do {
            return try await self.client.answeredQuery(query, logger: self.logger)
        } catch {
            throw StoreError(.query, "\(what) failed", underlying: error)
        }
    }

    private static func columnMap(_ header: CSVRecord) throws -> ColumnMap {
        if let problem = header.problem {
            throw StoreError(.invalidInput, "line \(header.line): malformed header: \(problem.reason)")
        }
        var map = ColumnMap(names: [])
        var seen: [String: Int] = [:]
        for (index, raw) in header.fields.enumerated() {
            let name = raw.trimmingCharacters(in: .whitespaces).lowercased()
            guard ColumnMap.known.contains(name) else {
                let shown = name.count <= 64 ? "'\(name)'" : "(a long name)"
                throw StoreError(
                    .invalidInput,
                    "line \(header.line): unknown column \(shown) in the header (known: "
                        + ColumnMap.known.joined(separator: ", ") + ")"
                )
            }
            guard seen[name] == nil else {
                throw StoreError(.invalidInput, "line \(header.line): column '\(name)' appears twice in the header")
            }
            seen[name] = index
            map.names.append(name)
        }
        for required in ["user_id", "token", "platform"] where seen[required] == nil {
            throw StoreError(.invalidInput, "line \(header.line): the header lacks the required column '\(required)'")
        }
        return map
    }
}

/// Header positions of a device CSV.
private struct ColumnMap {
    static let known = ["user_id", "token", "platform", "locale", "timezone", "app_version"]

    var names: [String]

    var count: Int { self.names.count }
    func name(at index: Int) -> String { self.names[index] }
    private func position(_ name: String) -> Int? { self.names.firstIndex(of: name) }

    // Required columns are checked before use, so 0 is never reached for them.
    var userID: Int { self.position("user_id") ?? 0 }
    var token: Int { self.position("token") ?? 0 }
    var platform: Int { self.position("platform") ?? 0 }
    var locale: Int? { self.position("locale") }
    var timezone: Int? { self.position("timezone") }
    var appVersion: Int? { self.position("app_version") }
}

/// One batch of registrations as parallel arrays, de-duplicated by (platform, token) with the last row winning.
private struct UpsertBatch {
    var userIDs: [String] = []
    var tokens: [String] = []
    var platforms: [String] = []
    var locales: [String] = []
    var timezones: [String] = []
    var appVersions: [String] = []
    private var positions: [String: Int] = [:]

    var count: Int { self.tokens.count }

    /// Adds a row; returns `true` when it replaced an earlier row for the same device.
    mutating func add(_ device: DeviceRegistration) -> Bool {
        let key = device.platform.rawValue + "\u{0}" + device.token
        if let index = self.positions[key] {
            // As against a stored device: an empty cell keeps the earlier row's value (it was wiped for rows of one
            // batch, kept for rows further apart).
            self.userIDs[index] = device.userID
            if let locale = device.locale { self.locales[index] = locale }
            if let timezone = device.timezone { self.timezones[index] = timezone }
            if let appVersion = device.appVersion { self.appVersions[index] = appVersion }
            return true
        }
        self.positions[key] = self.tokens.count
        self.userIDs.append(device.userID)
        self.tokens.append(device.token)
        self.platforms.append(device.platform.rawValue)
        self.locales.append(device.locale ?? "")
        self.timezones.append(device.timezone ?? "")
        self.appVersions.append(device.appVersion ?? "")
        return false
    }
}
