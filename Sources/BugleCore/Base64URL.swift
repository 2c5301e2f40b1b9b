/// Base64url without padding (RFC 4648 §5), as JSON Web Tokens use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes bytes.
    /// - Parameter bytes: The bytes.
    /// - Returns: The unpadded base64url text.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let value = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(value >> 18 & 63)])
            output.append(alphabet[Int(value >> 12 & 63)])
            if second != nil { output.append(alphabet[Int(value >> 6 & 63)]) }
            if third != nil { output.append(alphabet[Int(value & 63)]) }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
