import NIOSSL

/// Recognises a TLS handshake that failed because the server's certificate was refused (not issued by a CA Bugle
/// trusts, expired, or not naming the host): a configuration error that reconnecting cannot fix, unlike a refused,
/// reset or timed-out connection.
enum TLSCertificateRejection {
    /// What to tell the user, or nil when `error` is not a refused server certificate.
    static func reason(for error: any Error) -> String? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "the server's TLS certificate is not valid for this host name (\(extra)); check the endpoint"
        }
        if case NIOSSLError.handshakeFailed(let underlying) = error, String(describing: underlying).contains("CERTIFICATE_VERIFY_FAILED") {
            return "the server's TLS certificate was refused (not issued by a trusted CA, expired or not yet valid); "
                + "check the endpoint and ca_file"
        }
        return nil
    }
}
