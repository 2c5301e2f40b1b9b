import Foundation
import NIOSSL

/// An extra trusted CA file (`ca_file`, `proxy_ca_file`): PEM certificates read whole, for `additionalTrustRoots`.
/// Callers turn a failure into their own configuration error naming the key.
public enum TrustedCertificates {
    /// Why a file gave no certificates.
    public enum Failure: Error, Sendable {
        /// The file cannot be read as text.
        case unreadable
        /// It holds no PEM certificate.
        case noCertificate
    }

    /// The certificates in the PEM file at `path`.
    public static func load(_ path: String) -> Result<[NIOSSLCertificate], Failure> {
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else { return .failure(.unreadable) }
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)), !certificates.isEmpty else {
            return .failure(.noCertificate)
        }
        return .success(certificates)
    }
}
