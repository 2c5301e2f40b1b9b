import BugleTesting
import Foundation
import Testing

@testable import BugleStore

@Suite("CSVRecordReader")
struct CSVRecordReaderTests {
    private func records(_ text: String) throws -> [CSVRecord] {
        let reader = CSVRecordReader(data: Data(text.utf8))
        var result: [CSVRecord] = []
        while let record = try reader.next() {
            result.append(record)
        }
        return result
    }

    @Test func parsesQuotedFieldsWithPhysicalLines() throws {
        let text = "a,b\r\n\"x,1\",\"say \"\"hi\"\"\"\r\n\"multi\r\nline\nfield\",z\r\n\r\nlast,row"
        let parsed = try self.records(text)
        #expect(parsed.map(\.fields) == [["a", "b"], ["x,1", "say \"hi\""], ["multi\r\nline\nfield", "z"], ["last", "row"]])
        #expect(parsed.map(\.line) == [1, 2, 3, 7])
        #expect(parsed.allSatisfy { $0.problem == nil })
    }

    @Test func skipsByteOrderMarkAndHandlesCROnly() throws {
        let parsed = try self.records("\u{FEFF}h1,h2\rv1,v2\r")
        #expect(parsed.map(\.fields) == [["h1", "h2"], ["v1", "v2"]])
        #expect(parsed.map(\.line) == [1, 2])
    }

    @Test func keepsEmptyTrailingField() throws {
        #expect(try self.records("a,\n,b\n").map(\.fields) == [["a", ""], ["", "b"]])
    }

    @Test func flagsMalformedQuoting() throws {
        let parsed = try self.records("a,b\"c\n\"x\"y,z\n\"open,\nnever closed")
        #expect(parsed.count == 3)
        #expect(parsed[0].problem?.fieldIndex == 1)
        #expect(parsed[1].problem?.reason == "text after a closing quote")
        #expect(parsed[2].problem?.reason == "a quote opened on line 3 is never closed: lines 3–4 were read as one field")
        #expect(parsed[2].problem?.runsToEnd == true)
        #expect(parsed[2].line == 3)
        // Past the field limit the unclosed quote is still what is said (it said "field longer than … bytes").
        let long = CSVRecordReader(data: Data(("a,b\n\"open," + String(repeating: "x\n", count: 20) + "end").utf8), maxFieldBytes: 10)
        _ = try long.next()
        let swallowed = try long.next()
        #expect(swallowed?.problem?.reason == "a quote opened on line 2 is never closed: lines 2–22 were read as one field", "\(String(describing: swallowed?.problem))")
    }

    @Test func capsFieldLength() throws {
        let reader = CSVRecordReader(data: Data(("x," + String(repeating: "a", count: 100) + "\nok,1\n").utf8), maxFieldBytes: 10)
        let first = try reader.next()
        #expect(first?.problem?.fieldIndex == 1)
        #expect(first?.fields[1].count == 10)
        #expect(try reader.next()?.fields == ["ok", "1"])
    }

    @Test func streamsAFileInSmallChunks() throws {
        let path = TestScratch.root + "bugle-csv-\(UUID().uuidString).csv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("h\r\n\"a\r\nb\"\r\nc\r\n".utf8).write(to: URL(fileURLWithPath: path))
        let reader = try CSVRecordReader(path: path, chunkSize: 1)
        var lines: [Int] = []
        var fields: [[String]] = []
        while let record = try reader.next() {
            lines.append(record.line)
            fields.append(record.fields)
        }
        #expect(fields == [["h"], ["a\r\nb"], ["c"]])
        #expect(lines == [1, 2, 4])
    }
}
