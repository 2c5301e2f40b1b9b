import Foundation

/// libpq's `options` keyword (`?options=`, a service's `options=`, `PGOPTIONS`): server settings for the session, as
/// `-c name=value`, `-cname=value` or `--name=value`, separated by spaces (a backslash keeps the next character, so
/// `\ ` is a space inside a value). Bugle applies them to the transactions that run segment SQL only (`SET LOCAL`
/// through `set_config`), where a marketer's SQL may rely on them (`search_path`); its own ledger statements keep the
/// settings they set for themselves. `role` and `session_authorization` are refused: segments are read as
/// `bugle_segment_reader`.
public struct SessionOptions: Sendable, Hashable {
    /// One `name=value`, in the order given (a later one of the same name wins, as on the server).
    public struct Setting: Sendable, Hashable {
        public var name: String
        public var value: String
    }

    public var settings: [Setting]

    public init(settings: [Setting] = []) {
        self.settings = settings
    }

    /// Names that would change who runs the segment SQL.
    static let refused: Set<String> = ["role", "session_authorization"]

    /// Parses an `options` value.
    /// - Throws: A description of the first problem (the caller adds where the value came from; never the value).
    public static func parse(_ text: String) throws(Problem) -> SessionOptions {
        var words: [String] = []
        var word = ""
        var escaped = false
        var inWord = false
        for character in text {
            if escaped {
                word.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
                inWord = true
            } else if character == " " || character == "\t" || character == "\n" {
                if inWord { words.append(word) }
                word = ""
                inWord = false
            } else {
                word.append(character)
                inWord = true
            }
        }
        if escaped { throw Problem("ends with a lone backslash") }
        if inWord { words.append(word) }
        var settings: [Setting] = []
        var index = 0
        while index < words.count {
            let current = words[index]
            let assignment: String
            if current == "-c" {
                index += 1
                guard index < words.count else { throw Problem("-c is not followed by name=value") }
                assignment = words[index]
            } else if current.hasPrefix("--") {
                assignment = String(current.dropFirst(2))
            } else if current.hasPrefix("-c") {
                assignment = String(current.dropFirst(2))
            } else {
                throw Problem("only server settings are read (-c name=value or --name=value), not \(current.prefix(2))…")
            }
            guard let equals = assignment.firstIndex(of: "="), equals != assignment.startIndex else {
                throw Problem("a setting is not name=value")
            }
            // The server reads `-` in a name as `_` (`--search-path=…`).
            let name = assignment[..<equals].lowercased().replacingOccurrences(of: "-", with: "_")
            guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." }) else {
                throw Problem("\(name) is not a setting name")
            }
            guard !refused.contains(name) else {
                throw Problem("\(name) is not applied: segments are read as bugle_segment_reader")
            }
            settings.append(Setting(name: name, value: String(assignment[assignment.index(after: equals)...])))
            index += 1
        }
        return SessionOptions(settings: settings)
    }

    /// Why an `options` value was refused.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
