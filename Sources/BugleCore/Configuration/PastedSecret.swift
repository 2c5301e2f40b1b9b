import Foundation

/// A secret pasted where a file path belongs (a providers file's `key_file`, `service_account_file`, an
/// `external_account`'s `credential_source.file`, `GOOGLE_APPLICATION_CREDENTIALS`). Such a value must be refused
/// without being echoed: as a path that cannot be read it would be printed whole, key and all.
public enum PastedSecret: Sendable, Equatable {
    /// A file's contents: a PEM block, or a JSON document (a service account's key, an `authorized_user`'s refresh token).
    case fileContents
    /// A key's (or certificate's) base64 DER body without its BEGIN/END lines, as secret stores hand them out.
    case encodedKey
    /// A JSON Web Token (`eyJ….….…`): an ID token, a subject token or an assertion.
    case token

    /// What `value` holds when it is not a path, or nil when it may be one.
    /// - Parameter value: The value as written.
    public static func judge(_ value: String) -> PastedSecret? {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        if value.contains("-----BEGIN") || value.contains("\"private_key\"") || trimmed.hasPrefix("{") {
            return .fileContents
        }
        // A body split over lines (as a PEM body is) counts as one.
        let compact = String(String.UnicodeScalarView(trimmed.unicodeScalars.filter { !CharacterSet.whitespacesAndNewlines.contains($0) }))
        if looksLikeEncodedKey(compact) { return .encodedKey }
        if looksLikeJWT(compact) { return .token }
        return nil
    }

    /// What a refusal says the value is (`a file's contents`, `a key's base64 contents`, `a token`).
    public var noun: String {
        switch self {
        case .fileContents: "a file's contents"
        case .encodedKey: "a key's base64 contents"
        case .token: "a token"
        }
    }

    /// Whether `value` reads as a key's (or certificate's) base64 DER body rather than a path: 40 or more base64
    /// characters starting with `M` (a DER SEQUENCE), and either a whole DER SEQUENCE once decoded, or, with no `/`
    /// at all (not a path), mixed case with digits (a cut-off body).
    static func looksLikeEncodedKey(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard bytes.count >= 40, bytes.first == UInt8(ascii: "M") else { return false }
        guard bytes.allSatisfy({ isLetterOrDigit($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "=") }) else { return false }
        if !bytes.contains(UInt8(ascii: "/")) {
            return bytes.contains { (0x30...0x39).contains($0) } && bytes.contains { (0x41...0x5A).contains($0) } && bytes.contains { (0x61...0x7A).contains($0) }
        }
        let padded = value + String(repeating: "=", count: (4 - bytes.count % 4) % 4)
        guard let der = Data(base64Encoded: padded), der.count >= 2, der[der.startIndex] == 0x30 else { return false }
        let first = Int(der[der.startIndex + 1])
        if first < 0x80 { return first + 2 == der.count }
        let lengthBytes = first & 0x7F
        guard (1...3).contains(lengthBytes), der.count > 2 + lengthBytes else { return false }
        let length = der[(der.startIndex + 2)..<(der.startIndex + 2 + lengthBytes)].reduce(0) { $0 << 8 | Int($1) }
        return length + 2 + lengthBytes == der.count
    }

    /// Whether `value` is a whole JWS or JWE in compact form: base64url segments joined by dots (three, or five), the
    /// first a JSON header (`eyJ`, base64url of `{"`), the first two non-empty.
    static func looksLikeJWT(_ value: String) -> Bool {
        let segments = value.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 || segments.count == 5, value.hasPrefix("eyJ"), !segments[1].isEmpty else { return false }
        return segments.allSatisfy { $0.allSatisfy(isBase64URL) }
    }

    static func isBase64URL(_ byte: UInt8) -> Bool {
        isLetterOrDigit(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
    }
}
