import Crypto
import Foundation
import SwiftASN1
import X509
import _CryptoExtras

/// The TLS, APNs and FCM key material of a simulator directory: a private CA, a server certificate for
/// `127.0.0.1`/`localhost` signed by it, an ES256 APNs auth key (`.p8`), an FCM service account (RSA-2048)
/// and a matching `providers.yaml`.
///
/// Everything is generated in-process with swift-certificates and swift-crypto (no `openssl`).
/// Files written by ``generate(in:port:topic:)``:
/// - `ca.pem`, `ca.key` (0600): the CA that clients add as `ca_file`.
/// - `server.pem`, `server.key` (0600): the simulator's TLS identity (SAN: `127.0.0.1`, `localhost`).
/// - `AuthKey_<KEYID>.p8` (0600): the APNs token-auth key (PKCS#8 PEM, P-256).
/// - `apns.json`: key id, team id, topic and key file name, so a later start can reload them.
/// - `fcm-service-account.json` (0600): a Google-format service account whose `token_uri` points at the
///   FCM simulator (`https://127.0.0.1:<fcmPort>/token`; Google's URI until a port is known).
/// - `fcm.json` (0600): the service account's public key, key id, e-mail, project and the access-token
///   HMAC secret, so a later start can reload them (see `SimulatorCertificates+FCM.swift`).
/// - `providers.yaml`: an `apns:` section, plus an `fcm:` section once an FCM port is known.
///
/// A directory written by an older version (APNs files only) gains FCM material on ``load(from:)``.
public struct SimulatorCertificates: Sendable {
    /// Directory holding the files.
    public var directory: String
    /// PEM of the private CA certificate.
    public var caPEM: String
    /// PEM of the server certificate (leaf only).
    public var serverCertificatePEM: String
    /// PEM (PKCS#8) of the server private key.
    public var serverKeyPEM: String
    /// The APNs auth key's public half (what the simulator verifies JWTs with).
    public var apnsPublicKey: P256.Signing.PublicKey
    /// 10-character key id (`kid`).
    public var keyID: String
    /// 10-character team id (`iss`).
    public var teamID: String
    /// Bundle id the simulator accepts as `apns-topic`.
    public var topic: String
    /// FCM project id (`project_id`, default `bugle-sim`); the send path is `/v1/projects/<id>/messages:send`.
    public var fcmProjectID: String
    /// FCM project number (12 digits), accepted in the send path instead of the project id.
    public var fcmProjectNumber: String
    /// The service account's `private_key_id` (40 hex digits), the assertion JWT's `kid`.
    public var fcmPrivateKeyID: String
    /// The service account's `client_email`, the assertion JWT's `iss`.
    public var fcmClientEmail: String
    /// Public half of the service account's RSA-2048 key (what the simulator verifies assertions with).
    public var fcmPublicKey: _RSA.Signing.PublicKey
    /// HMAC-SHA256 secret of the simulator's stateless access tokens (see ``FCMAccessTokenAuthority``).
    public var fcmTokenSecret: SymmetricKey

    /// Path of `ca.pem`.
    public var caFile: String { directory + "/ca.pem" }
    /// Path of the `.p8` key.
    public var keyFile: String { directory + "/AuthKey_\(keyID).p8" }
    /// Path of `providers.yaml`.
    public var providersFile: String { directory + "/providers.yaml" }
    /// Path of the Google-format service-account JSON (mode 0600).
    public var fcmServiceAccountFile: String { directory + "/fcm-service-account.json" }
    /// Path of `fcm.json` (public key, ids and the access-token secret; mode 0600).
    public var fcmInfoFile: String { directory + "/fcm.json" }

    /// Errors while generating or loading simulator material.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        /// What went wrong (never includes key material).
        public var description: String
    }

    /// `directory` as an absolute path (a relative one from the working directory): the files `providers.yaml` names
    /// must be found wherever it is read from, and Bugle resolves a relative path from the providers file's folder.
    static func absolutePath(_ directory: String) -> String {
        URL(fileURLWithPath: directory).standardizedFileURL.path
    }

    /// Returns true when `directory` already holds a complete set (`apns.json`, CA, server identity, key).
    /// - Parameter directory: The simulator directory.
    public static func exists(in directory: String) -> Bool {
        let fm = FileManager.default
        return ["apns.json", "ca.pem", "server.pem", "server.key"].allSatisfy {
            fm.fileExists(atPath: directory + "/" + $0)
        }
    }

    /// Generates a fresh CA, server certificate, APNs key, FCM service account and providers file into
    /// `directory`.
    /// - Parameters:
    ///   - directory: Target directory (created if missing).
    ///   - port: The APNs port written into `providers.yaml` (`endpoint: https://127.0.0.1:PORT`).
    ///   - topic: The bundle id (default `com.example.bugle`).
    ///   - fcmPort: The FCM simulator's port, when known: `providers.yaml` gains an `fcm:` section and the
    ///     service account's `token_uri` points at it. Without it `token_uri` is Google's until
    ///     ``writeServiceAccount(fcmPort:)`` rewrites it.
    ///   - fcmProjectID: The FCM project id (default `bugle-sim`).
    /// - Throws: ``Failure`` or file-system errors.
    @discardableResult
    public static func generate(
        in directory: String,
        port: Int,
        topic: String = "com.example.bugle",
        fcmPort: Int? = nil,
        fcmProjectID: String = "bugle-sim"
    ) throws -> SimulatorCertificates {
        let directory = absolutePath(directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let validity = defaultValidity()

        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("Bugle")
            CommonName("Bugle Simulator CA")
        }
        let caSKI = Array(Insecure.SHA1.hash(data: caKey.publicKey.x963Representation))
        let caCert = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(caKey.publicKey),
            notValidBefore: validity.lowerBound,
            notValidAfter: validity.upperBound,
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(keyIdentifier: caSKI[...])
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )

        let serverKey = P256.Signing.PrivateKey()
        let serverCert = try signLeaf(
            publicKey: serverKey.publicKey, commonName: "localhost", purpose: .loopbackServer, validity: validity,
            issuer: caName, issuerKey: caKey)

        let apnsKey = P256.Signing.PrivateKey()
        let keyID = randomIdentifier()
        let teamID = randomIdentifier()
        let fcm = try FCMMaterial.generate(in: directory, projectID: fcmProjectID, fcmPort: fcmPort)

        let material = SimulatorCertificates(
            directory: directory,
            caPEM: try caCert.serializeAsPEM().pemString,
            serverCertificatePEM: try serverCert.serializeAsPEM().pemString,
            serverKeyPEM: serverKey.pemRepresentation,
            apnsPublicKey: apnsKey.publicKey,
            keyID: keyID,
            teamID: teamID,
            topic: topic,
            fcmProjectID: fcm.projectID,
            fcmProjectNumber: fcm.projectNumber,
            fcmPrivateKeyID: fcm.privateKeyID,
            fcmClientEmail: fcm.clientEmail,
            fcmPublicKey: fcm.publicKey,
            fcmTokenSecret: fcm.tokenSecret
        )
        try write(material.caPEM, to: material.caFile, mode: 0o644)
        try write(caKey.pemRepresentation, to: directory + "/ca.key", mode: 0o600)
        try write(material.serverCertificatePEM, to: directory + "/server.pem", mode: 0o644)
        try write(material.serverKeyPEM, to: directory + "/server.key", mode: 0o600)
        try write(apnsKey.pemRepresentation, to: material.keyFile, mode: 0o600)
        try write(
            apnsPublicKey(pem: apnsKey.publicKey.pemRepresentation, keyID: keyID, teamID: teamID, topic: topic),
            to: directory + "/apns.json",
            mode: 0o644
        )
        try write(material.providersYAML(port: port, fcmPort: fcmPort), to: material.providersFile, mode: 0o644)
        return material
    }

    /// Loads material previously written by ``generate(in:port:topic:fcmPort:fcmProjectID:)``. A directory
    /// without FCM material (written by an older version) gains a fresh FCM service account (its
    /// `token_uri` is Google's until ``writeServiceAccount(fcmPort:)`` rewrites it).
    /// - Parameter directory: The simulator directory.
    /// - Throws: ``Failure`` when a file is missing or malformed.
    public static func load(from directory: String) throws -> SimulatorCertificates {
        let directory = absolutePath(directory)
        let info = try String(contentsOfFile: directory + "/apns.json", encoding: .utf8)
        guard let data = info.data(using: .utf8),
            let object = try JSONSerialization.jsonObject(with: data) as? [String: String],
            let keyID = object["key_id"], let teamID = object["team_id"], let topic = object["topic"],
            let publicPEM = object["public_key"]
        else {
            throw Failure(description: "\(directory)/apns.json is malformed")
        }
        let fcm = try FCMMaterial.loadOrGenerate(in: directory)
        return SimulatorCertificates(
            directory: directory,
            caPEM: try String(contentsOfFile: directory + "/ca.pem", encoding: .utf8),
            serverCertificatePEM: try String(contentsOfFile: directory + "/server.pem", encoding: .utf8),
            serverKeyPEM: try String(contentsOfFile: directory + "/server.key", encoding: .utf8),
            apnsPublicKey: try P256.Signing.PublicKey(pemRepresentation: publicPEM),
            keyID: keyID,
            teamID: teamID,
            topic: topic,
            fcmProjectID: fcm.projectID,
            fcmProjectNumber: fcm.projectNumber,
            fcmPrivateKeyID: fcm.privateKeyID,
            fcmClientEmail: fcm.clientEmail,
            fcmPublicKey: fcm.publicKey,
            fcmTokenSecret: fcm.tokenSecret
        )
    }

    /// Rewrites `providers.yaml` for other ports (the keys and certificates stay).
    /// - Parameters:
    ///   - port: The simulator's APNs port.
    ///   - fcmPort: The FCM simulator's port; nil leaves the `fcm:` section out.
    /// - Throws: File-system errors.
    public func writeProvidersFile(port: Int, fcmPort: Int? = nil) throws {
        try Self.write(providersYAML(port: port, fcmPort: fcmPort), to: providersFile, mode: 0o644)
    }

    /// The `providers.yaml` text pointing at a simulator on `port` (and an FCM simulator on `fcmPort`).
    /// - Parameters:
    ///   - port: The simulator's APNs port.
    ///   - fcmPort: The FCM simulator's port; nil leaves the `fcm:` section out.
    public func providersYAML(port: Int, fcmPort: Int? = nil) -> String {
        var text = """
            # Generated by bugle-sim: points Bugle at the local APNs\(fcmPort == nil ? " simulator" : " and FCM simulators").
            apns:
              endpoint: https://127.0.0.1:\(port)
              ca_file: \(caFile)
              topic: \(topic)
              auth:
                token: { team_id: \(teamID), key_id: \(keyID), key_file: \(keyFile) }
              connections: 4

            """
        if let fcmPort {
            text += """
                fcm:
                  service_account_file: \(fcmServiceAccountFile)
                  endpoint: https://127.0.0.1:\(fcmPort)
                  ca_file: \(caFile)
                  connections: 8

                """
        }
        return text
    }

    private static func apnsPublicKey(pem: String, keyID: String, teamID: String, topic: String) throws -> String {
        let object = ["key_id": keyID, "team_id": teamID, "topic": topic, "public_key": pem]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    static func write(_ text: String, to path: String, mode: Int) throws {
        let fm = FileManager.default
        if fm.fileExists(atPath: path) {
            try fm.removeItem(atPath: path)
        }
        // Create with the final mode so a key is never briefly world-readable.
        guard fm.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode]) else {
            throw Failure(description: "cannot write \(path)")
        }
        try fm.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    /// A random 10-character upper-case alphanumeric identifier (Apple's key-id / team-id shape).
    private static func randomIdentifier() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<10).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] })
    }
}
