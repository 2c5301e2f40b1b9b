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

    @Test("proxy: absent → the environment; none → direct; an http URL with proxy_credentials_env → that proxy")
    func choices() throws {
        let absent = try ProviderSettingsLoader.load(yaml: Self.providers(""), path: "/tmp/p.yaml")
        #expect(absent.apns?.proxy == .environment)
        let none = try ProviderSettingsLoader.load(yaml: Self.providers("  proxy: none"), path: "/tmp/p.yaml")
        #expect(none.apns?.proxy == ProxySetting.direct)
        let url = try ProviderSettingsLoader.load(
            yaml: Self.providers("  proxy: http://proxy.corp.example:3128/\n  proxy_credentials_env: CORP_PROXY"), path: "/tmp/p.yaml")
        #expect(url.apns?.proxy == .proxy(host: "proxy.corp.example", port: 3128, credentialsEnv: "CORP_PROXY"))
        let ipv6 = try ProviderSettingsLoader.load(yaml: Self.providers("  proxy: http://[fd00::1]"), path: "/tmp/p.yaml")
        #expect(ipv6.apns?.proxy == .proxy(host: "fd00::1", port: 80, credentialsEnv: nil))
    }

    @Test("bad proxy keys name the line, column and key, and never quote a password")
    func badKeys() throws {
        let inline = try #require(Self.loadError(Self.providers("  proxy: http://alice:hunter2@proxy:3128")))
        #expect(inline.line == 6 && inline.column == 10 && inline.keyPath == "apns.proxy", "\(inline)")
        #expect(inline.message.contains("proxy_credentials_env") && !inline.description.contains("hunter2"), "\(inline)")

        let https = try #require(Self.loadError(Self.providers("  proxy: https://proxy:3128")))
        #expect(https.keyPath == "apns.proxy" && https.message.contains("only http:// proxies are supported"), "\(https)")
        let socks = try #require(Self.loadError(Self.providers("  proxy: socks5://proxy:1080")))
        #expect(socks.message.contains("only http:// proxies"), "\(socks)")
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
        let setting = ProxySetting.proxy(host: "proxy", port: 3128, credentialsEnv: "CORP_PROXY")
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

        do throws(ProxyConfigurationError) {
            _ = try HTTPProxy.resolve(.environment, host: "api.push.apple.com", environment: ["https_proxy": "socks5://alice:hunter2@proxy:1080"])
            Issue.record("a socks proxy was accepted")
        } catch {
            #expect(error.description.contains("https_proxy") && error.description.contains("only http://"), "\(error)")
            #expect(!error.description.contains("hunter2"))
        }
    }
}
