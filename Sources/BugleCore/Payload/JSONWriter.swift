/// A minimal, allocation-light JSON writer used to render payloads per recipient.
///
/// Rendering a payload is on the hot path (one per recipient), so this appends UTF-8 bytes directly
/// instead of going through `JSONEncoder`. Output is RFC 8259 JSON; strings are escaped exactly once.
public struct JSONWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8]
    private var needsComma: [Bool] = []

    public init(capacity: Int = 512) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Opens an object (as a value or as the root).
    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma.append(false)
    }

    /// Closes the innermost object.
    public mutating func endObject() {
        _ = needsComma.popLast()
        bytes.append(UInt8(ascii: "}"))
    }

    /// Writes `"key":` inside an object; the next value call writes the value.
    public mutating func key(_ key: String) {
        separate()
        appendString(key)
        bytes.append(UInt8(ascii: ":"))
        pendingValue = true
    }

    private var pendingValue = false

    /// Writes a string value.
    public mutating func string(_ value: String) {
        separate()
        appendString(value)
    }

    /// Writes an integer value.
    public mutating func int(_ value: Int) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// Writes `"key":"value"`.
    public mutating func field(_ name: String, _ value: String) {
        key(name)
        string(value)
    }

    /// Writes `"key":value` for an integer.
    public mutating func field(_ name: String, _ value: Int) {
        key(name)
        int(value)
    }

    private mutating func separate() {
        if pendingValue {
            pendingValue = false
            return
        }
        guard !needsComma.isEmpty else { return }
        if needsComma[needsComma.count - 1] {
            bytes.append(UInt8(ascii: ","))
        } else {
            needsComma[needsComma.count - 1] = true
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    private mutating func appendString(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "\\"))
            case 0x0A:
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "n"))
            case 0x0D:
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "r"))
            case 0x09:
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "t"))
            case 0..<0x20:
                bytes.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    Self.hex[Int(byte >> 4)], Self.hex[Int(byte & 0x0F)],
                ])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
