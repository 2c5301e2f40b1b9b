import BugleCore
import PostgresNIO

/// One page of a run's CSV report, read as a single row of arrays: the ledger's `seq`, the eleven text columns of
/// ``ReportExporter/header`` before `finished_at`, and `finished_at` as binary `timestamptz`.
///
/// Read row by row, postgres-nio's per-row and per-cell bookkeeping cost Bugle 2.1–2.5 CPU-seconds per 1,000,000
/// report rows, several times the CSV formatting itself. A page is one message, and its cells go from the arrays'
/// bytes straight into the CSV.
struct ReportPage {
    /// The select list over a page of ledger rows (a subquery named `page`, ordered by `seq`), in the order
    /// ``init(_:)`` reads it.
    static let selectList = """
        array_agg(seq), array_agg(run_id::text), array_agg(device_id::text), array_agg(user_id), array_agg(platform),
        array_agg(provider), array_agg(state), array_agg(outcome_code), array_agg(provider_message_id),
        array_agg(attempts::text), array_agg(locale), array_agg(variant), array_agg(finished_at)
        """

    /// The arrays in ``selectList``.
    static let columnCount = 13

    /// The page's ledger sequence numbers, in the order its arrays hold the rows.
    let seqs: [Int64]
    /// The text columns' bytes, one column after another.
    private let cells: [UInt8]
    /// Per row, per text column: where its cell lies in ``cells`` (start, end), start -1 for NULL.
    private let bounds: [Int]
    /// `finished_at` in PostgreSQL's binary form: microseconds since 2000-01-01 UTC.
    private let finishedAt: [Int64?]

    /// Text columns before `finished_at`.
    private static let textColumns = columnCount - 2

    /// Rows on the page.
    var count: Int { seqs.count }

    /// The largest `seq` on the page: where the next page starts.
    var lastSeq: Int64? { seqs.max() }

    /// - Parameter row: the page's one row; every cell NULL when the page is empty.
    /// - Throws: for cells that are not one-dimensional binary arrays, or not ``columnCount`` arrays of one length.
    init(_ row: PostgresRow) throws {
        guard let columns = try PostgresBinaryArray.columns(of: row, count: Self.columnCount, malformed: Self.malformed),
              let first = columns[0]
        else {
            (seqs, cells, bounds, finishedAt) = ([], [], [], [])
            return
        }
        let rows = first.count
        var cells: [UInt8] = []
        var bounds = [Int](repeating: -1, count: rows * Self.textColumns * 2)
        for column in 0..<Self.textColumns {
            guard let array = columns[column + 1] else { continue }
            let (bytes, ranges) = try array.elementRanges()
            let base = cells.count
            cells.append(contentsOf: bytes.readableBytesView)
            for (row, range) in ranges.enumerated() {
                guard let range else { continue }
                let at = (row * Self.textColumns + column) * 2
                bounds[at] = base + range.lowerBound
                bounds[at + 1] = base + range.upperBound
            }
        }
        seqs = try first.integers().map { $0 ?? 0 }
        self.cells = cells
        self.bounds = bounds
        finishedAt = try columns[Self.columnCount - 1]?.integers() ?? []
    }

    /// Appends the page's CSV records, in `seq` order.
    func appendRecords(to out: inout [UInt8]) {
        // `array_agg` over the page's ordered subquery keeps its order; if a plan ever did not, sort here rather
        // than write rows out of order.
        let ascending = zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }
        let order = ascending ? Array(seqs.indices) : seqs.indices.sorted { seqs[$0] < seqs[$1] }
        cells.withUnsafeBytes { cells in
            for row in order {
                for column in 0..<Self.textColumns {
                    let at = (row * Self.textColumns + column) * 2
                    let start = bounds[at]
                    if start < 0 {
                        if column > 0 { out.append(UInt8(ascii: ",")) }
                    } else {
                        let field = UnsafeRawBufferPointer(rebasing: cells[start..<bounds[at + 1]])
                        CSVFormat.appendField(utf8: field, leadingComma: column > 0, to: &out)
                    }
                }
                out.append(UInt8(ascii: ","))
                if row < finishedAt.count, let microseconds = finishedAt[row] {
                    ReportTimestamp.append(microsecondsSince2000: microseconds, to: &out)
                }
                CSVFormat.endRecord(&out)
            }
        }
    }

    private static let malformed = "the report page did not come back as \(columnCount) arrays of one length"
}
