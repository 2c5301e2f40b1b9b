import Crypto
import Foundation
import SwiftASN1
import X509

extension SimulatorCertificates {
    /// What a leaf certificate is for: a server (with the names it is valid for) or a TLS client.
    public enum LeafPurpose: Sendable {
        /// A server certificate valid for these DNS names and IPv4 addresses (four bytes each).
        case server(dnsNames: [String], ipv4Addresses: [[UInt8]])
        /// A client certificate.
        case client

        /// The simulator's own server names: `localhost` and `127.0.0.1`.
        public static let loopbackServer = LeafPurpose.server(dnsNames: ["localhost"], ipv4Addresses: [[127, 0, 0, 1]])
    }

    /// A certificate and its key, both PEM, issued by a simulator directory's CA.
    public struct IssuedIdentity: Sendable {
        /// The certificate (PEM).
        public var certificatePEM: String
        /// Its private key (PKCS#8 PEM, P-256).
        public var keyPEM: String
    }

    /// The validity the simulator gives its certificates: from an hour ago for ten years.
    /// - Parameter now: The issuing time.
    public static func defaultValidity(from now: Date = Date()) -> ClosedRange<Date> {
        now.addingTimeInterval(-3600)...now.addingTimeInterval(10 * 365 * 86400)
    }

    /// Issues a certificate from the CA that ``generate(in:port:topic:fcmPort:fcmProjectID:)`` wrote into
    /// `directory` (`ca.pem`, `ca.key`). Tests use it for certificates a client must refuse or that a server must
    /// refuse: one for another host, one that has expired, one not yet valid.
    /// - Parameters:
    ///   - directory: A simulator directory.
    ///   - commonName: The subject's common name.
    ///   - purpose: Server (with its names) or client.
    ///   - validity: From `notValidBefore` to `notValidAfter`.
    /// - Throws: ``Failure`` when the CA is missing or unreadable.
    public static func issue(
        in directory: String,
        commonName: String,
        purpose: LeafPurpose,
        validity: ClosedRange<Date> = defaultValidity()
    ) throws -> IssuedIdentity {
        guard let caPEM = try? String(contentsOfFile: directory + "/ca.pem", encoding: .utf8),
            let caKeyPEM = try? String(contentsOfFile: directory + "/ca.key", encoding: .utf8)
        else {
            throw Failure(description: "\(directory) has no ca.pem/ca.key: run `bugle-sim certs` first")
        }
        let caCertificate = try Certificate(pemEncoded: caPEM)
        let caKey = try P256.Signing.PrivateKey(pemRepresentation: caKeyPEM)
        let key = P256.Signing.PrivateKey()
        let certificate = try signLeaf(
            publicKey: key.publicKey, commonName: commonName, purpose: purpose, validity: validity,
            issuer: caCertificate.subject, issuerKey: caKey)
        return IssuedIdentity(certificatePEM: try certificate.serializeAsPEM().pemString, keyPEM: key.pemRepresentation)
    }

    /// Signs a leaf certificate for `publicKey` with the CA's key.
    static func signLeaf(
        publicKey: P256.Signing.PublicKey,
        commonName: String,
        purpose: LeafPurpose,
        validity: ClosedRange<Date>,
        issuer: DistinguishedName,
        issuerKey: P256.Signing.PrivateKey
    ) throws -> Certificate {
        let issuerSKI = Array(Insecure.SHA1.hash(data: issuerKey.publicKey.x963Representation))
        let subject = try DistinguishedName {
            OrganizationName("Bugle")
            CommonName(commonName)
        }
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(publicKey),
            notValidBefore: validity.lowerBound,
            notValidAfter: validity.upperBound,
            issuer: issuer,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                switch purpose {
                case .server(let dnsNames, let addresses):
                    try ExtendedKeyUsage([.serverAuth])
                    SubjectAlternativeNames(
                        dnsNames.map { GeneralName.dnsName($0) }
                            + addresses.map { GeneralName.ipAddress(ASN1OctetString(contentBytes: $0[...])) })
                case .client:
                    try ExtendedKeyUsage([.clientAuth])
                }
                AuthorityKeyIdentifier(keyIdentifier: issuerSKI[...])
            },
            issuerPrivateKey: Certificate.PrivateKey(issuerKey)
        )
    }
}
