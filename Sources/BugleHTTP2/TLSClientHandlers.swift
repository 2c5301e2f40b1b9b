import BugleCore
import NIOCore
import NIOSSL

/// The TLS client handler for every provider connection (APNs, FCM, OAuth2, legacy gateway and feedback): the usual
/// verification — chain, validity, host name — and one more check on the host name.
///
/// swift-nio-ssl accepts a certificate whose IP addresses include the address it connected to, whatever host name
/// was asked for. Bugle asks for names (`api.push.apple.com`): a certificate any trusted CA issued for an attacker's
/// own address passed for Apple's once DNS pointed the name there. When the endpoint is a name, the certificate must
/// name it among its DNS names (a certificate with none is judged by its common name, as swift-nio-ssl already did).
public enum TLSClientHandlers {
    /// A client handler for `serverHostname` (nil: no SNI, no name to check).
    public static func make(context: NIOSSLContext, serverHostname: String?) throws -> NIOSSLClientHandler {
        guard let hostname = serverHostname, !IPAddressLiteral.isAddress(hostname) else {
            return try NIOSSLClientHandler(context: context, serverHostname: serverHostname)
        }
        return try NIOSSLClientHandler._makeSSLClientHandler(context: context, serverHostname: hostname) { certificate, channel in
            if CertificateNames(certificate).allows(hostname: hostname) {
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            return channel.eventLoop.makeFailedFuture(NIOSSLExtraError.failedToValidateHostname)
        }
    }
}

/// The DNS names of a leaf certificate, and whether one of them covers a host name (RFC 6125: case-insensitive,
/// a trailing dot ignored, a `*` only as the whole leftmost label, matching exactly one label).
struct CertificateNames {
    /// The certificate's DNS names, lowercased, without a trailing dot.
    let dnsNames: [String]
    /// Whether the certificate has any subject alternative name at all.
    let hasAlternativeNames: Bool

    init(_ certificate: NIOSSLCertificate) {
        var names: [String] = []
        var any = false
        for name in certificate._subjectAlternativeNames() {
            any = true
            if name.nameType == .dnsName { names.append(Self.normalized(String(decoding: name.contents, as: UTF8.self))) }
        }
        self.init(dnsNames: names, hasAlternativeNames: any)
    }

    init(dnsNames: [String], hasAlternativeNames: Bool) {
        self.dnsNames = dnsNames
        self.hasAlternativeNames = hasAlternativeNames
    }

    /// Whether the certificate covers `hostname`. With no alternative names at all swift-nio-ssl judged the common
    /// name already; with only IP addresses, no name is covered.
    func allows(hostname: String) -> Bool {
        guard hasAlternativeNames else { return true }
        let host = Self.normalized(hostname)
        return dnsNames.contains { Self.matches(pattern: $0, host: host) }
    }

    static func matches(pattern: String, host: String) -> Bool {
        if pattern == host { return true }
        guard pattern.hasPrefix("*.") else { return false }
        let suffix = pattern.dropFirst(1)  // ".example.com"
        guard host.hasSuffix(suffix), let dot = host.firstIndex(of: ".") else { return false }
        // The wildcard stands for exactly the first label, which must not be empty.
        return host[dot...] == suffix && dot != host.startIndex
    }

    private static func normalized(_ name: String) -> String {
        let lower = name.lowercased()
        return lower.hasSuffix(".") ? String(lower.dropLast()) : lower
    }
}
