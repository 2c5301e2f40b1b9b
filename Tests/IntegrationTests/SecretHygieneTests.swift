import BugleCore
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import PostgresNIO
import Testing

/// RELIABILITY.md §2.5 #39: one whole mixed run at the most verbose log level (`--log-level trace`: Bugle's, the
/// HTTP/2 pool's and postgres-nio's own logging), then its report and the run list, with every secret a run handles:
/// the APNs `.p8` key, the FCM service account's private key, the JWTs and access tokens made from them, and a
/// database password. None of them — not even 16 characters of a key — may appear in what Bugle prints, in the CSV or
/// in any text the database holds.
@Suite("Secret hygiene: a whole traced run leaks no key, token or password")
struct SecretHygieneTests {
    static let databasePassword = "Canary-db-pass-7Q3xK9"

    /// The base64 body of a PEM (its lines between the BEGIN and END lines, joined).
    static func pemBody(_ pem: String) -> String {
        pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }

    /// Pieces of a secret to look for: its first and middle 16 characters.
    static func pieces(of secret: String) -> [String] {
        let characters = Array(secret)
        guard characters.count >= 32 else { return [secret] }
        let middle = characters.count / 2
        return [String(characters[0..<16]), String(characters[middle..<(middle + 16)])]
    }

    @Test("a traced mixed run, its report and the run list: no key body, JWT, access token or database password in output, CSV or database")
    func nothingLeaks() async throws {
        let (environment, configuration, campaign) = try await CLIRunTests.mixedCampaign(
            devices: 200, name: "secrets", message: "default_locale: en\nlocales: { en: { title: Hello, body: Secret } }")
        let material = environment.material
        let p8 = try String(contentsOfFile: material.keyFile, encoding: .utf8)
        let account = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: material.fcmServiceAccountFile))) as? [String: Any]
        let serviceKey = account?["private_key"] as? String ?? ""
        #expect(!serviceKey.isEmpty)
        var canaries = Self.pieces(of: Self.pemBody(p8)) + Self.pieces(of: Self.pemBody(serviceKey)) + [Self.databasePassword]
        // A JWT (`{"` in base64url) and the FCM simulator's access tokens.
        canaries += ["eyJ", "ya29."]

        let plainURL = try CLITests.url(configuration)
        let url = plainURL.replacingOccurrences(of: "postgres://\(configuration.username)@", with: "postgres://\(configuration.username):\(Self.databasePassword)@")
        #expect(url != plainURL)
        let csv = URL(fileURLWithPath: TestScratch.root).appendingPathComponent("bugle-secrets-\(UUID().uuidString).csv").path
        defer { try? FileManager.default.removeItem(atPath: csv) }
        let environmentVariables = ["BUGLE_DATABASE_URL": url]
        let run = try await CLITests.bugle(
            ["run", campaign, "--providers", material.providersFile, "--csv", csv, "--log-level", "trace"], environment: environmentVariables)
        let delivered = environment.apns.accepted().count + environment.fcm.accepted().count
        let fcmTokens = environment.fcm.counters().tokenGrants
        try await environment.stop()
        #expect(run.status == 0, "\(run.stderr.suffix(2000))")
        #expect(delivered == 190)
        #expect(fcmTokens >= 1)
        // The trace reached the HTTP/2 pool and the database driver (about 350 KB of it), so the check below looked at
        // their logging too.
        #expect(run.stderr.contains("[PostgresNIO]") && run.stderr.contains(" trace "), "no trace-level line was logged")
        let runID = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            try await LedgerTestSupport.scalar(client, "SELECT max(id) FROM bugle.runs", as: Int64.self) ?? -1
        }
        let report = try await CLITests.bugle(["report", "\(runID)", "--json", "--log-level", "trace"], environment: environmentVariables)
        let runs = try await CLITests.bugle(["runs", "--log-level", "trace"], environment: environmentVariables)
        #expect(report.status == 0 && runs.status == 0)
        let database = try await Database.withClient(configuration, logger: TestDatabase.logger) { client in
            var text = ""
            let tables = try await client.query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'bugle' AND table_type = 'BASE TABLE'",
                logger: TestDatabase.logger)
            var names: [String] = []
            for try await (name,) in tables.decode((String,).self) { names.append(name) }
            #expect(names.contains("run_recipients") && names.contains("runs"))
            for name in names {
                let rows = try await client.query(
                    PostgresQuery(unsafeSQL: "SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM bugle.\(name) t"), logger: TestDatabase.logger)
                for try await (dump,) in rows.decode((String,).self) { text += dump + "\n" }
            }
            return text
        }
        let places: [(String, String)] = [
            ("run stdout", run.stdout), ("run stderr", run.stderr), ("CSV", (try? String(contentsOfFile: csv, encoding: .utf8)) ?? ""),
            ("report", report.stdout + report.stderr), ("runs", runs.stdout + runs.stderr), ("database", database),
        ]
        #expect(places.allSatisfy { !$0.1.isEmpty })
        for (place, text) in places {
            for canary in canaries {
                #expect(!text.contains(canary), "\(place) holds \(canary)")
            }
        }
    }
}
