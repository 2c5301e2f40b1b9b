import Foundation
import Testing

@testable import BugleCore

@Suite("HTTP proxy settings: the providers file's proxy keys, https_proxy and no_proxy")
struct HTTPProxyTests {
    static func providers(_ apnsExtra: String) -> String {
        """
        apns:
          endpoint: production
          topic: com.example.app
          auth:
            token: { team_id: ABCDE12345, key_id: KEY1234567, key_file: key.p8 }
        \(apnsExtra)
        """
    }

    static func loadError(_ yaml: String) -> ConfigurationError? {
        do {
            _ = try ProviderSettingsLoader.load(yaml: yaml, path: "/tmp/providers.yaml")
        } catch let error as ConfigurationError {
            return error
        } catch {
            Issue.record("expected a ConfigurationError, got \(error)")
        }
        return nil
    }

    @Test("proxy: absent → the environment; none → direct; an http or https URL with proxy_credentials_env → that proxy; proxy_ca_file beside https")
    func choices() throws {
        let absent = try ProviderSettingsLoader.load(yaml: Self.providers(""), path: "/tmp/p.yaml")
        #expect(absent.apns?.proxy == .environment)
        let none = try ProviderSettingsLoader.load(yaml: Self.providers("  proxy: none"), path: "/tmp/p.yaml")
        #expect(none.apns?.proxy == ProxySetting.direct)
        let url = try ProviderSettingsLoader.load(
            yaml: Self.providers("  proxy: http://proxy.corp.example:3128/\n  proxy_credentials_env: CORP_PROXY"), path: "/tmp/p.yaml")
        #expect(url.apns?.proxy == .proxy(host: "proxy.corp.example", port: 3128, tls: false, credentialsEnv: "CORP_PROXY"))
        let ipv6 = try ProviderSettingsLoader.load(yaml: Self.providers("  proxy: http://[fd00::1]"), path: "/tmp/p.yaml")
        #expect(ipv6.apns?.proxy == .proxy(host: "fd00::1", port: 80, tls: false, credentialsEnv: nil))
        let https = try ProviderSettingsLoader.load(
            yaml: Self.providers("  proxy: HTTPS://proxy.corp.example\n  proxy_ca_file: certs/corp-ca.pem"), path: "/etc/bugle/providers.yaml")
        #expect(https.apns?.proxy == .proxy(host: "proxy.corp.example", port: 443, tls: true, credentialsEnv: nil))
        #expect(https.apns?.proxyCAFile == "/etc/bugle/certs/corp-ca.pem")
        // proxy_ca_file without proxy: applies to an https:// proxy the environment names.
        let environmentCA = try ProviderSettingsLoader.load(yaml: Self.providers("  proxy_ca_file: /etc/ssl/corp.pem"), path: "/tmp/p.yaml")
        #expect(environmentCA.apns?.proxy == .environment && environmentCA.apns?.proxyCAFile == "/etc/ssl/corp.pem")
    }

    @Test("legacy_apns: takes the same proxy keys (absent → the environment; a SOCKS5 proxy; proxy_ca_file only beside https), errors naming legacy_apns's key")
    func legacySection() throws {
        func legacy(_ extra: String) -> String {
            "legacy_apns:\n  host: gateway.push.apple.com\n  cert_file: legacy.pem\n  key_file: legacy.key\n" + extra
        }
        let absent = try ProviderSettingsLoader.load(yaml: legacy(""), path: "/tmp/p.yaml")
        #expect(absent.legacyAPNs?.proxy == .environment && absent.legacyAPNs?.proxyCAFile == nil)
        let socks = try ProviderSettingsLoader.load(yaml: legacy("  proxy: socks5h://bastion:1080\n  proxy_credentials_env: BASTION"), path: "/tmp/p.yaml")
        #expect(socks.legacyAPNs?.proxy == .proxy(host: "bastion", port: 1080, tls: false, credentialsEnv: "BASTION", socks: true))
        let https = try ProviderSettingsLoader.load(yaml: legacy("  proxy: https://proxy.corp.example:8443\n  proxy_ca_file: corp.pem"), path: "/etc/bugle/p.yaml")
        #expect(https.legacyAPNs?.proxy == .proxy(host: "proxy.corp.example", port: 8443, tls: true, credentialsEnv: nil))
        #expect(https.legacyAPNs?.proxyCAFile == "/etc/bugle/corp.pem")
        let none = try ProviderSettingsLoader.load(yaml: legacy("  proxy: none"), path: "/tmp/p.yaml")
        #expect(none.legacyAPNs?.proxy == ProxySetting.direct)

        let caWithHTTP = try #require(Self.loadError(legacy("  proxy: http://proxy:3128\n  proxy_ca_file: ca.pem")))
        #expect(caWithHTTP.line == 6 && caWithHTTP.keyPath == "legacy_apns.proxy_ca_file" && caWithHTTP.message.contains("only to an https:// proxy"), "\(caWithHTTP)")
        let inline = try #require(Self.loadError(legacy("  proxy: http://alice:hunter2@proxy:3128")))
        #expect(inline.keyPath == "legacy_apns.proxy" && !inline.description.contains("hunter2"), "\(inline)")
        let lonely = try #require(Self.loadError(legacy("  proxy_credentials_env: CORP_PROXY")))
        #expect(lonely.keyPath == "legacy_apns.proxy_credentials_env" && lonely.message.contains("needs proxy"), "\(lonely)")
    }

    @Test("bad proxy keys name the line, column and key, and never quote a password")
    func badKeys() throws {
        let inline = try #require(Self.loadError(Self.providers("  proxy: http://alice:hunter2@proxy:3128")))
        #expect(inline.line == 6 && inline.column == 10 && inline.keyPath == "apns.proxy", "\(inline)")
        #expect(inline.message.contains("proxy_credentials_env") && !inline.description.contains("hunter2"), "\(inline)")

        let inlineTLS = try #require(Self.loadError(Self.providers("  proxy: https://alice:hunter2@proxy")))
        #expect(inlineTLS.keyPath == "apns.proxy" && !inlineTLS.description.contains("hunter2"), "\(inlineTLS)")
        let socks = try #require(Self.loadError(Self.providers("  proxy: socks4://proxy:1080")))
        #expect(socks.keyPath == "apns.proxy" && socks.message.contains("only http://, https:// and socks5h:// (or socks5://) proxies"), "\(socks)")
        let socksCA = try #require(Self.loadError(Self.providers("  proxy: socks5h://proxy\n  proxy_ca_file: ca.pem")))
        #expect(socksCA.keyPath == "apns.proxy_ca_file" && socksCA.message.contains("an http:// or SOCKS proxy has no TLS"), "\(socksCA)")
        let caWithHTTP = try #require(Self.loadError(Self.providers("  proxy: http://proxy:3128\n  proxy_ca_file: ca.pem")))
        #expect(caWithHTTP.line == 7 && caWithHTTP.keyPath == "apns.proxy_ca_file" && caWithHTTP.message.contains("only to an https:// proxy"), "\(caWithHTTP)")
        let caWithNone = try #require(Self.loadError(Self.providers("  proxy: none\n  proxy_ca_file: ca.pem")))
        #expect(caWithNone.keyPath == "apns.proxy_ca_file" && caWithNone.message.contains("proxy: none"), "\(caWithNone)")
        let port = try #require(Self.loadError(Self.providers("  proxy: http://proxy:99999")))
        #expect(port.message.contains("the port must be between 1 and 65535"), "\(port)")

        let lonely = try #require(Self.loadError(Self.providers("  proxy_credentials_env: CORP_PROXY")))
        #expect(lonely.line == 6 && lonely.keyPath == "apns.proxy_credentials_env" && lonely.message.contains("needs proxy"), "\(lonely)")
        let withNone = try #require(Self.loadError(Self.providers("  proxy: none\n  proxy_credentials_env: CORP_PROXY")))
        #expect(withNone.line == 7 && withNone.message.contains("proxy: none"), "\(withNone)")
        let secret = try #require(Self.loadError(Self.providers("  proxy: http://proxy:3128\n  proxy_credentials_env: alice:hunter2")))
        #expect(secret.keyPath == "apns.proxy_credentials_env" && !secret.description.contains("hunter2"), "\(secret)")
    }

    @Test("an explicit proxy: credentials from the named variable as Basic; an unset or malformed variable is an error naming it, not its value")
    func explicitProxy() throws {
        let setting = ProxySetting.proxy(host: "proxy", port: 3128, tls: false, credentialsEnv: "CORP_PROXY")
        let proxy = try HTTPProxy.resolve(setting, host: "api.push.apple.com", environment: ["CORP_PROXY": "alice:hunter2"])
        #expect(proxy == HTTPProxy(host: "proxy", port: 3128, authorization: "Basic YWxpY2U6aHVudGVyMg=="))
        #expect(proxy?.description == "http://proxy:3128 (with credentials)")
        #expect(!String(describing: proxy).contains("hunter2") && !String(reflecting: proxy).contains("YWxpY2U6"))
        // An explicit proxy is used for every host, loopback included, and whatever no_proxy says.
        #expect(try HTTPProxy.resolve(setting, host: "127.0.0.1", environment: ["CORP_PROXY": "a:b", "no_proxy": "*"]) != nil)

        #expect(throws: ProxyConfigurationError.missingCredentials(variable: "CORP_PROXY")) {
            try HTTPProxy.resolve(setting, host: "api.push.apple.com", environment: [:])
        }
        #expect(throws: ProxyConfigurationError.malformedCredentials(variable: "CORP_PROXY")) {
            try HTTPProxy.resolve(setting, host: "api.push.apple.com", environment: ["CORP_PROXY": "hunter2"])
        }
        #expect(!ProxyConfigurationError.malformedCredentials(variable: "CORP_PROXY").description.contains("hunter2"))
        #expect(try HTTPProxy.resolve(.direct, host: "api.push.apple.com", environment: ["https_proxy": "http://proxy:3128"]) == nil)

        // An https:// proxy carries TLS and its CA; an http:// one never takes a CA.
        let secure = try HTTPProxy.resolve(
            .proxy(host: "proxy", port: 8443, tls: true, credentialsEnv: "CORP_PROXY"), caFile: "/ca.pem", host: "fcm.googleapis.com",
            environment: ["CORP_PROXY": "alice:hunter2"])
        #expect(secure == HTTPProxy(host: "proxy", port: 8443, tls: true, caFile: "/ca.pem", authorization: "Basic YWxpY2U6aHVudGVyMg=="))
        #expect(secure?.description == "https://proxy:8443 (with credentials)")
        #expect(try HTTPProxy.resolve(.proxy(host: "p", port: 80, tls: false, credentialsEnv: nil), caFile: "/ca.pem", host: "h", environment: [:])?.caFile == nil)
    }

    @Test("https_proxy from the environment: user:password in the URL, lower case first, no scheme means http, loopback and no_proxy hosts go direct")
    func environmentProxy() throws {
        func resolve(_ host: String, _ environment: [String: String]) throws -> HTTPProxy? {
            try HTTPProxy.resolve(.environment, host: host, environment: environment)
        }
        #expect(try resolve("api.push.apple.com", [:]) == nil)
        #expect(try resolve("api.push.apple.com", ["HTTPS_PROXY": "http://upper:8080"]) == HTTPProxy(host: "upper", port: 8080))
        #expect(try resolve("api.push.apple.com", ["HTTPS_PROXY": "http://upper:8080", "https_proxy": "lower:3128"]) == HTTPProxy(host: "lower", port: 3128))
        #expect(
            try resolve("fcm.googleapis.com", ["https_proxy": "http://bob:p%40ss@proxy:3128"])
                == HTTPProxy(host: "proxy", port: 3128, authorization: HTTPProxy.basicAuthorization("bob:p@ss")))
        for loopback in ["127.0.0.1", "localhost", "::1", "127.1.2.3", "sim.localhost"] {
            #expect(try resolve(loopback, ["https_proxy": "http://proxy:3128"]) == nil, "\(loopback)")
        }
        let bypass = ["https_proxy": "http://proxy:3128", "NO_PROXY": ".googleapis.com, api.sandbox.push.apple.com:443 10.0.0.7"]
        #expect(try resolve("fcm.googleapis.com", bypass) == nil)
        #expect(try resolve("googleapis.com", bypass) == nil)
        #expect(try resolve("api.sandbox.push.apple.com", bypass) == nil)
        #expect(try resolve("10.0.0.7", bypass) == nil)
        #expect(try resolve("api.push.apple.com", bypass) == HTTPProxy(host: "proxy", port: 3128))
        #expect(try resolve("notgoogleapis.com", bypass) == HTTPProxy(host: "proxy", port: 3128))
        #expect(try resolve("api.push.apple.com", ["https_proxy": "http://proxy:3128", "no_proxy": "*"]) == nil)
        #expect(
            try HTTPProxy.resolve(.environment, caFile: "/ca.pem", host: "api.push.apple.com", environment: ["https_proxy": "https://carol:pw@tls-proxy"])
                == HTTPProxy(host: "tls-proxy", port: 443, tls: true, caFile: "/ca.pem", authorization: HTTPProxy.basicAuthorization("carol:pw")))

        do throws(ProxyConfigurationError) {
            _ = try HTTPProxy.resolve(.environment, host: "api.push.apple.com", environment: ["https_proxy": "ftp://alice:hunter2@proxy:1080"])
            Issue.record("an ftp proxy was accepted")
        } catch {
            #expect(error.description.contains("https_proxy") && error.description.contains("only http://, https:// and socks5h://"), "\(error)")
            #expect(!error.description.contains("hunter2"))
        }
    }

    @Test("SOCKS5: socks5h:// (and socks5://) in the providers file or https_proxy / all_proxy, port 1080 by default, credentials kept for RFC 1929, never shown")
    func socks() throws {
        let file = try ProviderSettingsLoader.load(
            yaml: Self.providers("  proxy: socks5h://bastion.corp.example\n  proxy_credentials_env: CORP_SOCKS"), path: "/tmp/p.yaml")
        let setting = try #require(file.apns?.proxy)
        #expect(setting == .proxy(host: "bastion.corp.example", port: 1080, tls: false, credentialsEnv: "CORP_SOCKS", socks: true))
        let proxy = try #require(try HTTPProxy.resolve(setting, host: "api.push.apple.com", environment: ["CORP_SOCKS": "alice:hunter2"]))
        #expect(proxy == .socks5(host: "bastion.corp.example", port: 1080, credentials: "alice:hunter2") && proxy.authorization == nil)
        #expect(proxy.description == "socks5h://bastion.corp.example:1080 (with credentials)")
        #expect(!String(describing: proxy).contains("hunter2"))
        let plain = try ProviderSettingsLoader.load(yaml: Self.providers("  proxy: socks5://127.0.0.1:9050"), path: "/tmp/p.yaml")
        #expect(plain.apns?.proxy == .proxy(host: "127.0.0.1", port: 9050, tls: false, credentialsEnv: nil, socks: true))

        func resolve(_ environment: [String: String]) throws -> HTTPProxy? {
            try HTTPProxy.resolve(.environment, host: "fcm.googleapis.com", environment: environment)
        }
        #expect(try resolve(["https_proxy": "socks5h://bob:p%40ss@127.0.0.1:1080"]) == .socks5(host: "127.0.0.1", port: 1080, credentials: "bob:p@ss"))
        #expect(try resolve(["ALL_PROXY": "socks5h://127.0.0.1"]) == .socks5(host: "127.0.0.1", port: 1080, credentials: nil))
        #expect(try resolve(["all_proxy": "socks5h://a:1", "https_proxy": "http://proxy:3128"]) == HTTPProxy(host: "proxy", port: 3128), "https_proxy first")
        #expect(try HTTPProxy.resolve(.environment, host: "127.0.0.1", environment: ["all_proxy": "socks5h://a:1"]) == nil)
        #expect(throws: ProxyConfigurationError.socksCredentialLength(variable: "https_proxy")) {
            try resolve(["https_proxy": "socks5h://bob@127.0.0.1"])
        }
        #expect(throws: ProxyConfigurationError.socksCredentialLength(variable: "CORP_SOCKS")) {
            try HTTPProxy.resolve(setting, host: "h", environment: ["CORP_SOCKS": "alice:" + String(repeating: "x", count: 256)])
        }
    }
}
