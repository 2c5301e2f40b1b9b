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

/// A one-dimensional array cell in PostgreSQL's binary format (`array_send`): a header (dimensions, a has-NULLs flag,
/// the element type), then each element as a 4-byte length (-1 for NULL) and its bytes. Segment pages arrive as one
/// row of such arrays, so a page of 5,000 rows is one message to decode rather than 5,000.
struct PostgresBinaryArray {
    private let buffer: ByteBuffer
    private let column: String
    /// Elements in the array.
    let count: Int

    /// - Returns: nil for a NULL cell; throws for anything but a binary one-dimensional array.
    init?(_ cell: PostgresCell) throws {
        guard var buffer = cell.bytes else { return nil }
        guard cell.format == .binary,
              let dimensions = buffer.readInteger(endianness: .big, as: Int32.self),
              buffer.readInteger(endianness: .big, as: Int32.self) != nil,
              buffer.readInteger(endianness: .big, as: UInt32.self) != nil
        else { throw MalformedArray(column: cell.columnName) }
        switch dimensions {
        case 0:
            count = 0
        case 1:
            guard let size = buffer.readInteger(endianness: .big, as: Int32.self), size >= 0,
                  buffer.readInteger(endianness: .big, as: Int32.self) != nil
            else { throw MalformedArray(column: cell.columnName) }
            count = Int(size)
        default:
            throw MalformedArray(column: cell.columnName)
        }
        self.buffer = buffer
        self.column = cell.columnName
    }

    /// The arrays of a row holding one array per column, as claims and report pages come back (an aggregate over the
    /// rows, NULLs in place, so the columns line up by position).
    /// - Returns: nil when the first cell is NULL: the aggregate saw no row.
    /// - Throws: `StoreError` saying `malformed` unless the row is `count` arrays of one length (and as ``init(_:)``).
    static func columns(of row: PostgresRow, count: Int, malformed: String) throws -> [PostgresBinaryArray?]? {
        var cells = row.makeIterator()
        var columns: [PostgresBinaryArray?] = []
        while let cell = cells.next() { columns.append(try PostgresBinaryArray(cell)) }
        guard columns.count == count else { throw StoreError(.query, malformed) }
        guard let first = columns[0] else { return nil }
        guard columns.allSatisfy({ $0?.count == first.count }) else { throw StoreError(.query, malformed) }
        return columns
    }

    /// The elements as text (UTF-8 bytes); NULL → nil.
    func texts() throws -> [String?] {
        var values: [String?] = []
        values.reserveCapacity(count)
        try forEachElement { values.append($0.map { String(buffer: $0) }) }
        return values
    }

    /// The elements as `int8`; NULL (or another width) → nil.
    func integers() throws -> [Int64?] {
        var values: [Int64?] = []
        values.reserveCapacity(count)
        try forEachElement { element in
            values.append(element.flatMap { $0.readableBytes == 8 ? $0.getInteger(at: $0.readerIndex, endianness: .big, as: Int64.self) : nil })
        }
        return values
    }

    /// Where each element's bytes lie in `bytes` (offsets from its reader index; nil for NULL), for reading many
    /// cells without making a slice or a string of each (the report writes them straight into its CSV).
    func elementRanges() throws -> (bytes: ByteBuffer, ranges: [Range<Int>?]) {
        var ranges: [Range<Int>?] = []
        ranges.reserveCapacity(count)
        let start = buffer.readerIndex
        try walkElements { bytes, length in
            guard let length else {
                ranges.append(nil)
                return
            }
            let from = bytes.readerIndex - start
            bytes.moveReaderIndex(forwardBy: length)
            ranges.append(from..<(from + length))
        }
        return (buffer, ranges)
    }

    /// Calls `element` with each element's bytes, nil for NULL.
    private func forEachElement(_ element: (ByteBuffer?) -> Void) throws {
        try walkElements { bytes, length in element(length.flatMap { bytes.readSlice(length: $0) }) }
    }

    /// Calls `visit` at each element with the bytes positioned at its value and its length (nil for NULL); `visit`
    /// reads exactly that many bytes. A length beyond the array's bytes throws before `visit` is called.
    private func walkElements(_ visit: (inout ByteBuffer, Int?) -> Void) throws {
        var bytes = buffer
        for _ in 0..<count {
            guard let length = bytes.readInteger(endianness: .big, as: Int32.self) else { throw MalformedArray(column: column) }
            guard length >= 0 else {
                visit(&bytes, nil)
                continue
            }
            guard bytes.readableBytes >= Int(length) else { throw MalformedArray(column: column) }
            visit(&bytes, Int(length))
        }
    }

    struct MalformedArray: Error, CustomStringConvertible {
        var column: String
        var description: String { "the server sent a malformed array in column \(column)" }
    }
}
