import Foundation
import Yams

/// Reads a YAML configuration file into a ``ConfigurationNode`` tree, refusing hostile input.
///
/// Defences, in order:
/// 1. Size: files (and strings) over ``maximumFileSize`` bytes are refused before parsing.
/// 2. Keys that are not scalars (`? *bomb`, `[*a, *a]: 1`) are refused by ``YAMLKeyScanner`` on the raw
///    text, because composing them would hash an alias-expanded tree.
/// 3. `Yams.compose` builds the tree; aliases share the anchored node, so this stays linear.
/// 4. The tree is copied into ``ConfigurationNode``s with aliases expanded, counting every node visited;
///    more than ``maximumNodeCount`` aborts with an error naming the alias (YAML "billion laughs").
/// 5. Duplicate keys are rejected at the second occurrence.
///
/// Syntax errors from libyaml keep their line and column.
enum ConfigurationDocument {
    /// Largest configuration file accepted, in bytes (1 MiB).
    static let maximumFileSize = 1 << 20
    /// Most nodes a document may expand to, counting every alias expansion.
    static let maximumNodeCount = 10_000

    /// Reads a file as UTF-8 text, refusing files over ``maximumFileSize`` without reading them whole.
    /// - Parameter path: The file's path.
    /// - Throws: ``ConfigurationError`` when the file is missing, unreadable, too large or not UTF-8.
    static func readText(atPath path: String) throws -> String {
        func failure(_ message: String, line: Int = 1, column: Int = 1) -> ConfigurationError {
            ConfigurationError(file: path, line: line, column: column, keyPath: "", message: message)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw failure("file not found")
        }
        if isDirectory.boolValue { throw failure("is a directory, expected a YAML file") }
        guard let handle = FileHandle(forReadingAtPath: path) else { throw failure("cannot open file for reading") }
        defer { try? handle.close() }
        let data: Data
        do {
            // Read at most one byte more than the limit: enough to know the file is too large.
            data = try handle.read(upToCount: maximumFileSize + 1) ?? Data()
        } catch {
            throw failure("cannot read file")
        }
        if data.count > maximumFileSize { throw failure(sizeMessage) }
        return try decodeUTF8(data, file: path)
    }

    /// Parses YAML text into a checked tree.
    /// - Parameters:
    ///   - yaml: The document text.
    ///   - origin: File name for errors, and whether errors may quote values.
    /// - Throws: ``ConfigurationError`` for oversized input, syntax errors, alias bombs, non-scalar or
    ///   duplicate keys, and an empty document.
    static func parse(yaml: String, origin: ConfigurationNode.Origin) throws -> ConfigurationNode {
        func failure(_ message: String, line: Int = 1, column: Int = 1) -> ConfigurationError {
            ConfigurationError(file: origin.file, line: line, column: column, keyPath: "", message: message)
        }
        if yaml.utf8.count > maximumFileSize { throw failure(sizeMessage) }
        if let finding = YAMLKeyScanner.firstComplexKey(in: yaml) {
            throw failure(finding.message, line: finding.line, column: finding.column)
        }
        let composed: Node?
        do {
            composed = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw map(error, yaml: yaml, origin: origin)
        }
        guard let composed else { throw failure("the file is empty; expected a mapping of keys") }
        var converter = Converter(yaml: yaml, origin: origin)
        return try converter.convert(composed, keyPath: "", keyMark: nil)
    }

    private static var sizeMessage: String {
        "file is larger than the \(maximumFileSize / 1024 / 1024) MiB (\(maximumFileSize) bytes) limit "
            + "for configuration files"
    }

    // MARK: - UTF-8

    private static func decodeUTF8(_ data: Data, file: String) throws -> String {
        if let text = String(data: data, encoding: .utf8) { return text }
        // Locate the first invalid byte for the error.
        var line = 1
        var column = 1
        var iterator = data.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        parsing: while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                if Unicode.UTF8.decode(encoded) == "\n" {
                    line += 1
                    column = 1
                } else {
                    column += 1
                }
            case .emptyInput, .error:
                break parsing
            }
        }
        throw ConfigurationError(
            file: file, line: line, column: column, keyPath: "", message: "the file is not valid UTF-8 text")
    }

    // MARK: - Yams errors

    private static func map(_ error: YamlError, yaml: String, origin: ConfigurationNode.Origin) -> ConfigurationError {
        func located(_ mark: Mark, _ message: String) -> ConfigurationError {
            ConfigurationError(file: origin.file, line: mark.line, column: mark.column, keyPath: "", message: message)
        }
        func syntax(_ problem: String, _ context: YamlError.Context?, _ mark: Mark) -> ConfigurationError {
            var message = "syntax error: \(problem)"
            if let context {
                message += " (\(context.text) at line \(context.mark.line), column \(context.mark.column))"
            }
            return located(mark, message)
        }
        switch error {
        case .scanner(let context, let problem, let mark, _),
            .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            return syntax(problem, context, mark)
        case .reader(let problem, let offset, _, _):
            let mark = offset.map { markOfCharacter(at: $0, in: yaml) } ?? Location(line: 1, column: 1)
            return ConfigurationError(
                file: origin.file, line: mark.line, column: mark.column, keyPath: "",
                message: "unreadable input: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return locateDuplicate(keys: duplicates, firstMark: context.mark, yaml: yaml, origin: origin)
        default:
            return ConfigurationError(
                file: origin.file, line: 1, column: 1, keyPath: "", message: "could not parse YAML: \(error)")
        }
    }

    private static func markOfCharacter(at offset: Int, in yaml: String) -> Location {
        var line = 1
        var column = 1
        for character in yaml.prefix(offset) {
            if character == "\n" || character == "\r\n" {
                line += 1
                column = 1
            } else {
                column += character.unicodeScalars.count
            }
        }
        return Location(line: line, column: column)
    }

    /// Yams reports a duplicate key at its *first* occurrence and without a key path. To report the
    /// second occurrence and its path, rename the first occurrence in a copy of the text (same length, so
    /// every other position is unchanged), compose that, and find the remaining twin.
    private static func locateDuplicate(
        keys: [String], firstMark yamsMark: Mark, yaml: String, origin: ConfigurationNode.Origin
    ) -> ConfigurationError {
        let key = keys.sorted().first ?? ""
        let firstMark = Location(yamsMark)
        let fallback = ConfigurationError(
            file: origin.file, line: firstMark.line, column: firstMark.column, keyPath: key,
            message: "duplicate key '\(key)'")
        var lines = yaml.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.unicodeScalars) }
        guard firstMark.line >= 1, firstMark.line <= lines.count else { return fallback }
        var scalars = lines[firstMark.line - 1]
        let keyScalars = Array(key.unicodeScalars)
        var start = firstMark.column - 1
        if start < scalars.count, scalars[start] == "\"" || scalars[start] == "'" { start += 1 }
        guard !keyScalars.isEmpty, start >= 0, start + keyScalars.count <= scalars.count,
            Array(scalars[start..<(start + keyScalars.count)]) == keyScalars
        else { return fallback }
        let placeholder: Unicode.Scalar = "\u{2603}"
        for index in start..<(start + keyScalars.count) { scalars[index] = placeholder }
        lines[firstMark.line - 1] = scalars
        let renamed = lines.map { String(String.UnicodeScalarView($0)) }.joined(separator: "\n")
        guard let root = try? Yams.compose(yaml: renamed) else { return fallback }
        var converter = Converter(yaml: renamed, origin: origin)
        guard let tree = try? converter.convert(root, keyPath: "", keyMark: nil),
            let twin = findTwin(of: key, renamedAt: firstMark, in: tree)
        else { return fallback }
        return twin.keyError(
            "duplicate key '\(key)' (first defined at line \(firstMark.line), column \(firstMark.column))")
    }

    private static func findTwin(of key: String, renamedAt mark: Location, in node: ConfigurationNode)
        -> ConfigurationNode?
    {
        switch node.content {
        case .scalar:
            return nil
        case .sequence(let items):
            for item in items {
                if let found = findTwin(of: key, renamedAt: mark, in: item) { return found }
            }
            return nil
        case .mapping(let entries):
            if entries.contains(where: { $0.value.keyLine == mark.line && $0.value.keyColumn == mark.column }),
                let twin = entries.first(where: { $0.key == key })
            {
                return twin.value
            }
            for entry in entries {
                if let found = findTwin(of: key, renamedAt: mark, in: entry.value) { return found }
            }
            return nil
        }
    }
}

// MARK: - Location

extension ConfigurationDocument {
    /// A 1-based line and column (Yams' `Mark` has no public initializer).
    struct Location: Hashable, Sendable {
        var line: Int
        var column: Int

        init(line: Int, column: Int) {
            self.line = line
            self.column = column
        }

        init(_ mark: Mark?) {
            self.line = mark?.line ?? 1
            self.column = mark?.column ?? 1
        }
    }
}

// MARK: - Converter

extension ConfigurationDocument {
    /// Copies a Yams tree into ``ConfigurationNode``s, expanding aliases under a node budget.
    private struct Converter {
        private struct Identity: Hashable {
            var kind: Int
            var line: Int
            var column: Int
        }

        private struct AliasUse {
            var anchorMark: Location
            var keyPath: String
        }

        let yaml: String
        let origin: ConfigurationNode.Origin
        private var visited = 0
        private var seen: Set<Identity> = []
        private var aliasUse: AliasUse?

        init(yaml: String, origin: ConfigurationNode.Origin) {
            self.yaml = yaml
            self.origin = origin
        }

        mutating func convert(_ node: Node, keyPath: String, keyMark: Location?) throws -> ConfigurationNode {
            let mark = Location(node.mark)
            let keyMark = keyMark ?? mark
            visited += 1

            // Every source node starts at a distinct (kind, position); meeting one again means an alias.
            let identity = Identity(kind: Self.kind(of: node), line: mark.line, column: mark.column)
            var startedAliasUse = false
            if aliasUse == nil {
                if seen.contains(identity) {
                    aliasUse = AliasUse(anchorMark: mark, keyPath: keyPath)
                    startedAliasUse = true
                } else {
                    seen.insert(identity)
                }
            }
            defer { if startedAliasUse { aliasUse = nil } }

            if visited > maximumNodeCount { throw budgetError(at: mark, keyPath: keyPath) }

            let base = ConfigurationNode(
                content: .scalar(.init(text: "", isPlain: true)), line: mark.line, column: mark.column,
                keyLine: keyMark.line, keyColumn: keyMark.column, keyPath: keyPath, origin: origin)
            switch node {
            case .scalar(let scalar):
                var result = base
                // Yams may resolve a tag in place (Tag is a class), so only an explicit `!!str` counts as quoted.
                let isPlain = scalar.style == .plain && scalar.tag.rawValue != Tag.Name.str.rawValue
                result.content = .scalar(.init(text: scalar.string, isPlain: isPlain))
                return result
            case .sequence(let sequence):
                var items: [ConfigurationNode] = []
                for (index, item) in sequence.enumerated() {
                    items.append(try convert(item, keyPath: "\(keyPath)[\(index)]", keyMark: nil))
                }
                var result = base
                result.content = .sequence(items)
                return result
            case .mapping(let mapping):
                var entries: [ConfigurationNode.Entry] = []
                var firstMarks: [String: Location] = [:]
                // Keys written in this mapping: a merged mapping (`<<: *defaults`) gives only the others.
                let written = Set(mapping.compactMap { keyNode, _ -> String? in
                    guard case .scalar(let scalar) = keyNode, !Self.isMergeKey(scalar) else { return nil }
                    return scalar.string
                })
                var merged: Set<String> = []
                for (keyNode, valueNode) in mapping {
                    let keyNodeMark = keyNode.mark.map(Location.init) ?? mark
                    let keyText: String
                    if case .scalar(let scalar) = keyNode {
                        keyText = scalar.string
                        if Self.isMergeKey(scalar) {
                            for entry in try mergedEntries(valueNode, keyPath: keyPath, keyMark: keyNodeMark)
                            where !written.contains(entry.key) && !merged.contains(entry.key) {
                                merged.insert(entry.key)
                                entries.append(entry)
                            }
                            continue
                        }
                    } else {
                        throw ConfigurationError(
                            file: origin.file, line: keyNodeMark.line, column: keyNodeMark.column,
                            keyPath: keyPath, message: "mapping keys must be plain strings")
                    }
                    visited += 1
                    let childPath = keyPath.isEmpty ? keyText : "\(keyPath).\(keyText)"
                    if let first = firstMarks[keyText] {
                        throw ConfigurationError(
                            file: origin.file, line: keyNodeMark.line, column: keyNodeMark.column,
                            keyPath: childPath,
                            message: "duplicate key '\(keyText)' "
                                + "(first defined at line \(first.line), column \(first.column))")
                    }
                    firstMarks[keyText] = keyNodeMark
                    let value = try convert(valueNode, keyPath: childPath, keyMark: keyNodeMark)
                    entries.append(ConfigurationNode.Entry(key: keyText, value: value))
                }
                var result = base
                result.content = .mapping(entries)
                return result
            case .alias:
                throw ConfigurationError(
                    file: origin.file, line: mark.line, column: mark.column, keyPath: keyPath,
                    message: "unresolved YAML alias")
            }
        }

        /// A plain `<<` key: YAML's merge key, whose value (a mapping, usually an alias, or a list of them) gives the
        /// mapping the keys it does not write itself; earlier mappings of a list win over later ones.
        private static func isMergeKey(_ scalar: Node.Scalar) -> Bool {
            scalar.string == "<<" && scalar.style == .plain
        }

        /// The entries a merge key's value brings, converted at the merging mapping's key path (an error names the
        /// line where the value is written, under the key path where it is used).
        private mutating func mergedEntries(_ value: Node, keyPath: String, keyMark: Location) throws -> [ConfigurationNode.Entry] {
            let sources: [Node]
            switch value {
            case .mapping: sources = [value]
            case .sequence(let items): sources = Array(items)
            default: sources = [value]
            }
            var entries: [ConfigurationNode.Entry] = []
            for source in sources {
                guard case .mapping = source else {
                    let mark = Location(source.mark)
                    throw ConfigurationError(
                        file: origin.file, line: mark.line, column: mark.column, keyPath: keyPath.isEmpty ? "<<" : "\(keyPath).<<",
                        message: "a merge key (<<) takes a mapping or a list of mappings, usually aliases (<<: *defaults)")
                }
                let converted = try convert(source, keyPath: keyPath, keyMark: keyMark)
                guard case .mapping(let sourceEntries) = converted.content else { continue }
                entries += sourceEntries.filter { entry in !entries.contains { $0.key == entry.key } }
            }
            return entries
        }

        private static func kind(of node: Node) -> Int {
            switch node {
            case .scalar: return 0
            case .mapping: return 1
            case .sequence: return 2
            case .alias: return 3
            }
        }

        private func budgetError(at mark: Location, keyPath: String) -> ConfigurationError {
            guard let aliasUse else {
                return ConfigurationError(
                    file: origin.file, line: mark.line, column: mark.column, keyPath: keyPath,
                    message: "the document has more than \(maximumNodeCount) nodes, the limit for configuration files")
            }
            let name = anchorName(at: aliasUse.anchorMark)
            let alias = name.map { "alias *\($0) (anchor &\($0) defined here)" } ?? "an alias of the node defined here"
            return ConfigurationError(
                file: origin.file, line: aliasUse.anchorMark.line, column: aliasUse.anchorMark.column,
                keyPath: aliasUse.keyPath,
                message: "\(alias) expands the document past the limit of \(maximumNodeCount) nodes; "
                    + "YAML alias bombs are refused")
        }

        /// Reads `&name` at a node's start mark (libyaml puts a node's mark at its anchor).
        private func anchorName(at mark: Location) -> String? {
            var lineNumber = 1
            for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
                defer { lineNumber += 1 }
                guard lineNumber == mark.line else { continue }
                let scalars = Array(line.unicodeScalars)
                let start = mark.column - 1
                guard start >= 0, start < scalars.count, scalars[start] == "&" else { return nil }
                var end = start + 1
                while end < scalars.count, scalars[end] != " ", scalars[end] != "\t", scalars[end] != ",",
                    scalars[end] != "]", scalars[end] != "}"
                {
                    end += 1
                }
                let name = String(String.UnicodeScalarView(scalars[(start + 1)..<end]))
                return name.isEmpty ? nil : name
            }
            return nil
        }
    }
}
