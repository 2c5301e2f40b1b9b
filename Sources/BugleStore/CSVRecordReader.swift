import Foundation

/// One CSV record with the physical line it starts on.
public struct CSVRecord: Sendable, Hashable {
    /// The 1-based physical line of the record's first character (quoted fields may span several lines).
    public var line: Int
    /// The decoded fields.
    public var fields: [String]
    /// Set when the record is malformed; the fields are then best effort.
    public var problem: Problem?

    /// What is wrong with a malformed record.
    public struct Problem: Sendable, Hashable {
        /// The 0-based index of the field at fault, if one is.
        public var fieldIndex: Int?
        /// A short explanation that never quotes the field's content.
        public var reason: String
        /// The record ran to the end of the input: a quote was opened and never closed, so every line from the
        /// record's to the last was read as one field (none of those rows can be taken).
        public var runsToEnd = false
    }
}

/// A streaming RFC 4180 reader: quoted fields with embedded commas, doubled quotes and line breaks; CRLF, LF or CR
/// line ends; a leading UTF-8 byte-order mark is skipped; blank lines are skipped.
///
/// The file is read in chunks, so memory stays flat however large it is; a field longer than `maxFieldBytes` is
/// truncated and the record flagged rather than buffered whole.
public final class CSVRecordReader {
    private let handle: FileHandle?
    private var buffer: [UInt8]
    private var index = 0
    private var atEnd: Bool
    private let chunkSize: Int
    private let maxFieldBytes: Int
    private var line = 1
    private var lastWasCR = false
    private var startedFile = false

    /// Opens a file for reading.
    /// - Parameters:
    ///   - path: The CSV file.
    ///   - chunkSize: How many bytes to read at a time.
    ///   - maxFieldBytes: The longest field kept; longer fields flag the record.
    /// - Throws: ``StoreError`` with code `fileUnreadable`.
    public init(path: String, chunkSize: Int = 256 * 1024, maxFieldBytes: Int = 64 * 1024) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw StoreError(.fileUnreadable, "cannot open \(path) for reading")
        }
        self.handle = handle
        self.buffer = []
        self.atEnd = false
        self.chunkSize = max(1, chunkSize)
        self.maxFieldBytes = maxFieldBytes
    }

    /// Reads from memory (for tests and small inputs).
    /// - Parameters:
    ///   - data: The CSV bytes.
    ///   - maxFieldBytes: The longest field kept.
    public init(data: Data, maxFieldBytes: Int = 64 * 1024) {
        self.handle = nil
        self.buffer = Array(data)
        self.atEnd = true
        self.chunkSize = 1
        self.maxFieldBytes = maxFieldBytes
        self.startedFile = true
        if self.buffer.starts(with: [0xEF, 0xBB, 0xBF]) {
            self.index = 3
        }
    }

    deinit {
        try? self.handle?.close()
    }

    private enum State {
        case fieldStart
        case unquoted
        case quoted
        case quoteInQuoted
    }

    /// Reads the next record.
    /// - Returns: The record, or `nil` at the end of the input.
    /// - Throws: ``StoreError`` with code `fileUnreadable` when reading fails.
    public func next() throws -> CSVRecord? {
        var state = State.fieldStart
        var fields: [String] = []
        var field: [UInt8] = []
        var recordLine: Int?
        var problem: CSVRecord.Problem?
        var quoteLine: Int?
        var lastContentLine: Int?

        func flag(_ reason: String, field index: Int?) {
            if problem == nil {
                problem = CSVRecord.Problem(fieldIndex: index, reason: reason)
            }
        }
        func append(_ byte: UInt8) {
            if field.count < self.maxFieldBytes {
                field.append(byte)
            } else {
                flag("field longer than \(self.maxFieldBytes) bytes", field: fields.count)
            }
        }
        func finishField() {
            if let text = String(bytes: field, encoding: .utf8) {
                fields.append(text)
            } else {
                flag("not valid UTF-8", field: fields.count)
                fields.append(String(decoding: field, as: UTF8.self))
            }
            field.removeAll(keepingCapacity: true)
        }

        while true {
            guard let byte = try self.nextByte() else {
                // End of input.
                guard let start = recordLine else { return nil }
                if state == .quoted {
                    // Said whatever else was flagged (a field too long is what an unclosed quote looks like first).
                    let last = lastContentLine ?? start
                    problem = CSVRecord.Problem(
                        fieldIndex: fields.count,
                        reason: "a quote opened on line \(quoteLine ?? start) is never closed: lines \(start)–\(max(start, last)) were read as one field",
                        runsToEnd: true)
                }
                finishField()
                return CSVRecord(line: start, fields: fields, problem: problem)
            }
            let lineOfByte = self.line
            let isLineEnd = byte == 0x0A || byte == 0x0D
            // Physical line counting: CRLF, LF and CR each end one line.
            if byte == 0x0A {
                if !self.lastWasCR { self.line += 1 }
                self.lastWasCR = false
            } else if byte == 0x0D {
                self.line += 1
                self.lastWasCR = true
            } else {
                self.lastWasCR = false
            }

            if state == .quoted {
                if !isLineEnd { lastContentLine = lineOfByte }
                if byte == 0x22 {
                    state = .quoteInQuoted
                } else {
                    append(byte)
                }
                continue
            }
            if isLineEnd {
                // A LF completing a CRLF after a record was already emitted, or a blank line: skip.
                guard let start = recordLine else { continue }
                finishField()
                return CSVRecord(line: start, fields: fields, problem: problem)
            }
            if recordLine == nil {
                recordLine = lineOfByte
            }
            switch state {
            case .fieldStart:
                if byte == 0x22 {
                    state = .quoted
                    quoteLine = lineOfByte
                } else if byte == 0x2C {
                    finishField()
                } else {
                    append(byte)
                    state = .unquoted
                }
            case .unquoted:
                if byte == 0x2C {
                    finishField()
                    state = .fieldStart
                } else {
                    if byte == 0x22 {
                        flag("quote inside an unquoted field", field: fields.count)
                    }
                    append(byte)
                }
            case .quoteInQuoted:
                if byte == 0x22 {
                    append(0x22)
                    state = .quoted
                } else if byte == 0x2C {
                    finishField()
                    state = .fieldStart
                } else {
                    flag("text after a closing quote", field: fields.count)
                    append(byte)
                    state = .unquoted
                }
            case .quoted:
                break
            }
        }
    }

    private func nextByte() throws -> UInt8? {
        if self.index >= self.buffer.count {
            guard try self.refill() else { return nil }
        }
        let byte = self.buffer[self.index]
        self.index += 1
        return byte
    }

    private func refill() throws -> Bool {
        while true {
            if self.atEnd {
                if self.index >= self.buffer.count {
                    return false
                }
                return true
            }
            guard let handle = self.handle else {
                self.atEnd = true
                continue
            }
            let data: Data?
            do {
                data = try handle.read(upToCount: self.chunkSize)
            } catch {
                throw StoreError(.fileUnreadable, "reading the CSV file failed", underlying: error)
            }
            guard let data, !data.isEmpty else {
                self.atEnd = true
                self.buffer = []
                self.index = 0
                return false
            }
            self.buffer = Array(data)
            self.index = 0
            if !self.startedFile {
                self.startedFile = true
                if self.buffer.starts(with: [0xEF, 0xBB, 0xBF]) {
                    self.index = 3
                }
            }
            if self.index < self.buffer.count {
                return true
            }
        }
    }
}
