import PostgresNIO

/// Direct reads of the cell types Bugle's hot paths use (segment pages, claims, reports). postgres-nio's generic
/// tuple decoding cost more per row than the rest of a dry run's work together; these read the bytes as they come.
extension PostgresCell {
    /// A `text` cell's value (binary and text formats are both the UTF-8 bytes); nil for NULL.
    var text: String? {
        guard let bytes else { return nil }
        return String(buffer: bytes)
    }

    /// An `int8`, `int4` or `int2` cell's value, in either format; nil for NULL or anything else.
    var integer: Int64? {
        guard let bytes else { return nil }
        guard format == .binary else { return Int64(String(buffer: bytes)) }
        switch bytes.readableBytes {
        case 8: return bytes.getInteger(at: bytes.readerIndex, endianness: .big, as: Int64.self)
        case 4: return bytes.getInteger(at: bytes.readerIndex, endianness: .big, as: Int32.self).map(Int64.init)
        case 2: return bytes.getInteger(at: bytes.readerIndex, endianness: .big, as: Int16.self).map(Int64.init)
        default: return nil
        }
    }
}
