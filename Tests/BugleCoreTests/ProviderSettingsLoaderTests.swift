import Foundation
import Testing

@testable import BugleCore

/// Fixture paths relative to this source file (not bundle resources).
private enum ProviderFixtures {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    static func path(_ name: String) -> String { folder.appendingPathComponent(name).path }
    static func resolved(_ relative: String) -> String {
        ConfigurationPath.normalize(folder.path + "/" + relative)
    }
}

/// Runs `body` and returns the ``ConfigurationError`` it throws, or records an issue.
private func providerError(_ body: () throws -> some Any) -> ConfigurationError? {
    do {
        _ = try body()
        Issue.record("expected a ConfigurationError, but loading succeeded")
    } catch let error as ConfigurationError {
        return error
    } catch {
        Issue.record("expected a ConfigurationError, got \(error)")
    }
    return nil
}

@Suite("ProviderSettingsLoader")
struct ProviderSettingsLoaderTests {
    static let badCases: [BadConfigurationCase] = [
        .init(
            fixture: "providers-negative-rate.yaml", line: 4, column: 17, keyPath: "fcm.rate.per_second",
            message: "must be greater than 0, got -5"),
        .init(
            fixture: "providers-http-endpoint.yaml", line: 3, column: 13, keyPath: "fcm.endpoint",
            message: "plain http:// endpoints are refused"),
        .init(
            fixture: "providers-both-auth.yaml", line: 6, column: 5, keyPath: "apns.auth.certificate",
            message: "give exactly one of token or certificate, not both"),
        .init(
            fixture: "providers-no-auth.yaml", line: 4, column: 3, keyPath: "apns.auth.token",
            message: "missing required key 'token' (or certificate; exactly one is required)"),
        .init(
            fixture: "providers-team-id.yaml", line: 6, column: 16, keyPath: "apns.auth.token.team_id",
            message: "must be exactly 10 letters or digits, got 9 characters"),
        .init(
            fixture: "providers-unknown-key.yaml", line: 6, column: 3, keyPath: "apns.conections",
            message: "unknown key 'conections' (did you mean 'connections'?); allowed keys: endpoint, ca_file, topic"),
        .init(
            fixture: "providers-missing-key-file.yaml", line: 5, column: 5, keyPath: "apns.auth.token.key_file",
            message: "missing required key 'key_file'"),
        .init(
            fixture: "providers-duplicate-key.yaml", line: 4, column: 3, keyPath: "fcm.service_account_file",
            message: "duplicate key 'service_account_file' (first defined at line 2, column 3)"),
        .init(
            fixture: "providers-inline-secret.yaml", line: 8, column: 23,
            keyPath: "apns.auth.certificate.passphrase_env",
            message: "must name an environment variable"),
        .init(
            fixture: "providers-wrong-type.yaml", line: 3, column: 9, keyPath: "legacy_apns.port",
            message: "expected an integer, got a string"),
    ]

    @Test("rejects a bad fixture at the exact line, column and key path", arguments: badCases)
    func rejectsBadFixture(_ bad: BadConfigurationCase) throws {
        let path = ProviderFixtures.path(bad.fixture)
        let error = try #require(providerError { try ProviderSettingsLoader.load(path: path) })
        #expect(error.line == bad.line, "\(error)")
        #expect(error.column == bad.column, "\(error)")
        #expect(error.keyPath == bad.keyPath, "\(error)")
        #expect(error.message.contains(bad.message), "\(error)")
    }

    @Test("errors never quote values from the providers file")
    func errorsDoNotLeakValues() throws {
        let error = try #require(
            providerError {
                try ProviderSettingsLoader.load(path: ProviderFixtures.path("providers-inline-secret.yaml"))
            })
        #expect(!error.description.contains("hunter2"))

        let pasted = """
            apns:
              endpoint: sandbox
              topic: com.example.app
              auth:
                token: { team_id: TEAM123456, key_id: ABC123DEFG, key_file: "-----BEGIN PRIVATE KEY-----MIGTAgEAMBMG" }
            """
        let pastedError = try #require(providerError { try ProviderSettingsLoader.load(yaml: pasted, path: "p.yaml") })
        #expect(pastedError.keyPath == "apns.auth.token.key_file")
        #expect(!pastedError.description.contains("MIGTAgEAMBMG"))
        // The key's base64 body alone, as secret stores hand it out: refused as contents, not printed as a path that
        // cannot be read (the audit saw the whole key in `cannot read p/MIGHAgEA…`).
        // A throwaway P-256 key made for this test (with `/`: a whole DER body), and the first 60 characters of another
        // (no `/`: cut off).
        let whole = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOKT0n/HaxUHEysI20i71wCJow0W6hXWHTMzNRt75uTShRANCAATeEi2klQiAvYwfaadOqxZ4GkcNFsfStQ6Fd7yaHIndO7Ase/lrWyTaknPWs8CqMjG1U9lz0JXnp8I/1bZQM/I7"
        let cut = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg65FEMYWC5Zfa"
        for body in [whole, cut] {
            for section in [
                "apns: { endpoint: sandbox, topic: com.example.app, auth: { token: { team_id: TEAM123456, key_id: ABC123DEFG, key_file: \"\(body)\" } } }",
                "legacy_apns: { host: gateway.sandbox.push.apple.com, cert_file: c.pem, key_file: \"\(body)\" }",
            ] {
                let bare = try #require(providerError { try ProviderSettingsLoader.load(yaml: section, path: "p.yaml") })
                #expect(bare.message.contains("not a key's base64 contents"), "\(bare)")
                #expect(!bare.description.contains("MIGHAgEA") && !bare.description.contains("AwEHBG0w"), "\(bare)")
            }
        }
        // A path is still a path, however long.
        #expect(!PastedSecret.looksLikeEncodedKey("/etc/bugle/keys/AuthKey_ABC123DEFG.p8"))
        #expect(!PastedSecret.looksLikeEncodedKey("MIGRATED/keys/apns/production/authentication/key"))
        #expect(!PastedSecret.looksLikeEncodedKey("MIGRATED/2024/Keys/apns/production/authentication/key7"))

        let wrongType = "fcm: { connections: s3cr3t-value }"
        let wrongTypeError = try #require(
            providerError { try ProviderSettingsLoader.load(yaml: wrongType, path: "p.yaml") })
        #expect(wrongTypeError.message == "expected an integer, got a string")
    }

    @Test("decodes the complete fixture, resolving file paths against its folder")
    func decodesGoodFixture() throws {
        let path = ProviderFixtures.path("providers-good.yaml")
        let settings = try ProviderSettingsLoader.load(path: path)
        let expected = ProviderSettings(
            apns: APNsSettings(
                endpoint: Endpoint(host: "127.0.0.1", port: 8443),
                caFile: ProviderFixtures.resolved("sim/ca.pem"),
                topic: "com.example.app",
                auth: .token(
                    teamID: "TEAM123456", keyID: "ABC123DEFG",
                    keyFile: ProviderFixtures.resolved("keys/AuthKey_ABC123DEFG.p8")),
                connections: 8,
                timeoutSeconds: 5,
                rate: RateLimit(perSecond: 5000, burst: 1000)),
            fcm: FCMSettings(
                serviceAccountFile: ProviderFixtures.resolved("keys/service-account.json"),
                endpoint: .fcm,
                caFile: "/etc/bugle/ca.pem",
                connections: 3,
                timeoutSeconds: 2.5,
                rate: RateLimit(perSecond: 2500.5, burst: 51)),
            legacyAPNs: LegacyAPNsSettings(
                enabled: false,
                host: "127.0.0.1",
                port: 2195,
                feedbackPort: 2196,
                certFile: ProviderFixtures.resolved("keys/legacy-client.pem"),
                keyFile: ProviderFixtures.resolved("keys/legacy-client.key"),
                caFile: ProviderFixtures.resolved("../sim/ca.pem"),
                payloadLimit: 2048,
                connections: 1,
                rate: nil),
            sourcePath: path)
        #expect(settings == expected)
    }

    @Test("certificate auth with a passphrase variable, and named endpoints")
    func certificateAuth() throws {
        let settings = try ProviderSettingsLoader.load(path: ProviderFixtures.path("providers-certificate.yaml"))
        let apns = try #require(settings.apns)
        #expect(apns.endpoint == .apnsSandbox)
        #expect(
            apns.auth
                == .certificate(
                    certFile: ProviderFixtures.resolved("keys/apns.pem"),
                    keyFile: ProviderFixtures.resolved("keys/apns.key"),
                    passphraseEnv: "APNS_KEY_PASSPHRASE"))
        #expect(apns.connections == 4 && apns.timeoutSeconds == 10 && apns.rate == nil)
        #expect(settings.fcm == nil && settings.legacyAPNs == nil)
        // FCM's default: 8 connections × Google's 100 streams, enough in flight for its 10,000/s quota rate up to an
        // 80 ms round trip.
        let fcm = try ProviderSettingsLoader.load(yaml: "fcm: { service_account_file: sa.json }", path: "/etc/bugle/providers.yaml").fcm
        #expect(fcm?.connections == 8 && fcm?.concurrency == nil && fcm?.timeoutSeconds == 10)

        let p12 = """
            apns:
              endpoint: production
              topic: com.example.app
              auth: { certificate: { p12_file: keys/apns.p12 } }
            """
        let p12Settings = try ProviderSettingsLoader.load(yaml: p12, path: "/etc/bugle/providers.yaml")
        #expect(p12Settings.apns?.endpoint == .apnsProduction)
        #expect(
            p12Settings.apns?.auth
                == .certificate(certFile: "/etc/bugle/keys/apns.p12", keyFile: nil, passphraseEnv: nil))
    }

    @Test(
        "endpoints",
        arguments: [
            ("https://fcm.googleapis.com", "fcm.googleapis.com", 443),
            ("https://127.0.0.1:8443/", "127.0.0.1", 8443),
            ("https://[::1]:9443", "::1", 9443),
            ("HTTPS://localhost:1", "localhost", 1),
        ])
    func endpoints(url: String, host: String, port: Int) throws {
        let settings = try ProviderSettingsLoader.load(yaml: "fcm: { endpoint: \"\(url)\" }", path: "p.yaml")
        #expect(settings.fcm?.endpoint == Endpoint(host: host, port: port))
        // Printed as a URL: an IPv6 address in brackets (validate's route read `https://::1:9443`).
        let written = host.contains(":") ? "[\(host)]" : host
        #expect(settings.fcm?.endpoint.description == "https://\(written):\(port)")
        #expect(settings.fcm?.endpoint.authority == (port == 443 ? written : "\(written):\(port)"))
    }

    /// An unset or malformed proxy_credentials_env named only the file and the section: its name was not noted.
    @Test("proxy_credentials_env is located like the paths, so an error naming its variable gets its line, column and key")
    func proxyCredentialsLocated() throws {
        let yaml = """
            legacy_apns:
              host: 127.0.0.1
              cert_file: c.pem
              key_file: k.pem
              proxy: http://127.0.0.1:3128
              proxy_credentials_env: PX_CRED
            apns:
              endpoint: production
              topic: com.example.app
              auth: { token: { team_id: ABCDE12345, key_id: KEY1234567, key_file: a.p8 } }
              proxy: socks5h://127.0.0.1:1080
              proxy_credentials_env: PX_OTHER
            """
        let settings = try ProviderSettingsLoader.load(yaml: yaml, path: "p.yaml")
        #expect(
            settings.locating(ProxyConfigurationError.missingCredentials(variable: "PX_CRED").description, section: "legacy_apns")
                == "p.yaml:6:26: legacy_apns.proxy_credentials_env: proxy_credentials_env names PX_CRED, which is not set in the environment")
        #expect(
            settings.locating(ProxyConfigurationError.malformedCredentials(variable: "PX_OTHER").description, section: "apns")
                == "p.yaml:12:26: apns.proxy_credentials_env: PX_OTHER (proxy_credentials_env) must hold user:password")
    }

    @Test("legacy_apns.host takes an IPv6 address as it is", arguments: ["::1", "2001:db8::7"])
    func legacyIPv6Host(_ host: String) throws {
        let settings = try ProviderSettingsLoader.load(yaml: "legacy_apns: { host: \"\(host)\", cert_file: c, key_file: k }", path: "p.yaml")
        #expect(settings.legacyAPNs?.host == host)
    }

    @Test(
        "bad values",
        arguments: [
            ("fcm: { endpoint: \"https://user:pw@host\" }", "fcm.endpoint", "no path, query or user name"),
            ("fcm: { endpoint: \"https://host:70000\" }", "fcm.endpoint", "port must be between 1 and 65535"),
            ("fcm: { endpoint: ftp://host }", "fcm.endpoint", "expected an https://host[:port] URL"),
            ("fcm: { rate: { per_second: 0 } }", "fcm.rate.per_second", "must be greater than 0"),
            ("fcm: { rate: { per_second: 10, burst: 0 } }", "fcm.rate.burst", "must be at least 1"),
            ("fcm: { timeout: 0s }", "fcm.timeout", "must be at least 1 second and at most 300 seconds, got 0 s"),
            ("fcm: { timeout: 1ms }", "fcm.timeout", "must be at least 1 second and at most 300 seconds, got 0.001 s"),
            (
                "apns: { endpoint: http://h, topic: t, auth: {} }", "apns.endpoint",
                "plain http:// endpoints are refused"
            ),
            (
                "legacy_apns: { host: \"ssl://gateway\", cert_file: c, key_file: k }", "legacy_apns.host",
                "without scheme"
            ),
            ("legacy_apns: { host: h, cert_file: c }", "legacy_apns.key_file", "missing required key 'key_file'"),
            // A colon is an IPv6 address's only: a port written into the host used to pass, then fail every connect.
            ("legacy_apns: { host: \"gateway.push.apple.com:2195\", cert_file: c, key_file: k }", "legacy_apns.host", "without a port"),
            ("legacy_apns: { host: \"127.0.0.1:2195\", cert_file: c, key_file: k }", "legacy_apns.host", "the port is `port:`"),
            ("legacy_apns: { host: \"a:b:c\", cert_file: c, key_file: k }", "legacy_apns.host", "without a port"),
            ("legacy_apns: { host: \"[::1]\", cert_file: c, key_file: k }", "legacy_apns.host", "without brackets"),
            ("{}", "", "no provider is configured"),
        ])
    func badValues(yaml: String, keyPath: String, message: String) throws {
        let error = try #require(providerError { try ProviderSettingsLoader.load(yaml: yaml, path: "p.yaml") })
        #expect(error.keyPath == keyPath, "\(error)")
        #expect(error.message.contains(message), "\(error)")
    }
}
