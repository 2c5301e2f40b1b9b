import BugleCore
import BugleSimulator
import BugleStore
import BugleTesting
import Foundation
import Logging
import PostgresNIO
import Testing

/// Bugle behind PgBouncer in transaction pooling mode (RELIABILITY.md §3.7: "a lease in a row works behind PgBouncer
/// transaction pooling, where session advisory locks do not"), a real pooler in front of the test server.
@Suite("PgBouncer in front of the test server", .enabled(if: PgBouncer.enabled, PgBouncer.reason))
struct PgBouncerTests {
    static let logger = Logger(label: "bugle.test.pgbouncer")

    /// PgBouncer refuses startup parameters it does not know (`unsupported startup parameter: jit`): Bugle connects
    /// again without its session settings and says so; through the same client a direct connection keeps them.
    @Test("a pooler that refuses Bugle's startup parameters: connected without them, with a notice; directly they stay")
    func startupParametersDropped() async throws {
        let direct = try await TestDatabase.fresh()
        try await PgBouncer.with(server: direct) { bouncer in
            let pooled = bouncer.configuration(database: direct.database, of: direct)
            let lines = RecordingLogHandler.Lines()
            let logger = RecordingLogHandler.logger(lines, level: .notice)
            let jit = try await Database.withClient(pooled, logger: logger) { client in
                try await LedgerTestSupport.scalar(client, "SHOW jit", as: String.self)
            }
            #expect(jit == "on", "the server's default, since the pooler took no startup setting")
            #expect(lines.all.contains { $0.contains("refused a startup parameter") && $0.contains("unsupported startup parameter") }, "\(lines.all)")
            let directJIT = try await Database.withClient(direct, logger: Self.logger) { client in
                try await LedgerTestSupport.scalar(client, "SHOW jit", as: String.self)
            }
            #expect(directJIT == "off")
        }
    }

    /// `bugle run` through the pooler: in transaction pooling, migrations, the segment read, materialization under its
    /// lease, claims, outcome writes and the report each in their own transactions on whichever server session the
    /// pooler gives them; in session pooling, each of Bugle's connections on a server session of its own.
    @Test("bugle run through PgBouncer: every live token delivered once, the dead ones deactivated", arguments: ["transaction", "session"])
    func campaignThroughPooler(poolMode: String) async throws {
        try await CrashFixture.with(devices: 2_000) { direct in
            try await PgBouncer.with(server: direct.configuration, poolMode: poolMode) { bouncer in
                let pooled = bouncer.configuration(database: direct.configuration.database, of: direct.configuration)
                let through = CrashFixture(
                    environment: direct.environment, configuration: direct.configuration, databaseURL: try CLITests.url(pooled), devices: direct.devices)
                let campaign = try through.campaign(policy: .resend, window: 200)
                let result = try await through.bugle(["run", campaign, "--quiet"])
                #expect(result.status == 0, "\(result.stderr)\n\(bouncer.log().suffix(2_000))")
                let runID = try await direct.latestRunID()
                let (duplicates, unknown) = try await direct.checkInvariants(runID: runID)
                #expect(duplicates == 0 && unknown == 0)
                let materializer = try await direct.withClient { client in
                    try await LedgerTestSupport.scalar(
                        client, "SELECT coalesce(materializer, 'none') FROM bugle.runs WHERE id = \(runID)", as: String.self)
                }
                #expect(materializer == "none", "the segment reader's lease is cleared once the run is ready")
            }
        }
    }

    /// A pooler in statement mode refuses every transaction (SQLSTATE 08P01), and Bugle's work is transactions. Each
    /// command used to fail where its first transaction did: `migration_failed: cannot create schema bugle …` for run,
    /// pause and db migrate, a bare `error: postgres error server: SQLSTATE 08P01 …` for `--dry-run` and `report`.
    @Test("a pooler in statement mode: run, --dry-run, report, pause and db migrate each refused once, saying to use session or transaction pooling; nothing written")
    func statementPoolingRefused() async throws {
        try await CrashFixture.with(devices: 40) { direct in
            try await PgBouncer.with(server: direct.configuration, poolMode: "statement") { bouncer in
                let pooled = bouncer.configuration(database: direct.configuration.database, of: direct.configuration)
                let through = CrashFixture(
                    environment: direct.environment, configuration: direct.configuration, databaseURL: try CLITests.url(pooled), devices: direct.devices)
                let campaign = try through.campaign(policy: .resend, window: 200)
                for arguments in [["run", campaign, "--quiet"], ["run", campaign, "--dry-run"], ["report", "1"], ["pause", "1"], ["db", "migrate"]] {
                    let output = try await through.bugle(arguments)
                    #expect(output.status == 2, "\(arguments): \(output.stderr)")
                    #expect(output.stderr.components(separatedBy: StoreError.statementPoolingRefusal).count == 2, "\(arguments): \(output.stderr)")
                    #expect(!output.stderr.contains("cannot create schema") && !output.stderr.contains("SQLSTATE"), "\(arguments): \(output.stderr)")
                }
                let runs = try await direct.withClient { client in
                    try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.runs", as: Int64.self)
                }
                #expect(runs == 0)
            }
        }
    }

    /// `sslmode=require` (in the URL, or `PGSSLMODE`) against a server that offers no TLS (this pooler, plain): it said
    /// `cannot connect to postgres://u:***@…?sslmode=require… (postgres error sslUnsupported)`, with `:***` for a
    /// password that came from PGPASSFILE, not the URL.
    @Test("sslmode=require against a server without TLS: said plainly, with what to do; a password from PGPASSFILE is not shown as the URL's")
    func requiredTLSNotOffered() async throws {
        try await CrashFixture.with(devices: 40) { direct in
            try await PgBouncer.with(server: direct.configuration) { bouncer in
                let database = direct.configuration.database ?? ""
                let user = direct.configuration.username
                let file = TestScratch.root + "pgpass-\(UUID().uuidString.prefix(8))"
                try "127.0.0.1:\(bouncer.port):\(database):\(user):CANARY-pw\n".write(toFile: file, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
                let url = "postgres://\(user)@127.0.0.1:\(bouncer.port)/\(database)"
                for (databaseURL, sslmode) in [(url + "?sslmode=require", [:]), (url, ["PGSSLMODE": "require"])] {
                    let output = try await CLITests.bugle(
                        ["runs"], environment: ["BUGLE_DATABASE_URL": databaseURL, "PGPASSFILE": file].merging(sslmode) { $1 })
                    #expect(output.status == 2, "\(output.stderr)")
                    #expect(output.stderr.contains("the server does not offer TLS, and sslmode=require requires it"), "\(output.stderr)")
                    #expect(!output.stderr.contains("sslUnsupported") && !output.stderr.contains(":***") && !output.stderr.contains("CANARY"), "\(output.stderr)")
                }
            }
        }
    }

    /// A pooler that wants TLS and SCRAM-SHA-256, as a production one does: Bugle verifies its certificate against
    /// `sslrootcert` and the host (verify-full), authenticates with the URL's password, and the whole run goes through.
    /// A wrong password is refused at connect (exit 2), and neither password appears in the output.
    @Test("bugle run through PgBouncer over TLS (sslmode=verify-full, its own CA) with SCRAM-SHA-256: every live token once; a wrong password exits 2; no password in the output")
    func campaignThroughTLSPooler() async throws {
        let password = "scr4m-CANARY-pw"
        try await Self.withSCRAMPooler(devices: 1_000, password: password) { direct, bouncer, material in
            func url(_ password: String) -> String {
                "postgres://\(direct.configuration.username):\(password)@127.0.0.1:\(bouncer.port)/\(direct.configuration.database ?? "")"
                    + "?sslmode=verify-full&sslrootcert=\(material.caFile)"
            }
            let through = CrashFixture(
                environment: direct.environment, configuration: direct.configuration, databaseURL: url(password), devices: direct.devices)
            let campaign = try through.campaign(policy: .resend, window: 200)
            let result = try await through.bugle(["run", campaign, "--quiet"])
            #expect(result.status == 0, "\(result.stderr)\n\(bouncer.log().suffix(2_000))")
            #expect(!(result.stdout + result.stderr).contains(password))
            let runID = try await direct.latestRunID()
            let (duplicates, unknown) = try await direct.checkInvariants(runID: runID)
            #expect(duplicates == 0 && unknown == 0)
            #expect(bouncer.log().contains("TLSv1."), "PgBouncer logs each client's TLS: \(bouncer.log().suffix(2_000))")

            let wrong = CrashFixture(
                environment: direct.environment, configuration: direct.configuration, databaseURL: url("wrong-CANARY"), devices: direct.devices)
            let refused = try await wrong.bugle(["run", campaign, "--quiet"])
            #expect(refused.status == 2, "\(refused.stderr)")
            #expect(refused.stderr.lowercased().contains("auth"), "\(refused.stderr)")
            #expect(!(refused.stdout + refused.stderr).contains("CANARY"))
        }
}

/// A URL without a password, against a pooler that wants one (SCRAM-SHA-256 over TLS): the password comes from a
/// libpq password file (`PGPASSFILE`) for a whole run, or from `PGPASSWORD`. A file others can read is not used,
/// and a wrong password from a file, or no matching line, is refused with where the password came from; no
/// password appears in any output.
@Test("a URL without a password takes it from PGPASSFILE for a whole run, or from PGPASSWORD; an open file, a wrong line or no line exits 2 saying which")
func passwordFromLibpqSources() async throws {
    let password = "scr4m-CANARY-pw"
    try await Self.withSCRAMPooler(devices: 600, password: password) { direct, bouncer, material in
            let user = direct.configuration.username
            let database = direct.configuration.database ?? ""
            let url = "postgres://\(user)@127.0.0.1:\(bouncer.port)/\(database)?sslmode=verify-full&sslrootcert=\(material.caFile)"
            let through = CrashFixture(environment: direct.environment, configuration: direct.configuration, databaseURL: url, devices: direct.devices)
            let file = direct.environment.directory + "/pgpass"
            func write(_ line: String, mode: Int) throws {
                try "# Bugle's test\n\(line)\n".write(toFile: file, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
            }
            func check(_ output: CLITests.Output, status: Int32, says text: String? = nil) {
                #expect(output.status == status, "\(output.stderr)")
                if let text { #expect(output.stderr.contains(text), "\(output.stderr)") }
                #expect(!(output.stdout + output.stderr).contains("CANARY"))
            }

            try write("127.0.0.1:\(bouncer.port):\(database):\(user):\(password)", mode: 0o600)
            let campaign = try through.campaign(policy: .resend, window: 200)
            check(try await through.bugle(["run", campaign, "--quiet"], environment: ["PGPASSFILE": file]), status: 0)
            try await direct.expectEveryLiveTokenSentOnce()
            check(try await through.bugle(["runs"], environment: ["PGPASSWORD": password, "PGPASSFILE": "/nonexistent"]), status: 0)
            let status = try await through.bugle(["db", "status"], environment: ["PGPASSFILE": file])
            check(status, status: 0)
            // The URL has no password: none is shown as one (`:***`); the next line says where it came from.
            #expect(status.stdout.contains("database postgres://\(user)@127.0.0.1:\(bouncer.port)/\(database)?sslmode=verify-full"), "\(status.stdout)")
            #expect(status.stdout.contains("password: the password came from \(file) line 2"), "\(status.stdout)")

            try write("127.0.0.1:\(bouncer.port):\(database):\(user):\(password)", mode: 0o644)
            check(try await through.bugle(["runs"], environment: ["PGPASSFILE": file]), status: 2, says: "mode 644): chmod 600 it")
            try write("*:*:*:\(user):wrong-CANARY", mode: 0o600)
            check(try await through.bugle(["runs"], environment: ["PGPASSFILE": file]), status: 2, says: "the password came from \(file) line 2")
            try write("db.elsewhere:5432:*:*:\(password)", mode: 0o600)
            check(
                try await through.bugle(["runs"], environment: ["PGPASSFILE": file]), status: 2,
                says: "no line of \(file) matches 127.0.0.1:\(bouncer.port):\(database):\(user)")
        }
}

/// A pooler that authenticates by client certificate (`auth_type = cert`, the common name is the user), as some
/// managed services do: Bugle presents `sslcert` / `sslkey` and the run goes through; without them, or with a
/// certificate for another user, it exits 2 at connect.
@Test("bugle run through PgBouncer authenticating by client certificate (sslcert/sslkey, verify-full): every live token once; no certificate, or another user's, exits 2")
func campaignWithClientCertificate() async throws {
    try await CrashFixture.with(devices: 600) { direct in
        let directory = direct.environment.directory + "/pgbouncer-cert"
        let material = try SimulatorCertificates.generate(in: directory, port: 0)
        func clientFiles(_ user: String) throws -> (certificate: String, key: String) {
            let identity = try SimulatorCertificates.issue(in: directory, commonName: user, purpose: .client)
            let (certificate, key) = (directory + "/\(user).pem", directory + "/\(user).key")
            try identity.certificatePEM.write(toFile: certificate, atomically: true, encoding: .utf8)
            try identity.keyPEM.write(toFile: key, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
            return (certificate, key)
        }
        let own = try clientFiles(direct.configuration.username)
        let another = try clientFiles("mallory")
        let security = PgBouncer.ClientSecurity(
            certificatePEM: material.serverCertificatePEM, keyPEM: material.serverKeyPEM, clientCAPEM: material.caPEM)
        try await PgBouncer.with(server: direct.configuration, security: security) { bouncer in
            func run(_ client: (certificate: String, key: String)?) async throws -> CLITests.Output {
                var url = "postgres://\(direct.configuration.username)@127.0.0.1:\(bouncer.port)/\(direct.configuration.database ?? "")"
                    + "?sslmode=verify-full&sslrootcert=\(material.caFile)"
                if let client { url += "&sslcert=\(client.certificate)&sslkey=\(client.key)" }
                let through = CrashFixture(environment: direct.environment, configuration: direct.configuration, databaseURL: url, devices: direct.devices)
                return try await through.bugle(["run", try through.campaign(policy: .resend, window: 200), "--quiet"])
            }
            let refused = try await run(nil)
            #expect(refused.status == 2, "\(refused.stderr)")
            let impostor = try await run(another)
            #expect(impostor.status == 2, "\(impostor.stderr)")
            let result = try await run(own)
            #expect(result.status == 0, "\(result.stderr)\n\(bouncer.log().suffix(2_000))")
            // The same key encrypted, opened with `sslpassword`: the pooler takes the certificate as before.
            let encrypted = directory + "/encrypted.key"
            #expect(try OpenSSLTool.encrypt(key: own.key, to: encrypted, passphrase: "PHRASE-CANARY") == 0)
            let login = try DatabaseConfiguration(url: "postgres://\(direct.configuration.username)@127.0.0.1:\(bouncer.port)/\(direct.configuration.database ?? "")"
                + "?sslmode=verify-full&sslrootcert=\(material.caFile)&sslcert=\(own.certificate)&sslkey=\(encrypted)&sslpassword=PHRASE-CANARY")
            let who = try await Database.withClient(login, logger: Self.logger) { client in
                try await LedgerTestSupport.scalar(client, "SELECT current_user::text", as: String.self)
            }
            #expect(who == direct.configuration.username)
            try await direct.expectEveryLiveTokenSentOnce()
        }
        }
    }

    /// A fixture of `devices` behind a PgBouncer that wants TLS (a certificate from a CA of its own, in the material
    /// passed to `body`) and SCRAM-SHA-256 with `password`, stopped however `body` ends.
    static func withSCRAMPooler(
        devices: Int, password: String, _ body: (CrashFixture, PgBouncer, SimulatorCertificates) async throws -> Void
    ) async throws {
        try await CrashFixture.with(devices: devices) { direct in
            let material = try SimulatorCertificates.generate(in: direct.environment.directory + "/pgbouncer-ca", port: 0)
            let security = PgBouncer.ClientSecurity(certificatePEM: material.serverCertificatePEM, keyPEM: material.serverKeyPEM, password: password)
            try await PgBouncer.with(server: direct.configuration, security: security) { bouncer in
                try await body(direct, bouncer, material)
            }
        }
    }

    /// The segment reader's lease, through the pooler: a live reader's lease refuses a second reader; a reader whose
    /// process is gone (or whose lease lapsed) is taken over; the reader that lost its lease writes nothing more, and
    /// the one that took it materializes every device once.
    @Test("the segment reader's lease: held refuses, gone or lapsed is taken over, the loser writes nothing, renewals extend it")
    func materializerLease() async throws {
        let direct = try await TestDatabase.fresh()
        try await Database.withClient(direct, logger: Self.logger) { client in
            try await MixedTestEnvironment.seed(client, count: 1_500)
        }
        try await PgBouncer.with(server: direct) { bouncer in
            try await Database.withClient(bouncer.configuration(database: direct.database, of: direct), logger: Self.logger) { client in
                let campaign = LedgerTestSupport.campaign(sql: "SELECT id AS device_id, user_id, token, platform, locale FROM bugle.devices", pageSize: 500)
                let runID = try await RunRepository(client: client, logger: Self.logger).createRun(campaign: campaign, yaml: "x", periodKey: nil)
                let reader = SegmentReader(client: client, segment: campaign.segment, useReaderRole: false, logger: Self.logger)
                let materializer = Materializer(client: client, logger: Self.logger)
                func rows() async throws -> Int64 {
                    try await LedgerTestSupport.scalar(client, "SELECT count(*)::bigint FROM bugle.run_recipients WHERE run_id = \(runID)", as: Int64.self) ?? -1
                }
                func state() async throws -> String {
                    try await LedgerTestSupport.scalar(
                        client, "SELECT status || ' ' || coalesce(materializer, 'none') FROM bugle.runs WHERE id = \(runID)", as: String.self) ?? "gone"
                }
                func set(_ owner: String, expiresIn seconds: Int) async throws {
                    _ = try await client.query(
                        "UPDATE bugle.runs SET materializer = \(owner), materializer_expires_at = now() + make_interval(secs => \(Double(seconds))) WHERE id = \(runID)",
                        logger: Self.logger
                    ).collect()
                }

                // A reader on another host, its lease an hour from lapsing: refused, unless its process is known gone.
                try await set("far:1:1", expiresIn: 3_600)
                let held = await #expect(throws: MaterializerLease.Held.self) {
                    try await MaterializerLease.holding(runID: runID, owner: "near:2:2", ttlSeconds: 30, client: client, logger: Self.logger) { _ in }
                }
                #expect(held?.owner == "far:1:1" && (held?.expiresIn ?? 0) > 3_500, "\(String(describing: held))")

                // Taken over from a process known gone; inside, the lease is this reader's and refuses a third. A takeover
                // from outside (the lease lapsed meanwhile, say) then stops this reader before its first page.
                var lost: MaterializerLease.Lost?
                do {
                    try await MaterializerLease.holding(
                        runID: runID, owner: "near:2:2", ttlSeconds: 30, client: client, logger: Self.logger, ownerIsGone: { $0 == "far:1:1" }
                    ) { lease in
                        #expect(try await state() == "materializing near:2:2")
                        await #expect(throws: MaterializerLease.Held.self) {
                            try await MaterializerLease.holding(runID: runID, owner: "other:3:3", ttlSeconds: 30, client: client, logger: Self.logger) { _ in }
                        }
                        try await set("thief:4:4", expiresIn: -1)
                        _ = try await materializer.materialize(runID: runID, campaign: campaign, reader: reader, lease: lease)
                    }
                } catch let error as MaterializerLease.Lost {
                    lost = error
                }
                #expect(lost?.runID == runID, "the reader whose lease was taken over stopped with Lost")
                #expect(try await rows() == 0, "the reader that lost its lease wrote no page")
                #expect(try await state() == "materializing thief:4:4", "nor marked the run failed or ready")

                // The thief's lease has lapsed: taken over; renewed while held; the segment read whole, the lease cleared.
                let report = try await MaterializerLease.holding(runID: runID, owner: "last:5:5", ttlSeconds: 3, client: client, logger: Self.logger) { lease in
                    let expiry = { try await LedgerTestSupport.scalar(
                        client, "SELECT extract(epoch FROM materializer_expires_at)::float8 FROM bugle.runs WHERE id = \(runID)", as: Double.self) ?? 0 }
                    let first = try await expiry()
                    let deadline = ContinuousClock.now + .seconds(20)
                    while try await expiry() <= first, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
                    #expect(try await expiry() > first, "renewed within 20 s (every half second)")
                    return try await materializer.materialize(runID: runID, campaign: campaign, reader: reader, lease: lease)
                }
                #expect(report.recipients == 1_500)
                #expect(try await rows() == 1_500)
                #expect(try await state() == "ready none")

                // Too late for the thief: the run is ready, and its pages find it so.
                let late = try await materializer.materialize(runID: runID, campaign: campaign, reader: reader, lease: MaterializerLease(runID: runID, owner: "thief:4:4"))
                #expect(late.recipients == 0)
                #expect(try await rows() == 1_500)
            }
        }
    }
}
