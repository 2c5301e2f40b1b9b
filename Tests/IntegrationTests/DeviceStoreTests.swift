import BugleCore
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

@Suite("DeviceStore")
struct DeviceStoreTests {
    private let logger = TestDatabase.logger

    private struct Row: Equatable {
        var userID: String
        var isActive: Bool
        var reason: String?
        var locale: String?
        var appVersion: String?
    }

    private func writeCSV(_ text: String) throws -> String {
        let path = TestScratch.root + "bugle-devices-\(UUID().uuidString).csv"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    private func device(_ client: PostgresClient, platform: String, token: String) async throws -> Row? {
        let rows = try await client.query(
            """
            SELECT user_id, is_active, deactivation_reason, locale, app_version
            FROM bugle.devices WHERE platform = \(platform) AND token = \(token)
            """
        )
        for try await (user, active, reason, locale, version) in rows.decode((String, Bool, String?, String?, String?).self) {
            return Row(userID: user, isActive: active, reason: reason, locale: locale, appVersion: version)
        }
        return nil
    }

    @Test func importsGoodRowsAndReportsBadOnesByPhysicalLine() async throws {
        let apnsToken = "AABBCC" + String(repeating: "0", count: 58)
        let csv = [
            "User_ID, token ,PLATFORM,locale,app_version",  // 1
            "u1,\(apnsToken),ios,en,1.0",  // 2 good (token lowercased)
            "u2,tok-android-1,Android,de,",  // 3 good
            ",tok2,android,,",  // 4 missing user_id
            "u3,tok3,blackberry,,",  // 5 unknown platform
            "u4,\"tok with space\",web,,",  // 6 whitespace in token
            "u5,XYZ,ios,,",  // 7 iOS token not hex
            "\"u6\r\nsecond line\",tok6,web,,",  // 8-9 quoted multi-line user id (control characters)
            "u7,tok7",  // 10 wrong field count
            "u8,tok8,web,\"fr\",\"1.2, \"\"beta\"\"\"",  // 11 good, quoted comma and quotes
            "u9,\(apnsToken.lowercased()),ios,fr,2.0",  // 12 duplicate of line 2 in the same batch: wins
            "u10,\(String(repeating: "a", count: 2_049)),android,,",  // 13 token too long
            "u11,abcd0011,ios,,",  // 14 hex, but too short for an APNs device token (a run would skip it)
            "",  // blank line, ignored
        ].joined(separator: "\r\n")
        let path = try self.writeCSV(csv)
        defer { try? FileManager.default.removeItem(atPath: path) }

        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let store = DeviceStore(client: client, logger: self.logger)
            let report = try await store.importCSV(path: path)
            #expect(report.rowsRead == 12)
            #expect(report.inserted == 3)
            #expect(report.updated == 0)
            #expect(report.duplicatesInBatch == 1)
            #expect(report.skipped == 8)
            #expect(report.rowsRead == report.inserted + report.updated + report.skipped + report.duplicatesInBatch)
            #expect(
                report.issues.map(\.description) == [
                    "line 4: column user_id: missing",
                    "line 5: column platform: unknown platform 'blackberry' (expected ios, android or web)",
                    "line 6: column token: contains whitespace or control characters",
                    "line 7: column token: an iOS token must be hexadecimal (an APNs device token) or an FCM registration token",
                    "line 8: column user_id: contains control characters",
                    "line 10: expected 5 fields, found 2",
                    "line 13: column token: longer than 2048 bytes",
                    "line 14: column token: an APNs device token is an even number of hex digits, 16 to 400 (usually 64); this one has 8",
                ]
            )
            #expect(!report.description.contains("tok with space"))

            #expect(try await self.device(client, platform: "ios", token: apnsToken.lowercased())
                == Row(userID: "u9", isActive: true, reason: nil, locale: "fr", appVersion: "2.0"))
            #expect(try await self.device(client, platform: "ios", token: apnsToken) == nil)
            #expect(try await self.device(client, platform: "web", token: "tok8")?.appVersion == "1.2, \"beta\"")
            #expect(try await self.device(client, platform: "android", token: "tok-android-1")?.locale == "de")
        }
    }

    /// A 2,800-byte token passed the 4,096-byte limit and failed its whole batch in the database (an index entry holds
    /// about 2,700 bytes), with no line named and the batches before it imported; a quote never closed swallowed the
    /// rest of the file as one skipped row.
    @Test("the longest token accepted fits the devices index; a longer one is a skipped row; an unclosed quote marks the rest of the file unread")
    func tokenLimitAndUnclosedQuote() async throws {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:")
        var random = SystemRandomNumberGenerator()
        func token(_ count: Int) -> String { String((0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }) }
        let csv = "user_id,token,platform\nu1,\(token(2_048)),android\nu2,\(token(2_800)),android\nu3,fcm-ok-3,android\n"
            + "\"u4,fcm-4,android\n" + (5...50).map { "u\($0),fcm-\($0),android" }.joined(separator: "\n") + "\n"
        let path = try self.writeCSV(csv)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let report = try await DeviceStore(client: client, logger: self.logger).importCSV(path: path)
            #expect(report.inserted == 2, "\(report)")
            #expect(report.issues.map(\.description).first == "line 3: column token: longer than 2048 bytes", "\(report)")
            #expect(report.unreadFrom == 5, "\(report)")
            #expect(report.issues.last?.description.contains("a quote opened on line 5 is never closed: lines 5–51") == true, "\(report)")
        }
    }

    @Test("a device's time zone must be one the system knows, as the campaign's are; the nearest name is suggested")
    func timeZonesAreChecked() {
        func problem(_ zone: String) -> String? {
            guard case .failure(let problem) = DeviceRegistration.validate(userID: "u", token: "tok", platform: "android", timezone: zone) else { return nil }
            return problem.description
        }
        #expect(problem("Europe/Berlin") == nil)
        #expect(problem("UTC") == nil)
        #expect(problem("Mars/Base")?.contains("column timezone: unknown time zone 'Mars/Base'") == true, "\(String(describing: problem("Mars/Base")))")
        #expect(problem("Europe/Berln")?.contains("did you mean 'Europe/Berlin'?") == true)
        // Letter case first (it suggested 'Asia/Almaty').
        #expect(problem("asia/kolkata")?.contains("did you mean 'Asia/Kolkata'?") == true, "\(String(describing: problem("asia/kolkata")))")
    }

    /// A token twice in one batch had the later row's empty cells wipe the earlier row's values, where rows further
    /// apart (or a stored device) kept them: an empty cell never clears a value.
    @Test("a token twice in one file: the later row wins, its empty cells keeping the earlier row's values")
    func repeatedTokenKeepsValues() async throws {
        let path = try self.writeCSV("user_id,token,platform,locale,app_version\nu1,t1,android,pt-BR,7\nu2,t1,android,,\nu3,t2,web,en,\nu3,t2,web,,8\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let report = try await DeviceStore(client: client, logger: self.logger).importCSV(path: path)
            #expect(report.inserted == 2 && report.duplicatesInBatch == 2, "\(report)")
            #expect(try await self.device(client, platform: "android", token: "t1") == Row(userID: "u2", isActive: true, reason: nil, locale: "pt-BR", appVersion: "7"))
            #expect(try await self.device(client, platform: "web", token: "t2") == Row(userID: "u3", isActive: true, reason: nil, locale: "en", appVersion: "8"))
        }
    }

    /// Android and web tokens were stored whatever their characters, and every run then skipped them as
    /// `malformed_token`; iOS tokens registered with Firebase were already checked.
    @Test("an Android or web token with a character no FCM registration token holds is refused by line")
    func fcmTokenCharacters() async throws {
        let path = try self.writeCSV("user_id,token,platform\nu1,\"x,y:APA91b\",android\nu2,caf\u{e9}:APA91b,web\nu3,good-token_1.2:APA91b,android\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let report = try await DeviceStore(client: client, logger: self.logger).importCSV(path: path)
            #expect(report.inserted == 1 && report.skipped == 2, "\(report)")
            #expect(
                report.issues.map(\.description) == [
                    "line 2: column token: an FCM registration token may hold only letters, digits and - _ : .",
                    "line 3: column token: an FCM registration token may hold only letters, digits and - _ : .",
                ])
        }
    }

    @Test func reimportMovesTokensAndReactivates() async throws {
        let first = try self.writeCSV("user_id,token,platform,locale\nu1,t1,android,en\nu2,t2,android,de\nu3,t3,web,\n")
        let second = try self.writeCSV("user_id,platform,token\nu9,android,t1\nu2,android,t2\nu4,web,t4\n")
        defer {
            try? FileManager.default.removeItem(atPath: first)
            try? FileManager.default.removeItem(atPath: second)
        }
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let store = DeviceStore(client: client, logger: self.logger)
            let initial = try await store.importCSV(path: first)
            #expect(initial.inserted == 3 && initial.updated == 0 && initial.skipped == 0)

            #expect(try await store.unregister(token: "t2", platform: .android) == 1)
            #expect(try await self.device(client, platform: "android", token: "t2")
                == Row(userID: "u2", isActive: false, reason: "unregistered", locale: "de", appVersion: nil))

            let again = try await store.importCSV(path: second)
            #expect(again.inserted == 1 && again.updated == 2 && again.skipped == 0)
            // t1 moved to u9; its locale is kept because the second file has no locale column.
            #expect(try await self.device(client, platform: "android", token: "t1")
                == Row(userID: "u9", isActive: true, reason: nil, locale: "en", appVersion: nil))
            // t2 re-registered: active again, deactivation cleared.
            #expect(try await self.device(client, platform: "android", token: "t2")
                == Row(userID: "u2", isActive: true, reason: nil, locale: "de", appVersion: nil))
        }
    }

    @Test func rejectsBadHeaders() async throws {
        let unknown = try self.writeCSV("user_id,token,platform,colour\nu,t,web,red\n")
        let missing = try self.writeCSV("user_id,platform\nu,web\n")
        defer {
            try? FileManager.default.removeItem(atPath: unknown)
            try? FileManager.default.removeItem(atPath: missing)
        }
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let store = DeviceStore(client: client, logger: self.logger)
            do {
                _ = try await store.importCSV(path: unknown)
                Issue.record("expected an error")
            } catch let error as StoreError {
                #expect(error.code == .invalidInput)
                #expect(error.description.contains("unknown column 'colour'"))
            }
            do {
                _ = try await store.importCSV(path: missing)
                Issue.record("expected an error")
            } catch let error as StoreError {
                #expect(error.description.contains("'token'"))
            }
            await #expect(throws: StoreError.self) { try await store.importCSV(path: "/nonexistent/devices.csv") }
        }
    }

    @Test func importsInSeveralBatches() async throws {
        let count = DeviceStore.importBatchSize * 2 + 17
        var text = "user_id,token,platform\n"
        for index in 0..<count {
            let hex = String(index, radix: 16)
            text += "user\(index),\(String(repeating: "0", count: 62 - hex.count))\(hex)aa,ios\n"
        }
        let path = try self.writeCSV(text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let report = try await DeviceStore(client: client, logger: self.logger).importCSV(path: path)
            #expect(report.rowsRead == count && report.inserted == count)
            let again = try await DeviceStore(client: client, logger: self.logger).importCSV(path: path)
            #expect(again.updated == count && again.inserted == 0)
        }
    }

    @Test("two imports of the same devices in different orders at once both complete (they deadlocked: SQLSTATE 40P01)")
    func concurrentOverlappingImports() async throws {
        let count = DeviceStore.importBatchSize * 2
        var rows: [String] = []
        for index in 0..<count {
            let hex = String(index, radix: 16)
            rows.append("user\(index),\(String(repeating: "0", count: 62 - hex.count))\(hex)bb,ios")
        }
        // The second file holds each batch's rows in another order: without one lock order, each upsert waited on the other.
        var random = SystemRandomNumberGenerator()
        let forward = try self.writeCSV("user_id,token,platform\n" + rows.joined(separator: "\n") + "\n")
        let mixed = try self.writeCSV("user_id,token,platform\n" + rows.shuffled(using: &random).joined(separator: "\n") + "\n")
        defer { for path in [forward, mixed] { try? FileManager.default.removeItem(atPath: path) } }
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let logger = self.logger
            try await withThrowingTaskGroup(of: DeviceImportReport.self) { group in
                for path in [forward, mixed, forward, mixed] {
                    group.addTask { try await DeviceStore(client: client, logger: logger).importCSV(path: path) }
                }
                for try await report in group { #expect(report.inserted + report.updated == count) }
            }
            let stored = try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.devices", as: Int64.self)
            #expect(stored == Int64(count))
        }
    }

    @Test func registerUnregisterAndPrune() async throws {
        let upper = "ABCDEF01" + String(repeating: "0", count: 56)
        let lower = upper.lowercased()
        let configuration = try await TestDatabase.fresh()
        try await Database.withClient(configuration, logger: self.logger) { client in
            let store = DeviceStore(client: client, logger: self.logger)
            let created = try await store.register(userID: "alice", token: upper, platform: .ios, locale: "en")
            #expect(created.inserted)
            let moved = try await store.register(userID: "bob", token: lower, platform: .ios, timezone: "Europe/Berlin")
            #expect(!moved.inserted && moved.deviceID == created.deviceID)
            #expect(try await self.device(client, platform: "ios", token: lower)?.userID == "bob")
            #expect(try await self.device(client, platform: "ios", token: lower)?.locale == "en")

            await #expect(throws: StoreError.self) {
                try await store.register(userID: "x", token: "not hex", platform: .ios)
            }
            await #expect(throws: StoreError.self) {
                try await store.register(userID: " ", token: "t", platform: .web)
            }

            #expect(try await store.unregister(token: upper, platform: .ios) == 1)
            #expect(try await store.unregister(token: lower, platform: .ios) == 0)
            #expect(try await store.unregister(token: "missing", platform: .web) == 0)
            let reactivated = try await store.register(userID: "bob", token: lower, platform: .ios)
            #expect(!reactivated.inserted)
            #expect(try await self.device(client, platform: "ios", token: lower)?.isActive == true)

            try await store.register(userID: "carol", token: "old-1", platform: .android)
            try await store.register(userID: "carol", token: "old-2", platform: .web)
            try await store.register(userID: "dave", token: "fresh", platform: .android)
            try await store.register(userID: "erin", token: "old-inactive", platform: .android)
            try await store.unregister(token: "old-inactive", platform: .android)
            try await client.query(
                "UPDATE bugle.devices SET last_seen = now() - interval '10 days' WHERE token IN ('old-1', 'old-2', 'old-inactive')"
            )
            let week = 7 * 24 * 3600
            #expect(try await store.prune(notSeenFor: week, dryRun: true) == 2)
            #expect(try await self.device(client, platform: "android", token: "old-1")?.isActive == true)
            #expect(try await store.prune(notSeenFor: week, dryRun: false) == 2)
            #expect(try await self.device(client, platform: "android", token: "old-1")?.reason == "stale")
            #expect(try await self.device(client, platform: "android", token: "old-inactive")?.reason == "unregistered")
            #expect(try await self.device(client, platform: "android", token: "fresh")?.isActive == true)
            #expect(try await store.prune(notSeenFor: week, dryRun: false) == 0)
            await #expect(throws: StoreError.self) { try await store.prune(notSeenFor: 0, dryRun: true) }
        }
    }
}
