import BugleCore
import BugleSimulator
import BugleTesting
import Foundation
import PostgresNIO
import Testing

@testable import BugleStore

/// What a database URL leaves out, taken as libpq takes it: the service it names (`pg_service.conf`), then `PGHOST`,
/// `PGPORT`, … Errors name the variable or the file and line of a bad value, never the value.
@Suite("libpq defaults: service files and environment variables")
struct LibpqDefaultsTests {
    /// A scratch directory with a service file in it.
    private static func serviceFile(_ text: String) throws -> (directory: String, file: String) {
        let directory = try TestScratch.directory(prefix: "bugle-service")
        let file = directory + "/pg_service.conf"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return (directory, file)
    }

    @Test("the environment fills what the URL leaves out, and the URL wins; no host anywhere is libpq's socket")
    func environmentVariables() throws {
        let environment = [
            "PGHOST": "db.example", "PGPORT": "6543", "PGDATABASE": "app", "PGUSER": "alice", "PGSSLMODE": "verify-full",
            "PGSSLROOTCERT": "/etc/ca.pem", "PGAPPNAME": "pushes", "PGCONNECT_TIMEOUT": "4", "PGCHANNELBINDING": "prefer",
            "HOME": "/nonexistent",
        ]
        let all = try DatabaseConfiguration(url: "postgres://", environment: environment)
        #expect(all.endpoint == .tcp(host: "db.example", port: 6543))
        #expect(all.username == "alice" && all.database == "app" && all.sslMode == .verifyFull)
        #expect(all.sslRootCertificatePath == "/etc/ca.pem" && all.applicationName == "pushes" && all.connectTimeout == .seconds(4))
        #expect(all.settingOrigins?.contains("host from PGHOST") == true && all.settingOrigins?.contains("user from PGUSER") == true)

        let url = try DatabaseConfiguration(url: "postgresql://bob@other:5433/reports?sslmode=disable", environment: environment)
        #expect(url.endpoint == .tcp(host: "other", port: 5433))
        #expect(url.username == "bob" && url.database == "reports" && url.sslMode == .disable)
        #expect(url.settingOrigins?.contains("PGHOST") == false && url.settingOrigins?.contains("PGUSER") == false)
        #expect(url.settingOrigins?.contains("sslrootcert from PGSSLROOTCERT") == true)

        // Without the environment (init(url:)), nothing outside the URL is read; no host is the default socket.
        let bare = try DatabaseConfiguration(url: "postgres:///app")
        #expect(bare.endpoint == .unixSocket(directory: "/var/run/postgresql", port: 5432) && bare.sslMode == .disable)
        #expect(bare.settingOrigins == nil)
        let socket = try DatabaseConfiguration(url: "postgres://", environment: ["PGHOST": "/srv/pg", "PGSSLMODE": "prefer"])
        #expect(socket.endpoint == .unixSocket(directory: "/srv/pg", port: 5432) && socket.sslMode == .disable)
        #expect(throws: StoreError.self) {
            try DatabaseConfiguration(url: "postgres://", environment: ["PGHOST": "/srv/pg", "PGSSLMODE": "require"])
        }
    }

    @Test("a bad value from the environment is named by its variable, never echoed")
    func environmentErrors() throws {
        func message(_ environment: [String: String], url: String = "postgres://") -> String {
            do {
                _ = try DatabaseConfiguration(url: url, environment: environment)
                return "no error"
            } catch let error as StoreError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(message(["PGPORT": "54x32-CANARY"]) == "invalid database setting: PGPORT (port): must be a number from 1 to 65535")
        #expect(message(["PGSSLMODE": "strict-CANARY"]).hasPrefix("invalid database setting: PGSSLMODE (sslmode): must be one of disable"))
        #expect(message(["PGCONNECT_TIMEOUT": "0"]) == "invalid database setting: PGCONNECT_TIMEOUT (connect_timeout): must be a whole number of seconds from 1 to 3600")
        #expect(message(["PGHOST": "a,b", "PGPORT": "1,2,3"]) == "invalid database setting: PGPORT (port): give one port, or one for each host (2)")
        #expect(message(["PGHOST": "a,,b"]) == "invalid database setting: PGHOST (host): an empty name in the list")
        #expect(message(["PGTARGETSESSIONATTRS": "standby"]) == "invalid database setting: PGTARGETSESSIONATTRS (target_session_attrs): must be any, read-write or primary (Bugle writes, so it never chooses a standby)")
        #expect(message(["PGSSLCERT": "/c.pem"]).contains("PGSSLCERT (sslcert): sslcert and sslkey go together"))
        #expect(message(["PGCHANNELBINDING": "require"]).hasPrefix("channel_binding=require (from PGCHANNELBINDING) cannot be honoured"))
        #expect(message([:], url: "postgres://h/db?channel_binding=require").hasPrefix("channel_binding=require (from the URL) cannot be honoured"))
        #expect(message([:], url: "postgres://h/db?channel_binding=maybe") == "invalid database URL: channel_binding: must be one of disable, prefer, require")
        #expect(message(["PGPORT": "6543"], url: "postgres://h:1x/db").hasPrefix("invalid database URL: port: must be a number"), "the URL's bad port, not the variable")
        #expect(message(["PGSSLMODE": "verify-full"], url: "postgres://u@/db?host=/tmp") == "sslmode=verify-full (from PGSSLMODE) cannot be honoured over a Unix socket: PostgreSQL never offers TLS there; use sslmode=disable or a TCP host")
    }

    /// The error reading `url` (with `environment`) ends with, as printed; "no error" when it is read.
    static func refusal(_ url: String, _ environment: [String: String] = [:]) -> String {
        do {
            _ = try DatabaseConfiguration(url: url, environment: environment)
            return "no error"
        } catch {
            return "\(error)"
        }
    }

    /// libpq's `options`, as the server reads it: `-c name=value`, `-cname=value`, `--name=value` (dashes in names read as
    /// underscores), backslash escapes; from the URL, a service or `PGOPTIONS`; refusals name the origin, never the value.
    @Test("options: -c, -cname, --name forms, escapes, the URL over PGOPTIONS; refusals for other switches, role, a lone -c, a bad name")
    func sessionOptions() throws {
        let parsed = try SessionOptions.parse(#"-c search_path=app,public  -cwork_mem=64MB --lock-timeout=2s -c application_name=a\ b"#)
        #expect(
            parsed.settings == [
                .init(name: "search_path", value: "app,public"), .init(name: "work_mem", value: "64MB"), .init(name: "lock_timeout", value: "2s"),
                .init(name: "application_name", value: "a b"),
            ])
        let fromURL = try DatabaseConfiguration(url: "postgres://u@h/app?options=-c%20search_path%3Dapp", environment: ["PGOPTIONS": "-c search_path=other"])
        #expect(fromURL.segmentOptions.settings == [.init(name: "search_path", value: "app")])
        let fromEnvironment = try DatabaseConfiguration(url: "postgres://u@h/app", environment: ["PGOPTIONS": "--search_path=env"])
        #expect(fromEnvironment.segmentOptions.settings == [.init(name: "search_path", value: "env")])
        #expect(Self.refusal("postgres://u@h/app?options=-B%20100").hasSuffix("invalid database URL: options: only server settings are read (-c name=value or --name=value), not -B…"))
        #expect(Self.refusal("postgres://u@h/app", ["PGOPTIONS": "-c role=admin-CANARY"]).hasSuffix("invalid database setting: PGOPTIONS (options): role is not applied: segments are read as bugle_segment_reader"))
        #expect(!Self.refusal("postgres://u@h/app", ["PGOPTIONS": "-c role=admin-CANARY"]).contains("CANARY"))
        #expect(Self.refusal("postgres://u@h/app", ["PGOPTIONS": "-c"]).hasSuffix("invalid database setting: PGOPTIONS (options): -c is not followed by name=value"))
        #expect(Self.refusal("postgres://u@h/app", ["PGOPTIONS": "-c =x"]).hasSuffix("invalid database setting: PGOPTIONS (options): a setting is not name=value"))
        #expect(Self.refusal("postgres://u@h/app", ["PGOPTIONS": "-c a;b=x"]).hasSuffix("invalid database setting: PGOPTIONS (options): a;b is not a setting name"))
    }

    /// libpq keywords Bugle does not read: the ones that only tune the connection are ignored and named; the ones that
    /// ask for a protection Bugle cannot give are refused, naming where they came from.
    @Test("libpq keywords Bugle does not read: tuning ones ignored and named, protective ones refused, from the URL, a service or the environment")
    func otherKeywords() throws {
        let files = try Self.serviceFile("[prod]\nhost=db\nkeepalives=1\nkeepalives_idle=30\noptions=-c statement_timeout=1s\n")
        let environment = ["PGSERVICEFILE": files.file, "PGSYSCONFDIR": files.directory, "PGSSLMINPROTOCOLVERSION": "TLSv1.2", "HOME": "/nonexistent"]
        let tuned = try DatabaseConfiguration(url: "postgres://u@/app?service=prod&tcp_user_timeout=5000&gssencmode=disable", environment: environment)
        #expect(tuned.endpoint == .tcp(host: "db", port: 5432))
        #expect(
            Set(tuned.ignoredSettings) == [
                "tcp_user_timeout (from the URL)", "gssencmode (from the URL)", "keepalives (from service prod (\(files.file) line 3))",
                "keepalives_idle (from service prod (\(files.file) line 4))", "ssl_min_protocol_version (from PGSSLMINPROTOCOLVERSION)",
            ], "\(tuned.ignoredSettings)")
        // `options` is read now: for segment SQL.
        #expect(tuned.segmentOptions.settings == [.init(name: "statement_timeout", value: "1s")])
        #expect(Self.refusal("postgres://u@h/app?sslcrl=/crl.pem").contains("invalid database URL: sslcrl: not supported: certificate revocation lists are not checked"))
        #expect(Self.refusal("postgres://u@h/app", ["PGGSSENCMODE": "require"]).contains("invalid database setting: PGGSSENCMODE (gssencmode): not supported: GSS encryption"))
        #expect(Self.refusal("postgres://u@h/app", ["PGSSLMINPROTOCOLVERSION": "TLSv1.3"]).contains("Bugle's minimum is TLS 1.2 and it cannot be raised"))
        #expect(Self.refusal("postgres://u@h/app?require_auth=scram-sha-256").contains("require_auth: not supported"))
        #expect(Self.refusal("postgres://u@h/app?hostaddr=10.0.0.1").contains("hostaddr: not supported: give the address as host instead"))
        #expect(Self.refusal("postgres://u@h/app?colour=blue").contains("query parameter 'colour': unknown parameter"))
    }

    @Test("a host list: one port for all or one each, sockets and TCP mixed, TLS per server; target_session_attrs from the URL or PGTARGETSESSIONATTRS")
    func hostLists() throws {
        // Each host of the URL's list has its own port, as in libpq: db1 has none, so it is on the default port.
        let pair = try DatabaseConfiguration(url: "postgres://u@db1:6432,db2:6432/app?sslmode=require&target_session_attrs=read-write")
        #expect(pair.endpoint == .tcp(host: "db1", port: 6432) && pair.alternateEndpoints == [.tcp(host: "db2", port: 6432)])
        #expect(pair.targetSessionAttributes == .readWrite)
        #expect(pair.description.hasSuffix("?sslmode=require&then=db2:6432&target_session_attrs=read-write"), "\(pair)")
        let each = try DatabaseConfiguration(url: "postgres://u@/app?host=/var/run/postgresql,db2&port=5432,5433&sslmode=prefer")
        let candidates = each.candidates
        #expect(candidates.map(\.endpoint) == [.unixSocket(directory: "/var/run/postgresql", port: 5432), .tcp(host: "db2", port: 5433)])
        #expect(candidates.map(\.sslMode) == [.disable, .prefer], "a socket never offers TLS; the TCP server is asked for it")
        #expect(candidates.allSatisfy { $0.alternateEndpoints.isEmpty })
        let fromEnvironment = try DatabaseConfiguration(url: "postgres://", environment: ["PGHOST": "a,b", "PGTARGETSESSIONATTRS": "primary"])
        #expect(fromEnvironment.candidates.map(\.endpointDescription) == ["a:5432", "b:5432"] && fromEnvironment.targetSessionAttributes == .primary)
    }

    @Test("a service: its section's first values, under the URL's and over the environment's; the user file before the system file")
    func serviceFiles() throws {
        let user = try Self.serviceFile(
            """
            # operators' services
            [prod]
            host=db.prod.example
            port=6432
              dbname=pushes
            port=9999
            password=SERVICE-CANARY

            [staging]
            host=db.staging.example
            """)
        let system = try Self.serviceFile(
            """
            [reports]
            host=/var/run/reports
            user=analyst
            """)
        let environment = [
            "PGSERVICEFILE": user.file, "PGSYSCONFDIR": system.directory, "PGUSER": "envuser", "PGPORT": "7000",
            "PGDATABASE": "envdb", "HOME": "/nonexistent",
        ]
        let prod = try DatabaseConfiguration(url: "postgres://?service=prod", environment: environment)
        #expect(prod.endpoint == .tcp(host: "db.prod.example", port: 6432), "the first port= wins, and beats PGPORT")
        #expect(prod.database == "pushes" && prod.username == "envuser")
        #expect(prod.password == "SERVICE-CANARY")
        #expect(
            prod.settingOrigins == "host (line 3), port (line 4), dbname (line 5), password (line 7) from service prod in \(user.file); user from PGUSER",
            "\(prod.settingOrigins ?? "nil")")
        #expect(!prod.description.contains("CANARY") && prod.settingOrigins?.contains("CANARY") == false)
        let resolved = prod.resolvingPassword(environment: environment.merging(["PGPASSWORD": "ENV-CANARY"]) { $1 })
        #expect(resolved.password == "SERVICE-CANARY" && resolved.passwordSource == .file(path: user.file, line: 7), "a service's password beats PGPASSWORD")

        let overridden = try DatabaseConfiguration(url: "postgres://carol@:5555/?service=prod", environment: environment)
        #expect(overridden.endpoint == .tcp(host: "db.prod.example", port: 5555) && overridden.username == "carol")
        let fromVariable = try DatabaseConfiguration(url: "postgres://", environment: environment.merging(["PGSERVICE": "staging"]) { $1 })
        #expect(fromVariable.endpoint == .tcp(host: "db.staging.example", port: 7000) && fromVariable.database == "envdb")
        let fromSystem = try DatabaseConfiguration(url: "postgres://?service=reports", environment: environment)
        #expect(fromSystem.endpoint == .unixSocket(directory: "/var/run/reports", port: 7000) && fromSystem.username == "analyst")
        try FileManager.default.moveItem(atPath: user.file, toPath: user.directory + "/.pg_service.conf")
        let fromHome = try DatabaseConfiguration(
            url: "postgres://?service=staging", environment: ["HOME": user.directory, "PGSYSCONFDIR": system.directory])
        #expect(fromHome.endpoint == .tcp(host: "db.staging.example", port: 5432), "~/.pg_service.conf without PGSERVICEFILE")
    }

    @Test("service file errors name the file and line (or both files searched), never a value")
    func serviceFileErrors() throws {
        func message(_ text: String, service: String = "prod") throws -> String {
            let files = try Self.serviceFile(text)
            do {
                _ = try DatabaseConfiguration(
                    url: "postgres://?service=\(service)",
                    environment: ["PGSERVICEFILE": files.file, "PGSYSCONFDIR": files.directory + "/none", "HOME": "/nonexistent"])
                return "no error"
            } catch let error as StoreError {
                return error.message.replacingOccurrences(of: files.directory, with: "DIR")
            }
        }
        #expect(try message("[prod]\nhost=db\nport=6x-CANARY\n") == "invalid database service prod: DIR/pg_service.conf line 3: port: must be a number from 1 to 65535")
        #expect(try message("[prod]\nhost = db\n") == "database service file DIR/pg_service.conf line 2: (unprintable name): unknown keyword (no spaces around '=')")
        #expect(try message("[prod]\nsslcrl=/etc/crl.pem\n") == "invalid database service prod: DIR/pg_service.conf line 2: sslcrl: not supported: certificate revocation lists are not checked; remove it, or rely on sslmode=verify-full with a short-lived certificate")
        #expect(try message("[prod]\nbogus=1\n") == "database service file DIR/pg_service.conf line 2: bogus: unknown keyword (no spaces around '=')")
        #expect(try message("[prod]\nCANARY-no-equals\n") == "database service file DIR/pg_service.conf line 2: expected keyword=value")
        #expect(try message("[prod]\nservice=other\n") == "database service file DIR/pg_service.conf line 2: service: a service cannot name another service")
        #expect(try message("[other]\nkeepalives=1\n[prod]\nhost=db\n[later]\nbogus\n") == "no error", "only the wanted section is read")
        #expect(try message("[other]\nhost=db\n") == "database service prod is not defined: neither DIR/pg_service.conf nor DIR/none/pg_service.conf has a [prod] section")
    }
}

/// A whole run against the real test server, with nothing in the URL but a service name: the server comes from a
/// service file, the user from `PGUSER`. `bugle db status` says which setting came from where; a service the files do
/// not define stops `bugle` before it connects, naming both files searched.
@Test("bugle run with BUGLE_DATABASE_URL=postgres://?service=…: the server from the service file, the user from PGUSER; every live token once")
func runThroughAService() async throws {
    try await CrashFixture.with(devices: 400) { fixture in
        let files = try TestScratch.directory(prefix: "bugle-service-run")
        let host: String
        let port: Int
        switch fixture.configuration.endpoint {
        case .unixSocket(let directory, let socketPort): (host, port) = (directory, socketPort)
        case .tcp(let name, let tcpPort): (host, port) = (name, tcpPort)
        }
        try """
            # written by runThroughAService
            [bugle-test]
            host=\(host)
            port=\(port)
            dbname=\(fixture.configuration.database ?? "")
            sslmode=disable

            """.write(toFile: files + "/services.conf", atomically: true, encoding: .utf8)
        let environment = [
            "PGSERVICEFILE": files + "/services.conf", "PGSYSCONFDIR": files, "PGUSER": fixture.configuration.username,
            "PGPASSWORD": fixture.configuration.password ?? "",
        ]
        let throughService = CrashFixture(
            environment: fixture.environment, configuration: fixture.configuration, databaseURL: "postgres://?service=bugle-test",
            devices: fixture.devices)
        let campaign = try throughService.campaign(policy: .resend, window: 200)
        let run = try await throughService.bugle(["run", campaign, "--quiet"], environment: environment)
        #expect(run.status == 0, "\(run.stderr)")
        try await fixture.expectEveryLiveTokenSentOnce()

        let status = try await throughService.bugle(["db", "status"], environment: environment)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(
            status.stdout.contains(
                "settings: host (line 3), port (line 4), dbname (line 5), sslmode (line 6) from service bugle-test in \(files)/services.conf; user from PGUSER"),
            "\(status.stdout)")
        #expect(status.stdout.contains("migration "), "\(status.stdout)")

        let nowhere = CrashFixture(
            environment: fixture.environment, configuration: fixture.configuration, databaseURL: "postgres://?service=nowhere",
            devices: fixture.devices)
        let missing = try await nowhere.bugle(["runs"], environment: environment)
        #expect(missing.status != 0)
        #expect(
            missing.stderr.contains(
                "database service nowhere is not defined: neither \(files)/services.conf nor \(files)/pg_service.conf has a [nowhere] section"),
            "\(missing.stderr)")
    }
}

/// A host list as after a failover: a server that is down, one whose sessions are read-only (a cluster of its own whose
/// copy of the database has `default_transaction_read_only = on`, standing in for a standby), and the writable one. With
/// `target_session_attrs=read-write` a whole `bugle run` passes over the first two, saying why, and sends through the
/// third; a list with no usable server exits 2 listing each and why.
@Test("a host list with target_session_attrs=read-write: a dead server and a read-only one passed over, the writable one used for a whole bugle run; none usable exits 2 listing each")
func hostListRun() async throws {
    let directory = NSTemporaryDirectory() + "bugle-ro-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let readOnly = EmbeddedCluster(directory: directory, port: try freeLoopbackPort(), durability: .throwaway)
    defer { readOnly.stopBlocking(mode: .immediate) }
    try await readOnly.start(logger: TestDatabase.logger)
    do {
        try await runThroughHostList(readOnly)
    } catch {
        Issue.record("\(String(reflecting: error))")
    }
}

private func runThroughHostList(_ readOnly: EmbeddedCluster) async throws {
    try await CrashFixture.with(devices: 400) { fixture in
        let database = try #require(fixture.configuration.database)
        try await Database.withClient(readOnly.databaseConfiguration().with(database: "postgres"), logger: TestDatabase.logger) { client in
            try await client.query("CREATE DATABASE \(unescaped: "\"" + database + "\"")", logger: TestDatabase.logger)
            // A catalog setting, in force for the next session (a reloaded server setting would race with the run).
            try await client.query(
                "ALTER DATABASE \(unescaped: "\"" + database + "\"") SET default_transaction_read_only = on", logger: TestDatabase.logger)
        }
        guard case .unixSocket(let readOnlyDirectory, let readOnlyPort) = readOnly.databaseConfiguration().endpoint,
            case .unixSocket(let writableDirectory, let writablePort) = fixture.configuration.endpoint
        else {
            Issue.record("the test clusters listen on Unix sockets")
            return
        }
        let dead = try freeLoopbackPort()
        let user = fixture.configuration.username
        let hosts = "host=127.0.0.1,\(readOnlyDirectory),\(writableDirectory)&port=\(dead),\(readOnlyPort),\(writablePort)"
        let listed = CrashFixture(
            environment: fixture.environment, configuration: fixture.configuration,
            databaseURL: "postgres://\(user)@/\(database)?\(hosts)&target_session_attrs=read-write", devices: fixture.devices)
        let run = try await listed.bugle(["run", try listed.campaign(policy: .resend, window: 200), "--quiet"])
        #expect(run.status == 0, "\(run.stderr)")
        try await fixture.expectEveryLiveTokenSentOnce()
        #expect(run.stderr.contains("using the database server \(writableDirectory)/.s.PGSQL.\(writablePort); passed over 127.0.0.1:\(dead): "), "\(run.stderr)")
        #expect(run.stderr.contains("\(readOnlyDirectory)/.s.PGSQL.\(readOnlyPort): its sessions are read-only (target_session_attrs=read-write)"), "\(run.stderr)")

        let none = CrashFixture(
            environment: fixture.environment, configuration: fixture.configuration,
            databaseURL: "postgres://\(user)@/\(database)?host=127.0.0.1,\(readOnlyDirectory)&port=\(dead),\(readOnlyPort)&target_session_attrs=read-write",
            devices: fixture.devices)
        let refused = try await none.bugle(["runs"])
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("no database server of the list is usable (target_session_attrs=read-write): 127.0.0.1:\(dead): "), "\(refused.stderr)")
        #expect(refused.stderr.contains("its sessions are read-only (target_session_attrs=read-write)"), "\(refused.stderr)")
    }
}

/// Segment SQL that names its tables without a schema relies on `search_path`: set through libpq's `options` in the
/// database URL, it reaches the segment's transactions (a dry run reads every device); without it the same SQL fails
/// with the server's message; a setting the server refuses fails the read naming it.
@Test("options=-c search_path=bugle in the URL: segment SQL without a schema reads every device; without it, relation does not exist; a refused setting is named")
func segmentSearchPath() async throws {
    try await CrashFixture.with(devices: 40) { fixture in
        let campaign = try CLITests.temporaryFile(
            "search-path.yaml",
            """
            name: search-path
            notification_type: search-path
            dedupe: none
            providers: \(fixture.environment.material.providersFile)
            segment:
              sql: SELECT id AS device_id, user_id, token, platform, locale FROM devices
            message:
              default_locale: en
              locales: { en: { title: Hello, body: Search path } }
            """
        )
        let withPath = try await CLITests.bugle(
            ["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": fixture.databaseURL + "&options=-c%20search_path%3Dbugle"])
        #expect(withPath.status == 0, "\(withPath.stderr)")
        #expect(withPath.stdout.contains("40 row(s) read"), "\(withPath.stdout)")
        let without = try await CLITests.bugle(["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": fixture.databaseURL])
        #expect(without.status != 0)
        #expect(without.stderr.contains("relation \"devices\" does not exist"), "\(without.stderr)")
        let refused = try await CLITests.bugle(
            ["run", campaign, "--dry-run"], environment: ["BUGLE_DATABASE_URL": fixture.databaseURL + "&options=-c%20no_such.setting_x%3D1%20-c%20wal_level%3Dminimal"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("the database URL's options set wal_level, which the server refused"), "\(refused.stderr)")
    }
}

/// libpq's multi-host URL form, `postgres://user@h1:p1,h2:p2/db`, through `bugle db status`: the dead first server is
/// passed over and the second used. The host part was split at its last `:` only (the first host read as
/// `127.0.0.1:<dead>` on the second's port), and `db status` chose the server twice, printing the warning twice.
@Test("db status through a URL's host list (h1:p1,h2:p2): the dead first server passed over, said once; the second used")
func urlHostListStatus() async throws {
    let configuration = try await TestDatabase.fresh()
    guard case .unixSocket(let directory, let port) = configuration.endpoint else {
        Issue.record("the test cluster listens on a Unix socket")
        return
    }
    let dead = try freeLoopbackPort()
    let socket = try #require(directory.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
    let url = "postgres://\(configuration.username)@127.0.0.1:\(dead),\(socket):\(port)/\(configuration.database ?? "")"
    let status = try await CLITests.bugle(["db", "status"], environment: ["BUGLE_DATABASE_URL": url])
    #expect(status.status == 0, "\(status.stderr)")
    #expect(status.stdout.contains("migration "), "\(status.stdout)")
    let warnings = status.stderr.components(separatedBy: "passed over 127.0.0.1:\(dead): ").count - 1
    #expect(warnings == 1, "\(status.stderr)")
    #expect(status.stderr.contains("using the database server \(directory)/.s.PGSQL.\(port)"), "\(status.stderr)")
}
