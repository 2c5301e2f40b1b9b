/// RFC 4180 CSV formatting with spreadsheet formula neutralising (OWASP CSV injection).
public enum CSVFormat {
    /// Appends one record (CRLF-terminated) to `out`.
    public static func appendRecord(_ fields: [String], to out: inout [UInt8]) {
        for (index, field) in fields.enumerated() {
            var field = field
            field.withUTF8 { appendField(utf8: UnsafeRawBufferPointer($0), leadingComma: index > 0, to: &out) }
        }
        endRecord(&out)
    }

    /// Appends one field given as UTF-8 bytes, neutralised and quoted as needed, preceded by a comma unless it
    /// starts its record. With ``endRecord(_:)``, writes records without building a string per cell (a raw buffer,
    /// not a generic collection: the report writes 12 fields per recipient).
    public static func appendField(utf8 field: UnsafeRawBufferPointer, leadingComma: Bool, to out: inout [UInt8]) {
        if leadingComma { out.append(UInt8(ascii: ",")) }
        var needsQuotes = false
        for byte in field where byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\"") || byte == 0x0A || byte == 0x0D {
            needsQuotes = true
            break
        }
        if needsQuotes { out.append(UInt8(ascii: "\"")) }
        if let first = field.first, isFormulaStart(first) { out.append(UInt8(ascii: "'")) }
        if needsQuotes {
            for byte in field {
                if byte == UInt8(ascii: "\"") { out.append(byte) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        } else {
            out.append(contentsOf: field)
        }
    }

    /// Ends a record (CRLF).
    public static func endRecord(_ out: inout [UInt8]) {
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
        guard let first = field.utf8.first, isFormulaStart(first) else { return field }
        return "'" + field
    }

    private static func isFormulaStart(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "@"), 0x09, 0x0D: true
        default: false
        }
    }
}

extension CSVFormat {
    /// `2026-11-24T20:00:00Z` (whole seconds, UTC).
    public static func timestamp(_ instant: Instant) -> String {
        let seconds = Int(instant.secondsSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let date = CivilDate(daysSince1970: days)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(date.year)-\(two(date.month))-\(two(date.day))T\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))Z"
    }
}
