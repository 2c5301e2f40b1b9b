import NIOCore
import NIOHPACK

/// A request's header fields, HPACK-encoded once, off the event loop, in a form valid on any connection.
///
/// ``bytes`` holds fields that are either a whole entry of HPACK's static table (`:method: POST`) or a literal *without
/// indexing* (RFC 7541 §6.2.2), its name given by a static-table index where there is one. None of them refers to or
/// enters a connection's dynamic table, so the same bytes can go out on whichever connection the request is leased to.
/// Apple asks for exactly this encoding of `:path`, `authorization` and `apns-id`.
///
/// ``indexed`` holds the fields that repeat from request to request (`apns-topic`, `content-type`…), which Apple asks
/// to be sent *with* incremental indexing. The session encodes them at write time against its connection's table
/// (``HTTP2HeaderTable``): a literal the first time on a connection, one index byte after that.
///
/// Strings are written raw, not Huffman-coded: the per-request values (a 64-digit token in `:path`, a UUID, the
/// bearer JWT) would shrink by about a fifth, and coding them was 5% of Bugle's CPU per request.
public struct HTTP2HeaderBlock: Sendable {
    /// The encoded fields that never touch a dynamic table.
    public private(set) var bytes: ByteBuffer
    /// Regular (not pseudo-) fields for the connection's table, written after ``bytes``. Never secrets.
    public private(set) var indexed: [HTTP2IndexedField] = []

    /// Static-table entries used whole (RFC 7541 Appendix A).
    public enum StaticField: Int, Sendable {
        case methodGET = 2
        case methodPOST = 3
        case schemeHTTPS = 7
    }

    /// Static-table indices of the names Bugle sends.
    public enum StaticName: Int, Sendable {
        case authority = 1
        case path = 4
        case accept = 19
        case authorization = 23
        case contentLength = 28
        case contentType = 31
        case userAgent = 58
    }

    /// An empty block.
    /// - Parameter capacity: Bytes to reserve.
    public init(capacity: Int = 256) {
        bytes = ByteBuffer()
        bytes.reserveCapacity(capacity)
    }

    /// Encodes generic headers (each name lower-case, as HTTP/2 requires).
    /// - Parameter headers: The fields, in order.
    public init(_ headers: HPACKHeaders) {
        self.init(capacity: 64 * headers.count)
        for (name, value, _) in headers {
            switch (name, value) {
            case (":method", "POST"): add(.methodPOST)
            case (":method", "GET"): add(.methodGET)
            case (":scheme", "https"): add(.schemeHTTPS)
            default:
                if let index = Self.staticNames[name] {
                    add(index, value: value)
                } else {
                    add(name: name, value: value)
                }
            }
        }
    }

    /// The static-table index of a field name, where it has one.
    static let staticNames: [String: StaticName] = [
        ":authority": .authority, ":path": .path, "accept": .accept, "authorization": .authorization,
        "content-length": .contentLength, "content-type": .contentType, "user-agent": .userAgent,
    ]

    /// The whole block as the first request on a new connection sends it (tests, diagnostics).
    public var encodedForNewConnection: ByteBuffer {
        var table = HTTP2HeaderTable()
        var buffer = ByteBuffer()
        table.encode(self, into: &buffer)
        return buffer
    }

    /// Adds a whole static-table entry.
    public mutating func add(_ field: StaticField) {
        writeInteger(field.rawValue, prefixBits: 7, marker: 0x80)
    }

    /// Adds a regular field the connection indexes (see ``indexed``): for values that repeat across requests, never
    /// for secrets or per-request values.
    /// - Parameters:
    ///   - name: The name (lower-case, not a pseudo-header).
    ///   - value: The value.
    public mutating func addIndexed(name: String, value: String) {
        indexed.append(HTTP2IndexedField(name: name, value: value))
    }

    /// Adds a literal without indexing whose name is a static-table entry.
    /// - Parameters:
    ///   - name: The name's static index.
    ///   - value: The value.
    public mutating func add(_ name: StaticName, value: String) {
        writeInteger(name.rawValue, prefixBits: 4, marker: 0x00)
        writeString(value)
    }

    /// Adds a literal without indexing whose value is two parts written one after the other (no concatenated
    /// string is built): `:path` = "/3/device/" + token.
    /// - Parameters:
    ///   - name: The name's static index.
    ///   - prefix: The value's first part.
    ///   - rest: The value's second part.
    public mutating func add(_ name: StaticName, value prefix: String, _ rest: String) {
        writeInteger(name.rawValue, prefixBits: 4, marker: 0x00)
        writeInteger(prefix.utf8.count + rest.utf8.count, prefixBits: 7, marker: 0x00)
        bytes.writeString(prefix)
        bytes.writeString(rest)
    }

    /// Adds a literal without indexing with a literal name.
    /// - Parameters:
    ///   - name: The name (lower-case).
    ///   - value: The value.
    public mutating func add(name: String, value: String) {
        bytes.writeInteger(UInt8(0))
        writeString(name)
        writeString(value)
    }

    /// Adds a literal without indexing with a literal name and a two-part value (no concatenated string is built).
    /// - Parameters:
    ///   - name: The name (lower-case).
    ///   - prefix: The value's first part.
    ///   - rest: The value's second part.
    public mutating func add(name: String, value prefix: String, _ rest: String) {
        bytes.writeInteger(UInt8(0))
        writeString(name)
        writeInteger(prefix.utf8.count + rest.utf8.count, prefixBits: 7, marker: 0x00)
        bytes.writeString(prefix)
        bytes.writeString(rest)
    }

    private mutating func writeString(_ string: String) {
        bytes.writeHPACKString(string)
    }

    private mutating func writeInteger(_ value: Int, prefixBits: Int, marker: UInt8) {
        bytes.writeHPACKInteger(value, prefixBits: prefixBits, marker: marker)
    }
}

/// A header field for a connection's HPACK dynamic table.
public struct HTTP2IndexedField: Hashable, Sendable {
    public var name: String
    public var value: String

    /// Creates a field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Its size in a dynamic table (RFC 7541 §4.1).
    var tableSize: Int { name.utf8.count + value.utf8.count + 32 }
}

extension ByteBuffer {
    /// An HPACK integer (RFC 7541 §5.1) with an N-bit prefix, `marker` holding the first byte's other bits.
    mutating func writeHPACKInteger(_ value: Int, prefixBits: Int, marker: UInt8) {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else {
            writeInteger(marker | UInt8(value))
            return
        }
        writeInteger(marker | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            writeInteger(UInt8(rest & 0x7F | 0x80))
            rest >>= 7
        }
        writeInteger(UInt8(rest))
    }

    /// An HPACK string literal (RFC 7541 §5.2), not Huffman-coded.
    mutating func writeHPACKString(_ string: String) {
        writeHPACKInteger(string.utf8.count, prefixBits: 7, marker: 0x00)
        writeString(string)
    }
}
