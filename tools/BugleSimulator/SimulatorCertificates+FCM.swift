import Crypto
import Foundation
import _CryptoExtras

extension SimulatorCertificates {
    /// Google's token endpoint: the default `token_uri` of a service account, and an assertion `aud` the
    /// simulator accepts besides its own token URI.
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    /// The simulator's own token endpoint on `port` (what `token_uri` says once the port is known).
    /// - Parameter port: The FCM simulator's port.
    public static func fcmTokenURI(port: Int) -> String {
        "https://127.0.0.1:\(port)/token"
    }

    /// Rewrites the service account's `token_uri` to point at an FCM simulator on `fcmPort` (the key stays).
    /// - Parameter fcmPort: The FCM simulator's bound port.
    /// - Throws: ``Failure`` when the service-account file is missing or malformed.
    public func writeServiceAccount(fcmPort: Int) throws {
        let path = fcmServiceAccountFile
        guard let data = FileManager.default.contents(atPath: path),
            var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
            object["private_key"] is String
        else {
            throw Failure(description: "\(path) is missing or malformed")
        }
        object["token_uri"] = Self.fcmTokenURI(port: fcmPort)
        try Self.write(try FCMMaterial.json(object), to: path, mode: 0o600)
    }

    /// An access token the FCM simulator accepts (for load generators such as h2load, and curl;
    /// `bugle-sim fcm-token DIR`). Minting needs no running simulator: tokens are stateless.
    /// - Parameters:
    ///   - lifetime: How long the token stays valid (default one hour).
    ///   - now: The issue time (default: the wall clock).
    public func fcmAccessToken(lifetime: Duration = .seconds(3600), now: Date = Date()) -> String {
        let (seconds, attoseconds) = lifetime.components
        let expiresAt = now.timeIntervalSince1970 + Double(seconds) + Double(attoseconds) / 1e18
        return FCMAccessTokenAuthority(secret: fcmTokenSecret).mint(expiresAt: expiresAt)
    }

    /// The FCM half of a simulator directory: ids, public key and token secret, plus reading and writing
    /// `fcm.json` and `fcm-service-account.json`.
    struct FCMMaterial {
        var projectID: String
        var projectNumber: String
        var privateKeyID: String
        var clientEmail: String
        var publicKey: _RSA.Signing.PublicKey
        var tokenSecret: SymmetricKey

        /// Generates an RSA-2048 service account and a token secret, and writes both files (mode 0600).
        /// - Parameters:
        ///   - directory: The simulator directory.
        ///   - projectID: The project id.
        ///   - fcmPort: The FCM port for `token_uri` (nil: Google's token URI).
        static func generate(in directory: String, projectID: String, fcmPort: Int?) throws -> FCMMaterial {
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let account = projectID.count <= 30 ? projectID : String(projectID.prefix(30))
            let material = FCMMaterial(
                projectID: projectID,
                projectNumber: randomDigits(12),
                privateKeyID: randomHex(40),
                clientEmail: "\(account)@\(projectID).iam.gserviceaccount.com",
                publicKey: key.publicKey,
                tokenSecret: SymmetricKey(size: .bits256)
            )
            var privatePEM = key.pkcs8PEMRepresentation
            if !privatePEM.hasSuffix("\n") { privatePEM += "\n" }
            let encodedEmail = material.clientEmail.replacingOccurrences(of: "@", with: "%40")
            let serviceAccount: [String: Any] = [
                "type": "service_account",
                "project_id": projectID,
                "private_key_id": material.privateKeyID,
                "private_key": privatePEM,
                "client_email": material.clientEmail,
                "client_id": randomDigits(21),
                "auth_uri": "https://accounts.google.com/o/oauth2/auth",
                "token_uri": fcmPort.map { SimulatorCertificates.fcmTokenURI(port: $0) }
                    ?? SimulatorCertificates.googleTokenURI,
                "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
                "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/\(encodedEmail)",
                "universe_domain": "googleapis.com",
            ]
            let secretBytes = material.tokenSecret.withUnsafeBytes { Data($0) }
            let info: [String: Any] = [
                "project_id": projectID,
                "project_number": material.projectNumber,
                "private_key_id": material.privateKeyID,
                "client_email": material.clientEmail,
                "public_key": key.publicKey.pemRepresentation,
                "token_secret": secretBytes.base64EncodedString(),
            ]
            try SimulatorCertificates.write(try json(serviceAccount), to: directory + "/fcm-service-account.json", mode: 0o600)
            try SimulatorCertificates.write(try json(info), to: directory + "/fcm.json", mode: 0o600)
            return material
        }

        /// Loads `fcm.json`, or generates FCM material when the directory has none (older versions).
        /// - Parameter directory: The simulator directory.
        static func loadOrGenerate(in directory: String) throws -> FCMMaterial {
            let fm = FileManager.default
            let infoPath = directory + "/fcm.json"
            guard fm.fileExists(atPath: infoPath), fm.fileExists(atPath: directory + "/fcm-service-account.json") else {
                return try generate(in: directory, projectID: "bugle-sim", fcmPort: nil)
            }
            guard let data = fm.contents(atPath: infoPath),
                let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: String],
                let projectID = object["project_id"], let projectNumber = object["project_number"],
                let privateKeyID = object["private_key_id"], let clientEmail = object["client_email"],
                let publicPEM = object["public_key"], let secretText = object["token_secret"],
                let secret = Data(base64Encoded: secretText), secret.count >= 32
            else {
                throw Failure(description: "\(infoPath) is malformed")
            }
            guard let publicKey = try? _RSA.Signing.PublicKey(pemRepresentation: publicPEM) else {
                throw Failure(description: "\(infoPath) holds no usable RSA public key")
            }
            return FCMMaterial(
                projectID: projectID,
                projectNumber: projectNumber,
                privateKeyID: privateKeyID,
                clientEmail: clientEmail,
                publicKey: publicKey,
                tokenSecret: SymmetricKey(data: secret)
            )
        }

        /// Pretty, key-sorted JSON text with unescaped slashes and a final newline.
        static func json(_ object: [String: Any]) throws -> String {
            let data = try JSONSerialization.data(
                withJSONObject: object,
                options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
            )
            return String(decoding: data, as: UTF8.self) + "\n"
        }

        private static func randomDigits(_ count: Int) -> String {
            var generator = SystemRandomNumberGenerator()
            let first = String(1 + generator.next(upperBound: UInt64(9)))
            return first + String((1..<count).map { _ in Character(String(generator.next(upperBound: UInt64(10)))) })
        }

        private static func randomHex(_ count: Int) -> String {
            var generator = SystemRandomNumberGenerator()
            let digits = Array("0123456789abcdef")
            return String((0..<count).map { _ in digits[Int(generator.next(upperBound: UInt64(16)))] })
        }
    }
}
