import NIOCore

/// One connection's HPACK encoder table: what the server's decoder holds in its dynamic table because this client put
/// it there (RFC 7541 §2.3.2, §4), for the fields requests mark as indexed (``HTTP2HeaderBlock/indexed``).
///
/// A field is written as a literal *with incremental indexing* the first time, and as one indexed byte while it is
/// still in the table. Entries are evicted oldest first, exactly as the decoder evicts them, so both agree on every
/// index. The table never grows past the server's `SETTINGS_HEADER_TABLE_SIZE` (4,096 until it says otherwise), and
/// a change of that setting is announced to the decoder with a dynamic table size update at the start of the next
/// header block, as RFC 7541 §4.2 requires. Blocks must be encoded in the order they are sent on the connection.
struct HTTP2HeaderTable {
    /// The most this client keeps in the server's table, whatever the server allows.
    static let preferredCapacity = 4_096
    /// HPACK's static table has 61 entries; the newest dynamic entry is index 62.
    private static let firstDynamicIndex = 62

    /// The table's maximum size now (bytes, as RFC 7541 §4.1 counts them).
    private(set) var capacity = preferredCapacity
    private var size = 0
    /// Entries oldest first, each with its insertion number (0 for the connection's first insertion).
    private var entries: [(field: HTTP2IndexedField, insertion: Int)] = []
    private var insertions = 0
    private var lookup: [HTTP2IndexedField: Int] = [:]
    /// Size updates owed to the decoder: the smallest maximum since the last block, then the current one.
    private var owedUpdate: (smallest: Int, final: Int)?

    /// Whether the next block must start with a dynamic table size update.
    var owesSizeUpdate: Bool { owedUpdate != nil }

    /// The server's `SETTINGS_HEADER_TABLE_SIZE` changed.
    mutating func peerLimitChanged(to limit: Int) {
        let newCapacity = min(Self.preferredCapacity, max(0, limit))
        guard newCapacity != capacity || owedUpdate != nil else { return }
        capacity = newCapacity
        evict(toFit: 0)
        let smallest = min(owedUpdate?.smallest ?? newCapacity, newCapacity)
        owedUpdate = (smallest, newCapacity)
    }

    /// Writes the size updates owed, if any: called at the start of a header block.
    mutating func writeSizeUpdates(into buffer: inout ByteBuffer) {
        guard let (smallest, final) = owedUpdate else { return }
        owedUpdate = nil
        buffer.writeHPACKInteger(smallest, prefixBits: 5, marker: 0x20)
        if final != smallest { buffer.writeHPACKInteger(final, prefixBits: 5, marker: 0x20) }
    }

    /// Writes a whole header block: the size updates owed, the block's fixed bytes, then its indexed fields.
    mutating func encode(_ block: HTTP2HeaderBlock, into buffer: inout ByteBuffer) {
        writeSizeUpdates(into: &buffer)
        buffer.writeImmutableBuffer(block.bytes)
        for field in block.indexed { write(field, into: &buffer) }
    }

    /// Writes a field: indexed when the decoder already holds it, else a literal that adds it to the decoder's table
    /// (or, when it cannot fit, a literal without indexing).
    mutating func write(_ field: HTTP2IndexedField, into buffer: inout ByteBuffer) {
        if let insertion = lookup[field] {
            buffer.writeHPACKInteger(Self.firstDynamicIndex + (insertions - 1 - insertion), prefixBits: 7, marker: 0x80)
            return
        }
        let fieldSize = field.tableSize
        guard fieldSize <= capacity else {
            // Adding it would only empty the table (RFC 7541 §4.4): send it without indexing.
            writeLiteral(field, prefixBits: 4, marker: 0x00, into: &buffer)
            return
        }
        writeLiteral(field, prefixBits: 6, marker: 0x40, into: &buffer)
        evict(toFit: fieldSize)
        entries.append((field, insertions))
        lookup[field] = insertions
        insertions += 1
        size += fieldSize
    }

    private func writeLiteral(_ field: HTTP2IndexedField, prefixBits: Int, marker: UInt8, into buffer: inout ByteBuffer) {
        if let name = HTTP2HeaderBlock.staticNames[field.name] {
            buffer.writeHPACKInteger(name.rawValue, prefixBits: prefixBits, marker: marker)
        } else {
            buffer.writeInteger(marker)
            buffer.writeHPACKString(field.name)
        }
        buffer.writeHPACKString(field.value)
    }

    /// Evicts the oldest entries until `incoming` more bytes fit.
    private mutating func evict(toFit incoming: Int) {
        var evicted = 0
        while size + incoming > capacity, evicted < entries.count {
            let (field, insertion) = entries[evicted]
            size -= field.tableSize
            if lookup[field] == insertion { lookup[field] = nil }
            evicted += 1
        }
        if evicted > 0 { entries.removeFirst(evicted) }
    }
}
