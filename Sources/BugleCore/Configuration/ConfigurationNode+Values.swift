import Foundation

// MARK: - Describing values in errors

extension ConfigurationNode {
    /// The scalar, if this node is one.
    var scalar: Scalar? {
        if case .scalar(let scalar) = content { return scalar }
        return nil
    }

    /// `true` for `~`, `null`, `Null`, `NULL` and an empty plain value (`key:`).
    var isNull: Bool {
        guard let scalar, scalar.isPlain else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.text)
    }

    /// How this value reads in a "got …" clause: `"abc"`, `12`, `a mapping`, `null`.
    ///
    /// In documents that redact values, scalars are described only by kind (`a string`).
    var valueDescription: String {
        switch content {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .scalar(let scalar):
            if isNull { return "null" }
            // Never quoted: a whole file that is one scalar (a key file given as the campaign would have its key's
            // first characters printed), and anything that looks like a PEM block.
            if origin.redactsValues || keyPath.isEmpty || scalar.text.contains("-----BEGIN") {
                if scalar.isPlain, Double(scalar.text.replacingOccurrences(of: "_", with: "")) != nil {
                    return "a number"
                }
                return "a string"
            }
            let shown = scalar.text.count > 60 ? String(scalar.text.prefix(57)) + "..." : scalar.text
            let quoted = "\"\(shown.replacingOccurrences(of: "\n", with: "\\n"))\""
            if scalar.isPlain { return quoted }
            if Int(scalar.text) != nil || Double(scalar.text) != nil || ["true", "false"].contains(scalar.text) {
                return "the string \(quoted) (remove the quotes)"
            }
            return quoted
        }
    }

    /// An error of the form `expected <what>, got <value>`.
    /// - Parameter expected: What should have been written (`an integer`).
    func typeError(_ expected: String) -> ConfigurationError {
        error("expected \(expected), got \(valueDescription)")
    }
}

// MARK: - Scalars

extension ConfigurationNode {
    /// The scalar's text; numbers and booleans are accepted as written.
    /// - Throws: ``ConfigurationError`` for mappings, lists and null.
    func string() throws -> String {
        guard let scalar, !isNull else { throw typeError("a string") }
        return scalar.text
    }

    /// A non-empty string (after trimming whitespace) on one line, at most `maximumLength` characters.
    /// - Parameter maximumLength: Longest accepted value, in characters.
    /// - Throws: ``ConfigurationError`` when empty, too long or multi-line, or unquoted and read by YAML as another
    ///   type (see ``refuseOtherYAMLTypes()``).
    func singleLineString(maximumLength: Int) throws -> String {
        if isNull { throw error("must not be empty") }
        try refuseOtherYAMLTypes()
        let value = try string()
        if value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw error("must not be empty") }
        if value.count > maximumLength {
            throw error("must be at most \(maximumLength) characters, got \(value.count)")
        }
        if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw error("must be a single line without control characters")
        }
        return value
    }

    /// Refuses, where text is expected, an unquoted value that YAML reads as a boolean (`true`, `false`), a number
    /// (`5`, `2.5`) or a date (`2026-01-01`): this reader keeps it as written, so `sound: true` was sent as the sound
    /// "true". Quoted, it is text.
    /// - Throws: ``ConfigurationError`` suggesting the quotes.
    func refuseOtherYAMLTypes() throws {
        guard let scalar, scalar.isPlain, !isNull else { return }
        let kind: String
        if ["true", "True", "TRUE", "false", "False", "FALSE"].contains(scalar.text) {
            kind = "a boolean"
        } else if Self.parseNumber(scalar.text) != nil {
            kind = "a number"
        } else if scalar.text.range(of: Self.yamlTimestamp, options: .regularExpression) != nil {
            kind = "a date"
        } else {
            return
        }
        if origin.redactsValues || keyPath.isEmpty {
            throw error("expected a string, got a value YAML reads as \(kind); write it in quotes to use it as text")
        }
        throw error(
            "expected a string, got \(scalar.text), which YAML reads as \(kind); write it in quotes (\"\(scalar.text)\") "
                + "to use it as text")
    }

    /// YAML 1.1's timestamps (`2026-01-01`, `2026-01-01T10:00:00Z`, `2026-1-1 10:00:00 +1`).
    private static let yamlTimestamp =
        #"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?)?$"#

    /// An integer written as a plain YAML number (`5000`, `50_000_000`, `-1`).
    /// - Throws: ``ConfigurationError`` for anything else, including quoted numbers.
    func int() throws -> Int {
        guard let scalar, scalar.isPlain, !isNull else { throw typeError("an integer") }
        let digits = scalar.text.replacingOccurrences(of: "_", with: "")
        let body = digits.hasPrefix("-") || digits.hasPrefix("+") ? digits.dropFirst() : Substring(digits)
        // `_` only between digits (`1_000`, not `1__0` or `10_`).
        let separated = !scalar.text.hasPrefix("_") && !scalar.text.hasSuffix("_") && !scalar.text.contains("__")
        guard !body.isEmpty, body.allSatisfy({ $0.isASCII && $0.isNumber }), separated else {
            throw typeError("an integer")
        }
        // YAML 1.1 reads `0100` as octal 64: refused rather than guessed.
        if body.count > 1, body.hasPrefix("0") { throw error("\(valueDescription) has a leading zero, which some YAML readers take for octal; write it without") }
        guard let value = Int(digits) else { throw error("\(valueDescription) is too large") }
        return value
    }

    /// An integer within `range`.
    /// - Parameter range: Accepted values.
    /// - Throws: ``ConfigurationError`` when not an integer or out of range.
    func int(in range: ClosedRange<Int>) throws -> Int {
        let value = try int()
        guard range.contains(value) else { throw error(Self.rangeMessage(range, got: "\(value)")) }
        return value
    }

    /// A finite number written as a plain YAML int or float (`5000`, `2.5`).
    /// - Throws: ``ConfigurationError`` for anything else.
    func number() throws -> Double {
        guard let scalar, scalar.isPlain, !isNull,
            let value = Self.parseNumber(scalar.text)
        else { throw typeError("a number") }
        return value
    }

    /// `true` or `false` (also `True`/`TRUE`/`False`/`FALSE`).
    /// - Throws: ``ConfigurationError`` for anything else (`yes`/`no` are refused as ambiguous).
    func bool() throws -> Bool {
        guard let scalar, scalar.isPlain else { throw typeError("true or false") }
        switch scalar.text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: throw typeError("true or false")
        }
    }

    /// A duration in seconds: a plain number (`3600`, `2.5`) or a number with a unit
    /// (`500ms`, `3600s`, `90m`, `1h`, `7d`).
    /// - Throws: ``ConfigurationError`` for anything else.
    func durationSeconds() throws -> Double {
        let expected = "a duration (seconds, or a number with ms, s, m, h or d such as 3600s, 90m, 1h, 7d)"
        guard let scalar, !isNull else { throw typeError(expected) }
        if scalar.isPlain, let seconds = Self.parseNumber(scalar.text) {
            return seconds
        }
        let units: [(suffix: String, seconds: Double)] = [
            ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400),
        ]
        for unit in units where scalar.text.hasSuffix(unit.suffix) {
            let number = String(scalar.text.dropLast(unit.suffix.count))
            if let value = Self.parseNumber(number) {
                let seconds = value * unit.seconds
                guard seconds.isFinite, seconds < 1e12 else { throw error("\(valueDescription) is too large") }
                return seconds
            }
        }
        throw typeError(expected)
    }

    /// A whole number of seconds within `range` (see ``durationSeconds()`` for the accepted forms).
    /// - Parameter range: Accepted seconds.
    /// - Throws: ``ConfigurationError`` when not a duration, fractional, or out of range.
    func wholeSeconds(in range: ClosedRange<Int>) throws -> Int {
        let seconds = try durationSeconds()
        guard seconds.rounded() == seconds, let whole = Int(exactly: seconds) else {
            throw error("must be a whole number of seconds, got \(valueDescription)")
        }
        guard range.contains(whole) else {
            throw error(Self.rangeMessage(range, got: "\(whole) seconds", unit: " seconds"))
        }
        return whole
    }

    /// One of an enum's raw values, with a suggestion for near misses.
    /// - Parameter type: The enum whose raw values are accepted.
    /// - Throws: ``ConfigurationError`` listing the accepted values.
    func choice<Choice: RawRepresentable & CaseIterable>(_ type: Choice.Type) throws -> Choice
    where Choice.RawValue == String {
        let allowed = Choice.allCases.map(\.rawValue)
        let expected = "one of " + allowed.joined(separator: ", ")
        guard let scalar, !isNull else { throw typeError(expected) }
        if let value = Choice(rawValue: scalar.text) { return value }
        var message = "expected \(expected), got \(valueDescription)"
        if !origin.redactsValues, let suggestion = EditDistance.closest(to: scalar.text, among: allowed) {
            message += " (did you mean '\(suggestion)'?)"
        }
        throw error(message)
    }

    /// The entries of a mapping, in document order, with no restriction on keys.
    /// - Throws: ``ConfigurationError`` when this is not a mapping.
    func entries() throws -> [Entry] {
        guard case .mapping(let entries) = content else { throw typeError("a mapping") }
        return entries
    }

    /// `true` when this node is a list (a YAML sequence).
    var isList: Bool {
        if case .sequence = content { return true }
        return false
    }

    /// The items of a list, in document order.
    /// - Throws: ``ConfigurationError`` when this is not a list.
    func items() throws -> [ConfigurationNode] {
        guard case .sequence(let items) = content else { throw typeError("a list") }
        return items
    }

    /// The items of a list whose length is within `range`.
    /// - Parameters:
    ///   - range: Accepted numbers of items.
    ///   - noun: What the items are, in the plural, for the error (`copies`, `variants`).
    /// - Throws: ``ConfigurationError`` when this is not a list, or has too few or too many items.
    func items(count range: ClosedRange<Int>, of noun: String = "items") throws -> [ConfigurationNode] {
        let list = try items()
        guard range.contains(list.count) else {
            let expected =
                range.upperBound == Int.max
                ? "at least \(range.lowerBound) \(noun)" : "\(range.lowerBound) to \(range.upperBound) \(noun)"
            throw error("expected \(expected), got \(list.count)")
        }
        return list
    }

    /// This mapping, after checking that every key is one of `allowedKeys`.
    /// - Parameter allowedKeys: The keys this mapping may have, in documentation order.
    /// - Throws: ``ConfigurationError`` at the first unknown key, suggesting the closest allowed one.
    func mapping(allowedKeys: [String]) throws -> ConfigurationMapping {
        let entries = try entries()
        for entry in entries where !allowedKeys.contains(entry.key) {
            var message = "unknown key '\(entry.key)'"
            if let suggestion = EditDistance.closest(to: entry.key, among: allowedKeys) {
                message += " (did you mean '\(suggestion)'?)"
            }
            message += "; allowed keys: " + allowedKeys.joined(separator: ", ")
            throw entry.value.keyError(message)
        }
        return ConfigurationMapping(node: self, entries: entries)
    }

    /// A file path as written (not yet resolved): one line, and not file contents pasted inline.
    /// - Throws: ``ConfigurationError`` for empty or multi-line values and inline PEM or JSON keys.
    func filePath() throws -> String {
        let value = try string()
        switch PastedSecret.judge(value) {
        case .fileContents?:
            throw error("expected a file path, not the file's contents (keep secrets in files)")
        case .encodedKey?:
            // A key's base64 body pasted without its BEGIN/END lines (as secret stores hand them out): it would be
            // printed whole as a path that cannot be read.
            throw error("expected a file path, not a key's base64 contents (keep secrets in files)")
        case .token?:
            throw error("expected a file path, not a token (keep secrets in files)")
        case nil:
            break
        }
        if value.trimmingCharacters(in: .whitespaces).isEmpty { throw error("must not be empty") }
        if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw error("expected a file path on one line")
        }
        return value
    }

    // MARK: Helpers

    static func parseNumber(_ text: String) -> Double? {
        let cleaned = text.replacingOccurrences(of: "_", with: "")
        guard !cleaned.isEmpty, !text.hasPrefix("_"),
            cleaned.allSatisfy({ "0123456789+-.eE".contains($0) }),
            cleaned.contains(where: \.isNumber),
            let value = Double(cleaned), value.isFinite
        else { return nil }
        return value
    }

    static func rangeMessage(_ range: ClosedRange<Int>, got: String, unit: String = "") -> String {
        if range.upperBound == Int.max {
            return "must be at least \(range.lowerBound)\(unit), got \(got)"
        }
        return "must be between \(range.lowerBound) and \(range.upperBound)\(unit), got \(got)"
    }
}
