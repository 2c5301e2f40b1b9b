import BugleCore
import BugleHTTP2
import Foundation
import NIOSSL

/// The TLS client certificate and key for certificate-based APNs auth, from a PEM certificate and key (the key
/// optionally encrypted) or from a PKCS#12 bundle, with the passphrase taken from the environment variable the
/// providers file names. Key material and passphrases never appear in errors. A certificate that has expired or is
/// not yet valid is refused here, before a run starts.
struct APNSClientIdentity {
    var chain: [NIOSSLCertificate]
    var key: NIOSSLPrivateKey
    /// The leaf certificate's validity when loaded (always `.valid`: others are refused).
    var validity: ClientCertificateValidity

    /// Loads the identity `auth.certificate` describes.
    /// - Parameters:
    ///   - certFile: The PEM certificate chain, or the PKCS#12 bundle when `keyFile` is nil.
    ///   - keyFile: The PEM private key.
    ///   - passphraseEnv: The variable holding the key's or bundle's passphrase.
    ///   - environment: Where to look the variable up.
    ///   - allowReadableKeys: Accept key files that group or others can read.
    ///   - now: The time the certificate's validity is judged at.
    static func load(
        certFile: String,
        keyFile: String?,
        passphraseEnv: String?,
        environment: [String: String],
        allowReadableKeys: Bool,
        now: Date = Date()
    ) throws(APNSConfigurationError) -> APNSClientIdentity {
        var passphrase: [UInt8]?
        if let passphraseEnv {
            guard let value = environment[passphraseEnv] else { throw .missingPassphrase(variable: passphraseEnv) }
            passphrase = Array(value.utf8)
        }
        guard let keyFile else {
            // A PKCS#12 bundle holds the key: the same permission rule applies to it.
            try APNSKeyFile.checkPermissions(certFile, allowReadableKeys: allowReadableKeys)
            guard let bundle = try? NIOSSLPKCS12Bundle(file: certFile, passphrase: passphrase ?? []) else {
                throw .wrongPassphraseOrBundle(path: certFile, variable: passphraseEnv)
            }
            return try usable(chain: bundle.certificateChain, key: bundle.privateKey, certFile: certFile, now: now)
        }
        let certPEM = try APNSKeyFile.readText(certFile)
        guard let chain = try? NIOSSLCertificate.fromPEMBytes(Array(certPEM.utf8)), !chain.isEmpty else {
            throw .invalidCertificate(path: certFile)
        }
        try APNSKeyFile.checkPermissions(keyFile, allowReadableKeys: allowReadableKeys)
        let keyPEM = Array(try APNSKeyFile.readText(keyFile).utf8)
        let key: NIOSSLPrivateKey?
        if let passphrase {
            key = try? NIOSSLPrivateKey(bytes: keyPEM, format: .pem) { (provide: ([UInt8]) -> Void) in provide(passphrase) }
        } else {
            key = try? NIOSSLPrivateKey(bytes: keyPEM, format: .pem)
        }
        guard let key else {
            if passphraseEnv != nil { throw .wrongPassphraseOrBundle(path: keyFile, variable: passphraseEnv) }
            // An encrypted key read without a passphrase: say what is missing rather than that the key is bad.
            if String(decoding: keyPEM, as: UTF8.self).contains("ENCRYPTED") {
                throw .encryptedKey(path: keyFile)
            }
            throw .invalidKey(path: keyFile)
        }
        return try usable(chain: chain, key: key, certFile: certFile, now: now)
    }

    private static func usable(
        chain: [NIOSSLCertificate], key: NIOSSLPrivateKey, certFile: String, now: Date
    ) throws(APNSConfigurationError) -> APNSClientIdentity {
        guard let leaf = chain.first else { throw .invalidCertificate(path: certFile) }
        let validity = ClientCertificateValidity(of: leaf, at: now)
        if let refusal = validity.refusal(path: certFile) { throw .clientCertificateNotUsable(refusal) }
        return APNSClientIdentity(chain: chain, key: key, validity: validity)
    }
}
