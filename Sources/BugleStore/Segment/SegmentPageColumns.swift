import BugleCore
import NIOCore
import PostgresNIO

/// One keyset page of a segment as columns, decoded from the single row its page query returns.
///
/// Two forms of that row:
/// - **packed** (tried first): the device ids as an `int8` array; each text column as one `string_agg` of its values
///   (NULL as empty text) joined by U+001F, followed by the ids of the rows where it is NULL. PostgreSQL spent about
///   twice as long building and sending one array of text per column (a copy and a send call per element).
/// - **arrays**: one array per column (NULLs in place). Used for a page whose packed form is ambiguous: a value
///   holding U+001F (the split then finds more values than rows), or ids that are not strictly increasing (the NULL
///   lists name rows by id).
struct SegmentPageColumns {
    /// The unit separator between packed values.
    static let separator: UInt8 = 0x1F
    /// Text columns in query order; the packed form has a (values, NULL ids) pair of cells per column.
    static let textColumnCount = 6

    var ids: [Int64?]
    /// user_id, token, platform, locale, timezone, variables (JSON); a column the segment lacks is nil.
    var texts: [[String?]?]

    /// The device ids of a page row in either form (its first cell); nil for a page without rows.
    static func ids(_ row: PostgresRow) throws -> [Int64?]? {
        var cells = row.makeIterator()
        guard let first = cells.next(), let ids = try PostgresBinaryArray(first)?.integers(), !ids.isEmpty else { return nil }
        return ids
    }

    /// The packed form; nil when only the arrays form can be trusted for this page.
    /// - Parameter ids: the row's ids, from ``ids(_:)``.
    /// - Throws: for cells that are not what the page query sends.
    init?(packed row: PostgresRow, ids: [Int64?]) throws {
        var cells = row.makeIterator()
        _ = cells.next()
        for (earlier, later) in zip(ids, ids.dropFirst()) where (earlier ?? .min) >= (later ?? .min) { return nil }
        var texts: [[String?]?] = []
        for _ in 0..<Self.textColumnCount {
            guard let joined = cells.next(), let nullIDs = cells.next() else { throw SegmentError(Self.malformed) }
            guard let bytes = joined.bytes else {
                texts.append(nil)
                continue
            }
            guard var values = Self.split(bytes, expecting: ids.count) else { return nil }
            for id in try PostgresBinaryArray(nullIDs)?.integers() ?? [] {
                guard let id, let index = Self.index(of: id, in: ids) else { return nil }
                values[index] = nil
            }
            texts.append(values)
        }
        self.ids = ids
        self.texts = texts
    }

    /// The arrays form.
    /// - Throws: for cells that are not one-dimensional binary arrays, or columns of differing lengths.
    init(arrays row: PostgresRow) throws {
        var cells = row.makeIterator()
        func next() throws -> PostgresBinaryArray? {
            guard let cell = cells.next() else { return nil }
            return try PostgresBinaryArray(cell)
        }
        ids = try next()?.integers() ?? []
        texts = []
        for _ in 0..<Self.textColumnCount {
            let column = try next()?.texts()
            guard column.map({ $0.count == ids.count }) ?? true else { throw SegmentError(Self.malformed) }
            texts.append(column)
        }
    }

    /// The values between separators, or nil when there are not exactly `count` of them.
    static func split(_ buffer: ByteBuffer, expecting count: Int) -> [String?]? {
        buffer.withUnsafeReadableBytes { bytes -> [String?]? in
            var values: [String?] = []
            values.reserveCapacity(count)
            var start = 0
            for index in bytes.indices where bytes[index] == separator {
                guard values.count < count else { return nil }
                values.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
                start = index + 1
            }
            values.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start...]), as: UTF8.self))
            return values.count == count ? values : nil
        }
    }

    /// The position of `id` in strictly increasing `ids`.
    private static func index(of id: Int64, in ids: [Int64?]) -> Int? {
        var low = 0
        var high = ids.count
        while low < high {
            let middle = (low + high) / 2
            let value = ids[middle] ?? .min
            if value == id { return middle }
            if value < id { low = middle + 1 } else { high = middle }
        }
        return nil
    }

    static let malformed = "the server sent a segment page whose columns differ in length"
}
