import Crypto

/// Deterministic `apns-id`s: a name-based UUID (version 5 layout) of (run id, ledger seq), so support can
/// correlate a notification seen by Apple with its ledger row, and a resend carries the same id.
public enum NotificationID {
    /// Lowercase canonical UUID for a recipient of a run.
    public static func apnsID(runID: Int64, seq: Int64) -> String {
        var input = [UInt8]("bugle-apns-id".utf8)
        withUnsafeBytes(of: runID.bigEndian) { input.append(contentsOf: $0) }
        withUnsafeBytes(of: seq.bigEndian) { input.append(contentsOf: $0) }
        var bytes = Array(Insecure.SHA1.hash(data: input).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return format(bytes)
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    static func format(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A short, non-reversible fingerprint of a device token for logs and error messages (never the token).
public enum TokenFingerprint {
    /// `tok:` + 10 hex chars of SHA-256.
    public static func of(_ token: String) -> String {
        let digest = SHA256.hash(data: Array(token.utf8))
        return "tok:" + digest.prefix(5).map { byte in
            let s = String(byte, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
    }
}
