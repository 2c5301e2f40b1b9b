import Foundation
import NIOSSL

/// An extra trusted CA file (`ca_file`, `proxy_ca_file`): PEM certificates read whole, for `additionalTrustRoots`.
/// Callers turn a failure into their own configuration error naming the key.
public enum TrustedCertificates {
    /// Why a file gave no certificates.
    public enum Failure: Error, Sendable {
        /// The file cannot be read.
        case unreadable
        /// It holds no PEM certificate.
        case noCertificate
    }

    /// The certificates in the PEM file at `path`.
    public static func load(_ path: String) -> Result<[NIOSSLCertificate], Failure> {
        guard let data = FileManager.default.contents(atPath: path) else { return .failure(.unreadable) }
        // A binary file (DER) holds no PEM certificate; it was "cannot read" with no reason although it reads.
        guard let pem = String(data: data, encoding: .utf8) else { return .failure(.noCertificate) }
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)), !certificates.isEmpty else {
            return .failure(.noCertificate)
        }
        return .success(certificates)
    }
}
