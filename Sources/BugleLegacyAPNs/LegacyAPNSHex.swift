/// Hex conversion of device tokens (the providers and the ledger keep them as lowercase hex text; the
/// binary protocol carries bytes).
public enum LegacyAPNSHex {
    /// Decodes an even-length hex string (either case).
    /// - Parameter hex: The text.
    /// - Returns: The bytes, or nil when the text is not even-length hex.
    public static func decode(_ hex: String) -> [UInt8]? {
        let utf8 = hex.utf8
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var high: UInt8?
        for character in utf8 {
            guard let nibble = Self.nibble(character) else { return nil }
            if let value = high {
                bytes.append(value << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }

    /// Encodes bytes as lowercase hex.
    /// - Parameter bytes: The bytes.
    /// - Returns: Lowercase hex text.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return character - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
