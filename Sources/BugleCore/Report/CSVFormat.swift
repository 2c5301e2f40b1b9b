/// RFC 4180 CSV formatting with spreadsheet formula neutralising (OWASP CSV injection).
public enum CSVFormat {
    /// Appends one record (CRLF-terminated) to `out`.
    public static func appendRecord(_ fields: [String], to out: inout [UInt8]) {
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendField(field, to: &out)
        }
        out.append(0x0D)
        out.append(0x0A)
    }

    /// One record as a string (for tests and small outputs).
    public static func record(_ fields: [String]) -> String {
        var out: [UInt8] = []
        appendRecord(fields, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// A cell that a spreadsheet would evaluate (`= + - @`, or a leading tab/CR) gets a leading `'`.
    public static func neutralize(_ field: String) -> String {
        guard let first = field.utf8.first else { return field }
        switch first {
        case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "@"), 0x09, 0x0D:
            return "'" + field
        default:
            return field
        }
    }

    private static func appendField(_ raw: String, to out: inout [UInt8]) {
        let field = neutralize(raw)
        var needsQuotes = false
        for byte in field.utf8 where byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\"") || byte == 0x0A || byte == 0x0D {
            needsQuotes = true
            break
        }
        guard needsQuotes else {
            out.append(contentsOf: field.utf8)
            return
        }
        out.append(UInt8(ascii: "\""))
        for byte in field.utf8 {
            if byte == UInt8(ascii: "\"") { out.append(byte) }
            out.append(byte)
        }
        out.append(UInt8(ascii: "\""))
    }
}
