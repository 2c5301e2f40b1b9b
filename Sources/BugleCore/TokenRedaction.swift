/// Removes tokens from text another party wrote (an OAuth2 endpoint's `error_description`, IAM's `message`) before it
/// is relayed into an error, a log line or a run's pause reason: such text may quote the assertion or the subject
/// token it refused.
public enum TokenRedaction {
    /// What replaces each token.
    public static let placeholder = "[redacted]"

    /// `text` with every JWT-shaped run (base64url segments joined by dots, the first starting `eyJ`, at least three)
    /// and every Google access token (`ya29.` and what follows it) replaced by ``placeholder``.
    /// - Parameter text: Text from another party.
    public static func redacted(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if isTokenStart(bytes, index), let end = tokenEnd(bytes, from: index) {
                output.append(contentsOf: placeholder.utf8)
                index = end
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// A token can start here only at the start of a word (not inside a longer base64url run).
    private static func isTokenStart(_ bytes: [UInt8], _ index: Int) -> Bool {
        index == 0 || !(PastedSecret.isBase64URL(bytes[index - 1]) || bytes[index - 1] == UInt8(ascii: "."))
    }

    /// The end of the token starting at `start`, or nil when none starts there.
    private static func tokenEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        if hasPrefix(bytes, start, "ya29.") {
            var end = start + 5
            while end < bytes.count, PastedSecret.isBase64URL(bytes[end]) || bytes[end] == UInt8(ascii: ".") { end += 1 }
            return end
        }
        guard hasPrefix(bytes, start, "eyJ") else { return nil }
        var end = start
        var dots = 0
        var segmentLength = 0
        var firstTwoNonEmpty = true
        while end < bytes.count {
            let byte = bytes[end]
            if PastedSecret.isBase64URL(byte) {
                segmentLength += 1
            } else if byte == UInt8(ascii: ".") {
                if dots < 2, segmentLength == 0 { firstTwoNonEmpty = false }
                dots += 1
                segmentLength = 0
            } else {
                break
            }
            end += 1
        }
        guard dots >= 2, firstTwoNonEmpty else { return nil }
        // A sentence's full stop after the signature is not part of the token.
        if bytes[end - 1] == UInt8(ascii: "."), dots > 2 { end -= 1 }
        return end
    }

    private static func hasPrefix(_ bytes: [UInt8], _ start: Int, _ prefix: String) -> Bool {
        let prefix = Array(prefix.utf8)
        guard bytes.count - start >= prefix.count else { return false }
        return Array(bytes[start..<(start + prefix.count)]) == prefix
    }
}
