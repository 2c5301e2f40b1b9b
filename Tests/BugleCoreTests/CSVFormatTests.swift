import BugleCore
import Testing

@Suite("CSV quoting and formula neutralising")
struct CSVFormatTests {
    @Test(
        "RFC 4180 quoting",
        arguments: [
            (["a", "b"], "a,b\r\n"),
            (["a,b", "c"], "\"a,b\",c\r\n"),
            (["say \"hi\""], "\"say \"\"hi\"\"\"\r\n"),
            (["line\nbreak", ""], "\"line\nbreak\",\r\n"),
            (["cr\r"], "\"cr\r\"\r\n"),
            (["ünïcødé 🚀"], "ünïcødé 🚀\r\n"),
        ]
    )
    func quoting(fields: [String], expected: String) {
        #expect(CSVFormat.record(fields) == expected)
    }

    @Test(
        "cells a spreadsheet would evaluate are neutralised",
        arguments: [
            ("=1+1", "'=1+1"), ("+SUM(A1)", "'+SUM(A1)"), ("-2", "'-2"), ("@cmd", "'@cmd"), ("\tx", "'\tx"),
            ("a=b", "a=b"), ("", ""), ("ok", "ok"),
        ]
    )
    func neutralise(input: String, expected: String) {
        #expect(CSVFormat.neutralize(input) == expected)
    }

    @Test("a neutralised cell that also needs quotes is quoted after neutralising")
    func neutraliseThenQuote() {
        #expect(CSVFormat.record(["=HYPERLINK(\"x\",1)"]) == "\"'=HYPERLINK(\"\"x\"\",1)\"\r\n")
    }
}
