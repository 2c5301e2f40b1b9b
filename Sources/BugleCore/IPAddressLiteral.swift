import Foundation

/// Whether a host as written is an IP address literal, as `inet_pton` reads it.
public enum IPAddressLiteral {
    /// An IPv6 address (`::1`, `2001:db8::1`), without brackets.
    public static func isIPv6(_ text: String) -> Bool {
        var address = in6_addr()
        return text.withCString { inet_pton(AF_INET6, $0, &address) } == 1
    }

    /// An IPv4 or IPv6 address, an IPv6 one with or without brackets (`127.0.0.1`, `[::1]`).
    public static func isAddress(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        return isIPv6(bare) || bare.withCString { inet_pton(AF_INET, $0, &v4) } == 1
    }
}
