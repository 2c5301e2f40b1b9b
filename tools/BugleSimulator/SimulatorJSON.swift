/// A small, strict JSON value and parser (RFC 8259) for the FCM simulator's hot path.
///
/// Unlike `JSONSerialization` it keeps object members in document order (so a field violation can name
/// `message.data[2].value`), keeps duplicate keys (lookups take the last one, as Google's parser does),
/// tells booleans from numbers, and records where each member's value sits in the input (so the
/// simulator can measure and hash parts of the message exactly as sent).
enum SimulatorJSON: Sendable, Equatable {
    /// An OAuth2 error body, as Google's token endpoints answer: `{"error": …, "error_description": …}`.
    static func oauthError(_ error: String, _ description: String) -> String {
        "{\"error\":\(quoted(error)),\"error_description\":\(quoted(description))}"
    }

    /// One member of an object, in document order.
    struct Member: Sendable, Equatable {
        /// The decoded key.
        var key: String
        /// The value.
        var value: SimulatorJSON
        /// Byte offsets of the value's text in the parsed input.
        var valueRange: Range<Int>
        /// Byte offset of the key's opening quote: the member's text is `keyStart..<valueRange.upperBound`.
        var keyStart: Int = 0
    }

    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([SimulatorJSON])
    case object([Member])

    /// Why parsing failed (position only: the input may hold secrets).
    struct ParseError: Error, Sendable, Equatable {
        /// Byte offset of the problem.
        var offset: Int
    }

    /// Parses one JSON text (surrounding whitespace allowed, nothing else).
    /// - Parameter bytes: UTF-8 input.
    /// - Throws: ``ParseError``.
    static func parse(_ bytes: some Collection<UInt8>) throws(ParseError) -> SimulatorJSON {
        let array = Array(bytes)
        var parser = Parser(bytes: array)
        return try parser.parseDocument()
    }

    /// The last member named `key` (objects only).
    subscript(key: String) -> SimulatorJSON? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    /// The string payload, if this is a string.
    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The members, if this is an object.
    var members: [Member]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// A short name of the JSON type, for error messages ("string", "object", ...).
    var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Serialises a string as a JSON string literal (with quotes).
    /// - Parameter value: The string.
    static func quoted(_ value: String) -> String {
        var out = "\""
        out.reserveCapacity(value.utf8.count + 2)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
        return out
    }

    /// A recursive-descent parser over a byte array.
    private struct Parser {
        let bytes: [UInt8]
        var index = 0
        var depth = 0
        static let maxDepth = 64

        init(bytes: [UInt8]) {
            self.bytes = bytes
        }

        mutating func parseDocument() throws(ParseError) -> SimulatorJSON {
            skipWhitespace()
            let value = try parseValue()
            skipWhitespace()
            guard index == bytes.count else { throw ParseError(offset: index) }
            return value
        }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        private func peek() -> UInt8? {
            index < bytes.count ? bytes[index] : nil
        }

        private mutating func parseValue() throws(ParseError) -> SimulatorJSON {
            guard let byte = peek() else { throw ParseError(offset: index) }
            switch byte {
            case UInt8(ascii: "{"): return try parseObject()
            case UInt8(ascii: "["): return try parseArray()
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                return .null
            default:
                return .number(try parseNumber())
            }
        }

        private mutating func expectLiteral(_ literal: StaticString) throws(ParseError) {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw ParseError(offset: index) }
            let matches = literal.withUTF8Buffer { expected in
                (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
            }
            guard matches else { throw ParseError(offset: index) }
            index += count
        }

        private mutating func enter() throws(ParseError) {
            depth += 1
            if depth > Self.maxDepth { throw ParseError(offset: index) }
        }

        private mutating func parseObject() throws(ParseError) -> SimulatorJSON {
            try enter()
            defer { depth -= 1 }
            index += 1
            var members: [Member] = []
            skipWhitespace()
            if peek() == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard peek() == UInt8(ascii: "\"") else { throw ParseError(offset: index) }
                let keyStart = index
                let key = try parseString()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw ParseError(offset: index) }
                index += 1
                skipWhitespace()
                let start = index
                let value = try parseValue()
                members.append(Member(key: key, value: value, valueRange: start..<index, keyStart: keyStart))
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","):
                    index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    return .object(members)
                default:
                    throw ParseError(offset: index)
                }
            }
        }

        private mutating func parseArray() throws(ParseError) -> SimulatorJSON {
            try enter()
            defer { depth -= 1 }
            index += 1
            var elements: [SimulatorJSON] = []
            skipWhitespace()
            if peek() == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try parseValue())
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","):
                    index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    return .array(elements)
                default:
                    throw ParseError(offset: index)
                }
            }
        }

        private mutating func parseString() throws(ParseError) -> String {
            index += 1  // opening quote
            let start = index
            // Fast path: no escapes.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = try Self.validUTF8(bytes[start..<index], offset: start)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw ParseError(offset: index) }
                index += 1
            }
            var scratch = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return try Self.validUTF8(scratch[...], offset: start)
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escape = peek() else { throw ParseError(offset: index) }
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): scratch.append(0x22)
                    case UInt8(ascii: "\\"): scratch.append(0x5C)
                    case UInt8(ascii: "/"): scratch.append(0x2F)
                    case UInt8(ascii: "b"): scratch.append(0x08)
                    case UInt8(ascii: "f"): scratch.append(0x0C)
                    case UInt8(ascii: "n"): scratch.append(0x0A)
                    case UInt8(ascii: "r"): scratch.append(0x0D)
                    case UInt8(ascii: "t"): scratch.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try parseHex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            else { throw ParseError(offset: index) }
                            index += 2
                            let low = try parseHex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw ParseError(offset: index) }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(scalar) {
                            throw ParseError(offset: index)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw ParseError(offset: index) }
                        scratch.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default:
                        throw ParseError(offset: index - 1)
                    }
                default:
                    if byte < 0x20 { throw ParseError(offset: index) }
                    scratch.append(byte)
                    index += 1
                }
            }
            throw ParseError(offset: index)
        }

        private mutating func parseHex4() throws(ParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw ParseError(offset: index) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case 0x30...0x39: digit = UInt32(byte - 0x30)
                case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                default: throw ParseError(offset: index)
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        private static func validUTF8(_ slice: ArraySlice<UInt8>, offset: Int) throws(ParseError) -> String {
            guard let text = String(validating: slice, as: UTF8.self) else { throw ParseError(offset: offset) }
            return text
        }

        private mutating func parseNumber() throws(ParseError) -> Double {
            let start = index
            if peek() == UInt8(ascii: "-") { index += 1 }
            guard let first = peek(), Self.isDigit(first) else { throw ParseError(offset: index) }
            if first == UInt8(ascii: "0") {
                index += 1
            } else {
                while let byte = peek(), Self.isDigit(byte) { index += 1 }
            }
            if peek() == UInt8(ascii: ".") {
                index += 1
                guard let byte = peek(), Self.isDigit(byte) else { throw ParseError(offset: index) }
                while let byte = peek(), Self.isDigit(byte) { index += 1 }
            }
            if let byte = peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                index += 1
                if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { index += 1 }
                guard let byte = peek(), Self.isDigit(byte) else { throw ParseError(offset: index) }
                while let byte = peek(), Self.isDigit(byte) { index += 1 }
            }
            guard let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else {
                throw ParseError(offset: start)
            }
            return value
        }

        private static func isDigit(_ byte: UInt8) -> Bool {
            byte >= 0x30 && byte <= 0x39
        }
    }
}
