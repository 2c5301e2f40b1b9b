import BugleCore
import BugleHTTP2
import Foundation
import Logging
import NIOCore
import NIOSSL

/// The TLS client identity shared by the gateway and the feedback connections: the provider's client
/// certificate and key (the key file is refused when group/others can read it; the certificate when it has expired
/// or is not yet valid), and the extra trusted CA of the providers file. Server verification is never switched off.
///
/// TLS 1.2 exactly: in TLS 1.3 a client's handshake completes before the server has judged the client
/// certificate, so a refused certificate would surface only as a close after notifications were written —
/// indistinguishable from a silent close, making them ambiguous. In TLS 1.2 the server's verdict on the
/// certificate comes before the handshake completes, so "ready" means "accepted". (The retired Apple gateway
/// never offered TLS 1.3.)
enum LegacyAPNSClientTLS {
    /// Builds the TLS context from the `legacy_apns:` section.
    /// - Parameters:
    ///   - settings: The `legacy_apns:` section.
    ///   - allowReadableKeys: Accept a group/other-readable key file.
    ///   - logger: Warned when the certificate expires within ``ClientCertificateValidity/warningPeriod``.
    ///   - now: The time the certificate's validity is judged at.
    /// - Returns: A client context presenting the certificate.
    /// - Throws: ``LegacyAPNSConfigurationError``.
    static func makeContext(
        settings: LegacyAPNsSettings, allowReadableKeys: Bool, logger: Logger, now: Date = Date()
    ) throws(LegacyAPNSConfigurationError) -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.maximumTLSVersion = .tlsv12
        tls.certificateVerification = .fullVerification
        if let caFile = settings.caFile {
            let pem = try readPublic(caFile)
            guard let roots = try? NIOSSLCertificate.fromPEMBytes(pem), !roots.isEmpty else {
                throw .invalidCertificate(path: caFile)
            }
            tls.additionalTrustRoots = [.certificates(roots)]
        }
        let chainPEM = try readPublic(settings.certFile)
        guard let chain = try? NIOSSLCertificate.fromPEMBytes(chainPEM), let leaf = chain.first else {
            throw .invalidCertificate(path: settings.certFile)
        }
        let validity = ClientCertificateValidity(of: leaf, at: now)
        if let refusal = validity.refusal(path: settings.certFile) { throw .clientCertificateNotUsable(refusal) }
        if let warning = validity.warning(path: settings.certFile, at: now) { logger.warning("\(warning)") }
        let keyBytes: Data
        switch SecretFile.read(settings.keyFile, allowReadableByOthers: allowReadableKeys) {
        case .success(let data): keyBytes = data
        case .failure(.unreadable): throw .unreadableFile(path: settings.keyFile)
        case .failure(.readableByOthers(let mode)): throw .keyFileReadableByOthers(path: settings.keyFile, mode: mode)
        }
        guard let key = try? NIOSSLPrivateKey(bytes: Array(keyBytes), format: .pem) else {
            // An encrypted key fails to load like a malformed one: say what it is rather than that it is no key.
            throw isEncrypted(keyBytes) ? .encryptedKey(path: settings.keyFile) : .invalidKey(path: settings.keyFile)
        }
        tls.certificateChain = chain.map { .certificate($0) }
        tls.privateKey = .privateKey(key)
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            // The certificate and the key each loaded: what TLS refuses is the pair.
            throw .tls("the certificate \(settings.certFile) with the key \(settings.keyFile) (\(error)); is the key the certificate's own?")
        }
    }

    /// The name to send as SNI and verify in the server certificate; nil for an IP literal (NIOSSL then
    /// checks the IP address SAN).
    /// - Parameter host: The configured host.
    static func serverHostname(for host: String) -> String? {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil ? nil : host
    }

    /// Whether a PEM key file is encrypted: PKCS#8 (`-----BEGIN ENCRYPTED PRIVATE KEY-----`) or a traditional
    /// PEM key with `Proc-Type: 4,ENCRYPTED`.
    static func isEncrypted(_ pem: Data) -> Bool {
        let text = String(decoding: pem, as: UTF8.self)
        return text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED")
    }

    private static func readPublic(_ path: String) throws(LegacyAPNSConfigurationError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw .unreadableFile(path: path) }
        return Array(data)
    }
}
