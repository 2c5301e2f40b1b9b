import BugleSimulator
import Foundation
import PostgresNIO
import Testing

@testable import BugleStore

@Suite("DatabaseConfiguration")
struct DatabaseConfigurationTests {
    @Test("a process tag ends application_name, which stays printable ASCII within the server's 63 bytes")
    func taggingSessions() throws {
        let plain = try DatabaseConfiguration(url: "postgres://u@localhost/db").taggingSessions("12:34")
        #expect(plain.applicationName == "bugle 12:34")
        let named = try DatabaseConfiguration(url: "postgres://u@localhost/db?application_name=reports-\u{e9}t\u{e9}")
            .taggingSessions("12:34")
        #expect(named.applicationName == "reports-t 12:34")
        let long = try DatabaseConfiguration(url: "postgres://u@localhost/db?application_name=" + String(repeating: "x", count: 80))
            .taggingSessions("123456:4294967295")
        #expect(long.applicationName.utf8.count == 63)
        #expect(long.applicationName.hasSuffix(" 123456:4294967295"))
        // Printed as the URL the operator gave, which can be pasted back: the process's own tag is left out (an error
        // naming the server showed `application_name=bugle%2012455:2438088973`), a name of theirs kept, encoded.
        #expect(!plain.description.contains("application_name"), "\(plain.description)")
        #expect(try DatabaseConfiguration(url: plain.description).applicationName == "bugle")
        let spaced = try DatabaseConfiguration(url: "postgres://u@localhost/db?application_name=nightly%20reports").taggingSessions("12:34")
        #expect(spaced.description.hasSuffix("application_name=nightly%20reports"), "\(spaced.description)")
        #expect(try DatabaseConfiguration(url: spaced.description).applicationName == "nightly reports")
    }

    @Test func parsesAFullURL() throws {
        let configuration = try DatabaseConfiguration(
            url: "postgresql://alice:s3cr%40t%2Fpw@db.example.com:6543/app?sslmode=verify-full&sslrootcert=/etc/ca.pem"
        )
        #expect(configuration.endpoint == .tcp(host: "db.example.com", port: 6543))
        #expect(configuration.username == "alice")
        #expect(configuration.password == "s3cr@t/pw")
        #expect(configuration.database == "app")
        #expect(configuration.sslMode == .verifyFull)
        #expect(configuration.sslRootCertificatePath == "/etc/ca.pem")
    }

    @Test func appliesDefaults() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://bob@localhost")
        #expect(configuration.endpoint == .tcp(host: "localhost", port: 5432))
        #expect(configuration.password == nil)
        #expect(configuration.database == nil)
        #expect(configuration.sslMode == .prefer)
    }

    @Test func parsesIPv6AndPasswordWithColon() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://u:a:b@[::1]:5433/db")
        #expect(configuration.endpoint == .tcp(host: "::1", port: 5433))
        #expect(configuration.password == "a:b")
    }

    /// libpq's multi-host URL: `h1:p1,h2:p2`, each host with its own optional port. The list's first host with a port
    /// was read as the host `127.0.0.1:47310` on the last port (a DNS error), so the live first server was never tried.
    @Test("a URL's host list: each host with its own port, IPv6 in brackets, a host without one on the default port or the query's; an empty host refused")
    func urlHostLists() throws {
        func endpoints(_ url: String, environment: [String: String] = [:]) throws -> [DatabaseConfiguration.Endpoint] {
            try DatabaseConfiguration(url: url, environment: environment).candidates.map(\.endpoint)
        }
        #expect(try endpoints("postgres://user:pw@127.0.0.1:47310,127.0.0.1:47399/db") == [
            .tcp(host: "127.0.0.1", port: 47310), .tcp(host: "127.0.0.1", port: 47399),
        ])
        #expect(try endpoints("postgresql://[::1]:5433,[2001:db8::7],db3:6432/db") == [
            .tcp(host: "::1", port: 5433), .tcp(host: "2001:db8::7", port: 5432), .tcp(host: "db3", port: 6432),
        ])
        // Mixed: a host without a port is on libpq's default when another has one; a port parameter replaces the list's.
        #expect(try endpoints("postgres://u@db1,db2:6432/app") == [.tcp(host: "db1", port: 5432), .tcp(host: "db2", port: 6432)])
        #expect(try endpoints("postgres://u@db1:7000,db2/app?port=6543") == [.tcp(host: "db1", port: 6543), .tcp(host: "db2", port: 6543)])
        // No port anywhere in the list: one port for all from PGPORT (or 5432).
        #expect(try endpoints("postgres://u@db1,db2/app", environment: ["PGPORT": "6000"]) == [.tcp(host: "db1", port: 6000), .tcp(host: "db2", port: 6000)])
        // A percent-encoded socket directory in the list, with its port.
        #expect(try endpoints("postgres://u@127.0.0.1:1,%2Ftmp%2Fpg:5433/app") == [.tcp(host: "127.0.0.1", port: 1), .unixSocket(directory: "/tmp/pg", port: 5433)])
        // One host alone keeps every form it had: `:port` alone is the default host on that port.
        #expect(try endpoints("postgres://u@:5433/app") == [.unixSocket(directory: DatabaseConfiguration.defaultSocketDirectory, port: 5433)])
        #expect(try endpoints("postgres://u@[::1]/app") == [.tcp(host: "::1", port: 5432)])
        for (url, problem) in [
            ("postgres://u:CANARY@db1,,db2/app", "host 2 of the list is empty"),
            ("postgres://u:CANARY@db1:5432,/app", "host 2 of the list is empty"),
            ("postgres://u:CANARY@db1,:5433/app", "host 2 of the list is empty"),
            ("postgres://u:CANARY@db1,[::1/app", "unterminated '['"),
            ("postgres://u:CANARY@db1,[::1]x/app", "unexpected text after ']'"),
            ("postgres://u:CANARY@db1:5432,db2:port/app", "port: must be a number"),
        ] {
            do {
                _ = try DatabaseConfiguration(url: url)
                Issue.record("\(url) was accepted")
            } catch let error as StoreError {
                #expect(error.code == .invalidDatabaseURL && error.description.contains(problem), "\(url): \(error)")
                #expect(!error.description.contains("CANARY"))
            }
        }
    }

    /// libpq's key=value connection string was refused as `scheme: the URL must start with postgres://`; it is read
    /// as the URL's parameters, and printed as a URL.
    @Test("a libpq key=value connection string: read as the URL's parameters (quotes, escapes, host lists), printed as a URL; errors name the keyword, never a value")
    func keywordValueStrings() throws {
        let plain = try DatabaseConfiguration(url: "host=127.0.0.1 port=47310 dbname=x user=y")
        #expect(plain.endpoint == .tcp(host: "127.0.0.1", port: 47310) && plain.database == "x" && plain.username == "y")
        #expect(plain.description == "postgres://y@127.0.0.1:47310/x?sslmode=prefer", "\(plain)")
        let quoted = try DatabaseConfiguration(
            url: #"  host = db1,db2 port=5432,5433 password='it\'s a \\ CANARY' sslmode=require application_name='' target_session_attrs=read-write keepalives=1 "#)
        #expect(quoted.candidates.map(\.endpoint) == [.tcp(host: "db1", port: 5432), .tcp(host: "db2", port: 5433)])
        #expect(quoted.password == #"it's a \ CANARY"# && quoted.sslMode == .require && quoted.applicationName == "bugle")
        #expect(quoted.targetSessionAttributes == .readWrite && quoted.ignoredSettings == ["keepalives (from the URL)"])
        #expect(!quoted.description.contains("CANARY"))
        let socket = try DatabaseConfiguration(url: "host=/tmp/pg port=5433 user=bugle")
        #expect(socket.endpoint == .unixSocket(directory: "/tmp/pg", port: 5433) && socket.sslMode == .disable)
        for (text, problem) in [
            ("host=db CANARY", "pair 2 has no '='"),
            ("host=db password='CANARY", "password: a quoted value without its closing quote"),
            ("host=db colour=CANARY", "colour: unknown keyword"),
            ("host=db port=CANARY", "port: must be a number"),
            ("host=db requirepeer=CANARY", "requirepeer: not supported"),
            ("db.example.com:5432/CANARY", "or be libpq's key=value form"),
        ] {
            do {
                _ = try DatabaseConfiguration(url: text)
                Issue.record("\(text) was accepted")
            } catch let error as StoreError {
                #expect(error.code == .invalidDatabaseURL && error.description.contains(problem), "\(text): \(error)")
                #expect(!error.description.contains("CANARY"), "\(error)")
            }
        }
    }

    @Test func parsesUnixSocketForms() throws {
        let query = try DatabaseConfiguration(url: "postgres://bugle@/bugle?host=/tmp/pg%20sock&port=5433")
        #expect(query.endpoint == .unixSocket(directory: "/tmp/pg sock", port: 5433))
        #expect(query.sslMode == .disable)
        #expect(query.unixSocketPath == "/tmp/pg sock/.s.PGSQL.5433")

        let encoded = try DatabaseConfiguration(url: "postgres://bugle@%2Fvar%2Frun%2Fpostgresql/bugle?sslmode=prefer")
        #expect(encoded.endpoint == .unixSocket(directory: "/var/run/postgresql", port: 5432))
        #expect(encoded.sslMode == .disable)

        let embedded = DatabaseConfiguration.unixSocket(directory: "/x/socket", port: 5432, username: "bugle", database: "bugle")
        #expect(embedded.unixSocketPath == "/x/socket/.s.PGSQL.5432")
        #expect(embedded.sslMode == .disable)
    }

    @Test(arguments: ["require", "verify-ca", "verify-full"])
    func refusesTLSOverUnixSocket(mode: String) {
        #expect(throws: StoreError.self) {
            try DatabaseConfiguration(url: "postgres://bugle@/bugle?host=/tmp&sslmode=\(mode)")
        }
    }

    @Test func redactsThePassword() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://alice:CANARY-PASSWORD@db:5432/app?sslmode=require")
        #expect(!configuration.description.contains("CANARY"))
        #expect(!String(reflecting: configuration).contains("CANARY"))
        #expect(!"\(configuration)".contains("CANARY"))
        #expect(configuration.description == "postgres://alice:***@db:5432/app?sslmode=require")
    }

    @Test(arguments: [
        ("mysql://u:CANARYpw@h/db", "scheme"),
        ("postgres://u:CANARY/pw@h/db", "port"),
        ("postgres://u:CANARYpw@h:99999/db", "port"),
        ("postgres://u:CANARYpw@h/db?sslmode=sometimes", "sslmode"),
        ("postgres://u:CANARYpw@h/db?colour=blue", "query parameter 'colour'"),
        ("postgres://u:CANARY#pw@h/db", "fragment"),
        ("postgres://u:CANARY%zzpw@h/db", "password"),
        ("postgres://u:CANARYpw@h/db?connect_timeout=soon", "connect_timeout"),
    ])
    func errorsNameThePartButNeverThePassword(url: String, part: String) {
        do {
            _ = try DatabaseConfiguration(url: url)
            Issue.record("expected \(part) error")
        } catch let error as StoreError {
            #expect(error.code == .invalidDatabaseURL)
            #expect(error.description.contains(part), "\(error)")
            #expect(!error.description.contains("CANARY"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func mapsSSLModes() throws {
        func plan(_ query: String) throws -> TLSPlan {
            try DatabaseConfiguration(url: "postgres://u@db.example.com/app\(query)").tlsPlan
        }
        #expect(try plan("?sslmode=disable") == TLSPlan(negotiation: .disable, verification: .none))
        #expect(try plan("") == TLSPlan(negotiation: .prefer, verification: .none))
        #expect(try plan("?sslmode=allow") == TLSPlan(negotiation: .prefer, verification: .none))
        #expect(try plan("?sslmode=prefer") == TLSPlan(negotiation: .prefer, verification: .none))
        #expect(try plan("?sslmode=require") == TLSPlan(negotiation: .require, verification: .none))
        #expect(
            try plan("?sslmode=require&sslrootcert=/ca.pem")
                == TLSPlan(negotiation: .require, verification: .chainOnly, trustRootsFile: "/ca.pem")
        )
        #expect(try plan("?sslmode=verify-ca") == TLSPlan(negotiation: .require, verification: .chainOnly))
        #expect(
            try plan("?sslmode=verify-full&sslrootcert=/ca.pem")
                == TLSPlan(negotiation: .require, verification: .full, trustRootsFile: "/ca.pem")
        )
        #expect(try plan("?sslmode=verify-full&sslrootcert=system") == TLSPlan(negotiation: .require, verification: .full))
        // Building the postgres-nio configuration succeeds for every TCP mode.
        for mode in DatabaseConfiguration.SSLMode.allCases {
            let configuration = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=\(mode.rawValue)")
            _ = try configuration.postgresClientConfiguration()
        }
    }

    @Test func keepsApplicationNameAndTimeout() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://u@h/app?application_name=pushrunner&connect_timeout=3")
        #expect(configuration.applicationName == "pushrunner")
        #expect(configuration.connectTimeout == .seconds(3))
        let client = try configuration.postgresClientConfiguration()
        #expect(client.options.connectTimeout == .seconds(3))
        #expect(client.host == "h")
    }

    @Test("sslcert and sslkey: read from the URL as a pair, shown in the description; one alone is an error; a key others can read is refused by name, as libpq does")
    func clientCertificate() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=verify-full&sslcert=/c/client.pem&sslkey=/c/client.key")
        #expect(configuration.sslCertificatePath == "/c/client.pem" && configuration.sslKeyPath == "/c/client.key")
        #expect(configuration.description.contains("sslcert=/c/client.pem&sslkey=/c/client.key"), "\(configuration)")
        for lonely in ["sslcert=/c/client.pem", "sslkey=/c/client.key"] {
            #expect(throws: StoreError.self) { try DatabaseConfiguration(url: "postgres://u@h/app?\(lonely)") }
        }
        let directory = NSTemporaryDirectory() + "bugle-sslkey-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = directory + "/client.key"
        try "-----BEGIN PRIVATE KEY-----\nnot-a-key\n-----END PRIVATE KEY-----\n".write(toFile: key, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        let open = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=require&sslcert=\(directory)/client.pem&sslkey=\(key)")
        do {
            _ = try open.postgresClientConfiguration()
            Issue.record("a key readable by others was accepted")
        } catch let error as StoreError {
            #expect(error.description.contains("sslkey \(key) is readable by others (mode 644): chmod 600 it"), "\(error)")
            #expect(!error.description.contains("not-a-key"))
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        // Now the certificate file (missing) is the problem, named; then the key's contents, never quoted.
        do {
            _ = try open.postgresClientConfiguration()
            Issue.record("a missing certificate was accepted")
        } catch let error as StoreError {
            #expect(error.description.contains("cannot read sslcert \(directory)/client.pem"), "\(error)")
        }
        // With sslmode=disable neither file is read.
        _ = try DatabaseConfiguration(url: "postgres://u@h/app?sslmode=disable&sslcert=/nowhere.pem&sslkey=/nowhere.key").postgresClientConfiguration()
    }

    /// libpq's password-file format: comments and short lines skipped, `\:` and `\\` unescaped, a lone `*` matches
    /// anything (`\*` is a star), and the password ends at the next unescaped colon.
    @Test("password file lines: comments, escapes, wildcards, and where the password ends")
    func passwordFileLines() {
        let text = "# comment\r\nshort:line\r\ndb.example:5432:app:alice:pa\\:ss\\\\w:ignored\n*:*:*:bob:any\n\\*:5432:app:carol:star\n\n"
        let entries = PasswordFile.entries(in: text)
        #expect(entries.map(\.line) == [3, 4, 5])
        guard entries.count == 3 else { return }
        #expect(entries[0].host == "db.example" && entries[0].port == "5432" && entries[0].database == "app" && entries[0].username == "alice")
        #expect(entries[0].password == "pa:ss\\w")
        #expect(entries[1].host == nil && entries[1].port == nil && entries[1].database == nil && entries[1].username == "bob")
        #expect(entries[2].host == "*", "an escaped star is a literal host name")
    }

    /// The password as libpq finds it: the URL's, else `PGPASSWORD`, else the first matching line of the password
    /// file (`passfile`, else `PGPASSFILE`, else `$HOME/.pgpass`), which is used only when no other user can read it.
    /// Where it came from is kept for messages; the password never is in them.
    @Test("password resolution: URL, then PGPASSWORD, then the password file's first matching line; an open file is not used, and says so")
    func passwordResolution() throws {
        let directory = NSTemporaryDirectory() + "bugle-pgpass-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/pgpass"
        try """
            db.example:6543:app:alice:FILE-CANARY-1
            db.example:*:*:alice:FILE-CANARY-2
            /var/run/postgresql:5432:bugle:bugle:SOCKET-CANARY
            localhost:5433:carol:carol:LOCAL-CANARY

            """.write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        let environment = ["PGPASSFILE": file, "HOME": directory]

        let fromURL = try DatabaseConfiguration(url: "postgres://alice:URL-CANARY@db.example:6543/app").resolvingPassword(environment: environment)
        #expect(fromURL.password == "URL-CANARY" && fromURL.passwordSource == .url)
        let fromVariable = try DatabaseConfiguration(url: "postgres://alice@db.example:6543/app")
            .resolvingPassword(environment: environment.merging(["PGPASSWORD": "ENV-CANARY"]) { $1 })
        #expect(fromVariable.password == "ENV-CANARY" && fromVariable.passwordSource == .environment)
        let first = try DatabaseConfiguration(url: "postgres://alice@db.example:6543/app").resolvingPassword(environment: environment)
        #expect(first.password == "FILE-CANARY-1" && first.passwordSource == .file(path: file, line: 1))
        let wildcard = try DatabaseConfiguration(url: "postgres://alice@db.example/other").resolvingPassword(environment: environment)
        #expect(wildcard.password == "FILE-CANARY-2" && wildcard.passwordSource == .file(path: file, line: 2))
        // The URL had no password, so none is shown as one (`:***` read as if the URL held it).
        #expect(!wildcard.description.contains("CANARY") && wildcard.description.hasPrefix("postgres://alice@"), "\(wildcard)")
        #expect(fromURL.description.hasPrefix("postgres://alice:***@") && fromVariable.description.hasPrefix("postgres://alice@"))
        #expect(wildcard.passwordSource?.explanation == "the password came from \(file) line 2")
        // A Unix socket in a default directory matches its path and `localhost`; the database defaults to the user.
        let socket = try DatabaseConfiguration(url: "postgres://bugle@/bugle?host=/var/run/postgresql").resolvingPassword(environment: environment)
        #expect(socket.password == "SOCKET-CANARY")
        let local = try DatabaseConfiguration(url: "postgres://carol@/?host=/tmp&port=5433").resolvingPassword(environment: environment)
        #expect(local.password == "LOCAL-CANARY")
        let elsewhere = try DatabaseConfiguration(url: "postgres://carol@/?host=/srv/pg&port=5433").resolvingPassword(environment: environment)
        #expect(elsewhere.password == nil, "a socket directory of its own does not count as localhost")

        let unmatched = try DatabaseConfiguration(url: "postgres://dave@db.example/app").resolvingPassword(environment: environment)
        #expect(unmatched.password == nil)
        #expect(unmatched.passwordSource == .missing(looked: "none in the URL, PGPASSWORD is not set, and no line of \(file) matches db.example:5432:app:dave"))
        // `passfile` in the URL beats PGPASSFILE; without either, $HOME/.pgpass (absent here) is read.
        let named = try DatabaseConfiguration(url: "postgres://dave@db.example/app?passfile=\(directory)/none").resolvingPassword(environment: environment)
        #expect(named.passwordSource == .missing(looked: "none in the URL, PGPASSWORD is not set, and there is no password file \(directory)/none"))
        #expect(named.description.contains("passfile=\(directory)/none"))
        let home = try DatabaseConfiguration(url: "postgres://alice@db.example:6543/app").resolvingPassword(environment: ["HOME": directory])
        #expect(home.passwordSource == .missing(looked: "none in the URL, PGPASSWORD is not set, and there is no password file \(directory)/.pgpass"))

        // Readable by others: not used when it has the line, and the reason names the file, line and mode only.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        let open = try DatabaseConfiguration(url: "postgres://alice@db.example:6543/app").resolvingPassword(environment: environment)
        #expect(open.password == nil)
        guard case .unusableFile(let message) = open.passwordSource else {
            Issue.record("an open password file was used: \(String(describing: open.passwordSource))")
            return
        }
        #expect(message.contains("\(file) has a line for db.example:6543:app:alice (line 1)") && message.contains("mode 644): chmod 600 it"), "\(message)")
        #expect(!message.contains("CANARY"))
        let openUnmatched = try DatabaseConfiguration(url: "postgres://dave@db.example/app").resolvingPassword(environment: environment)
        #expect(openUnmatched.passwordSource?.explanation.contains("no line of") == true, "an open file without the line is no one's business")
        let notAFile = try DatabaseConfiguration(url: "postgres://dave@db.example/app?passfile=\(directory)").resolvingPassword(environment: environment)
        #expect(notAFile.passwordSource == .unusableFile("the password file \(directory) is not a plain file"))
    }

    /// `sslpassword` decrypts an encrypted `sslkey`; without it the key is named as encrypted, with a wrong one the
    /// error says so; the passphrase appears in no description or error.
    @Test("sslpassword: an encrypted sslkey is opened with it, named as encrypted without it, and refused with a wrong one")
    func encryptedClientKey() throws {
        #expect(throws: StoreError.self) { try DatabaseConfiguration(url: "postgres://u@h/app?sslpassword=x") }
        let directory = NSTemporaryDirectory() + "bugle-sslpassword-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try SimulatorCertificates.generate(in: directory, port: 0)
        let identity = try SimulatorCertificates.generateLegacyClient(in: directory)
        let encrypted = directory + "/encrypted.key"
        #expect(try OpenSSLTool.encrypt(key: identity.keyFile, to: encrypted, passphrase: "PHRASE-CANARY") == 0)
        let base = "postgres://u@h/app?sslmode=require&sslcert=\(identity.certificateFile)&sslkey=\(encrypted)"
        func failure(_ url: String) throws -> String {
            do {
                _ = try DatabaseConfiguration(url: url).postgresClientConfiguration()
                return "opened"
            } catch let error as StoreError {
                return error.description
            }
        }
        #expect(try failure(base).contains("sslkey \(encrypted) is encrypted: give its passphrase as sslpassword"))
        let wrong = try failure(base + "&sslpassword=WRONG-CANARY")
        #expect(wrong.contains("cannot read sslkey \(encrypted) with the sslpassword given") && !wrong.contains("CANARY"), "\(wrong)")
        let right = try DatabaseConfiguration(url: base + "&sslpassword=PHRASE-CANARY")
        _ = try right.postgresClientConfiguration()
        #expect(right.description.contains("sslpassword=***") && !right.description.contains("CANARY"), "\(right)")
    }
}
