import NIOSSL

/// Recognises a TLS handshake that failed on a certificate: the server's, refused by Bugle (not issued by a CA Bugle
/// trusts, expired, or not naming the host), or Bugle's own client certificate, refused by the server (its alert
/// names the certificate). Either is a configuration error that reconnecting cannot fix, unlike a refused, reset or
/// timed-out connection.
public enum TLSCertificateRejection {
    /// The alerts a server sends when it refuses the client's certificate (BoringSSL's reason names).
    static let clientCertificateAlerts = [
        "SSLV3_ALERT_NO_CERTIFICATE", "SSLV3_ALERT_BAD_CERTIFICATE", "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
        "SSLV3_ALERT_CERTIFICATE_REVOKED", "SSLV3_ALERT_CERTIFICATE_EXPIRED", "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
        "TLSV1_ALERT_UNKNOWN_CA", "TLSV1_ALERT_ACCESS_DENIED", "TLSV1_ALERT_CERTIFICATE_REQUIRED",
    ]

    /// What to tell the user, or nil when `error` is not a refused certificate.
    public static func reason(for error: any Error) -> String? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "the server's TLS certificate is not valid for this host name (\(extra)); check the endpoint"
        }
        let text: String
        switch error {
        case NIOSSLError.handshakeFailed(let underlying):
            text = String(describing: underlying)
        case BoringSSLError.sslError(let underlying):
            // TLS 1.3: the server's verdict on the client's certificate (or its lack of one) comes after the client's
            // handshake completed, as a read error. It was taken for a lost connection: every request written on it
            // `unknown`, and the run `completed`.
            text = String(describing: underlying)
            guard clientCertificateAlerts.contains(where: text.contains) else { return nil }
        default:
            return nil
        }
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "the server's TLS certificate was refused (not issued by a trusted CA, expired or not yet valid); "
                + "check the endpoint and ca_file"
        }
        if let alert = clientCertificateAlerts.first(where: text.contains) {
            return "the server refused the TLS client certificate (\(alert)): it is missing, expired, revoked or not "
                + "issued for this endpoint; check the certificate the providers file names"
        }
        return nil
    }
}
