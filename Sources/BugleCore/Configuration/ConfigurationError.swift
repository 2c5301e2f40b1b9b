/// A problem in a campaign or providers file, located by file, line, column and key path.
///
/// `description` reads like a compiler diagnostic so editors and terminals can jump to it:
///
///     campaigns/spring-sale.yaml:12:15: message.apns.priority: expected one of 1, 5 or 10, got 7
///
/// Messages never contain credential values: the providers loader does not echo scalar values at all.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The file the problem is in, as the caller named it.
    public var file: String
    /// 1-based line of the offending key or value.
    public var line: Int
    /// 1-based column (counted in Unicode scalars, as libyaml does) of the offending key or value.
    public var column: Int
    /// Dotted path of the offending key (`message.locales.en.title`); empty for whole-file problems.
    public var keyPath: String
    /// What is wrong, and where it helps, what to write instead.
    public var message: String
    /// Problems found further on in other sections of the same file, in file order (a campaign file's sections are
    /// checked one by one, so a user fixes them all in one go, not one per `bugle validate`).
    public var further: [ConfigurationError] = []
    /// A required key the file lacks: located where its mapping is named, it has no place of its own in the file, so
    /// ``combined(_:)`` puts it after the problems that have one.
    public var isMissingKey = false

    /// Creates an error.
    /// - Parameters:
    ///   - file: The file the problem is in.
    ///   - line: 1-based line.
    ///   - column: 1-based column.
    ///   - keyPath: Dotted key path, or empty for whole-file problems.
    ///   - message: What is wrong (must not contain secret values).
    public init(file: String, line: Int, column: Int, keyPath: String, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.keyPath = keyPath
        self.message = message
    }

    /// `file:line:column: key.path: message` (the key path segment is left out when empty), then each of ``further``
    /// on a line of its own.
    public var description: String {
        ([self] + further).map(\.located).joined(separator: "\n")
    }

    /// This problem alone, `file:line:column: key.path: message`.
    public var located: String {
        keyPath.isEmpty ? "\(file):\(line):\(column): \(message)" : "\(file):\(line):\(column): \(keyPath): \(message)"
    }

    /// The first of `problems` in file order, carrying the others as ``further``; nil when there are none.
    public static func combined(_ problems: [ConfigurationError]) -> ConfigurationError? {
        let ordered = problems.sorted { ($0.isMissingKey ? 1 : 0, $0.line, $0.column) < ($1.isMissingKey ? 1 : 0, $1.line, $1.column) }
        guard var first = ordered.first else { return nil }
        first.further = Array(ordered.dropFirst())
        return first
    }
}
