/// How a provider section reaches its endpoints: a section's `proxy:` key, read by ``ProviderSettingsLoader``.
///
/// - no `proxy:` key: the environment decides (`https_proxy` / `HTTPS_PROXY`, minus the hosts `no_proxy` /
///   `NO_PROXY` lists; loopback hosts are always reached directly), as curl and Go programs do;
/// - `proxy: none`: always directly, whatever the environment says;
/// - `proxy: http://host:port` or `https://host:port`: through that proxy's HTTP `CONNECT` tunnel (over TLS to the
///   proxy for `https://`), with the `user:password` held by the environment variable `proxy_credentials_env` names,
///   if any (the file never holds the password);
/// - `proxy: socks5h://host:port` (or `socks5://`): through that SOCKS5 proxy's tunnel, the proxy resolving the
///   provider's name, with `proxy_credentials_env`'s `user:password` for its username/password method.
///
/// ``HTTPProxy/resolve(_:caFile:host:environment:)`` turns a setting into the proxy one connection uses.
public enum ProxySetting: Sendable, Equatable {
    /// No `proxy:` key: `https_proxy` / `no_proxy` from the environment.
    case environment
    /// `proxy: none`.
    case direct
    /// `proxy: http(s)://host:port` (`tls` for `https://`) or `socks5h://host:port` (`socks`), with
    /// `proxy_credentials_env`.
    case proxy(host: String, port: Int, tls: Bool, credentialsEnv: String?, socks: Bool = false)
}
