import Crypto

/// Deterministic `apns-id`s: a name-based UUID (version 5 layout) of (run id, ledger seq), so support can
/// correlate a notification seen by Apple with its ledger row, and a resend carries the same id.
public enum NotificationID {
    /// Lowercase canonical UUID for a recipient of a run.
    public static func apnsID(runID: Int64, seq: Int64) -> String {
        // One per recipient (and per dry-run row): no intermediate arrays, only the result string is allocated.
        var hasher = Insecure.SHA1()
        hasher.update(data: prefix)
        withUnsafeBytes(of: runID.bigEndian) { hasher.update(bufferPointer: $0) }
        withUnsafeBytes(of: seq.bigEndian) { hasher.update(bufferPointer: $0) }
        return hasher.finalize().withUnsafeBytes { digest in
            String(unsafeUninitializedCapacity: 36) { out in
                var at = 0
                for index in 0..<16 {
                    var byte = digest[index]
                    if index == 6 { byte = (byte & 0x0F) | 0x50 }
                    if index == 8 { byte = (byte & 0x3F) | 0x80 }
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    out[at] = hex[Int(byte >> 4)]
                    out[at + 1] = hex[Int(byte & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }

    private static let prefix: [UInt8] = Array("bugle-apns-id".utf8)
    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)
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
