import Foundation
import Mustache

/// One piece of campaign copy (a title, a body or a data value) that may use template variables from the
/// segment's columns: `Hi {{first_name}}`, `{{#city}}in {{city}}{{/city}}`, `{{uppercased(code)}}`.
///
/// Rendered with swift-mustache as plain text (nothing is HTML-escaped: the payload builders JSON-escape).
/// Partials, blocks, pragmas and delimiter changes are refused: push copy has no files to include, and a
/// changed delimiter would hide variables from validation.
public struct TemplateText: Sendable, Equatable {
    /// The text as written.
    public let source: String
    /// Names of the segment columns the text refers to, sorted.
    public let variables: [String]
    /// nil for text without tags (rendered as written).
    private let template: MustacheTemplate?

    /// Renders as plain text: no HTML escaping.
    private static let pragma = "{{% CONTENT_TYPE: TEXT}}"

    /// Transforms a variable may be wrapped in: `{{uppercased(name)}}`.
    public static let transforms: Set<String> = ["lowercased", "uppercased", "capitalized"]

    /// Parses `source`.
    /// - Throws: ``TemplateSyntaxError`` naming the problem.
    public init(parsing source: String) throws {
        self.source = source
        guard source.contains("{{") else {
            self.variables = []
            self.template = nil
            return
        }
        self.variables = try Self.scanVariables(source)
        do {
            self.template = try MustacheTemplate(string: Self.pragma + source)
        } catch let error as MustacheTemplate.ParserError {
            let column = error.context.columnNumber - (error.context.lineNumber == 1 ? Self.pragma.count : 0)
            throw TemplateSyntaxError("template syntax: \(Self.describe(error.error)) (line \(error.context.lineNumber), column \(max(1, column)))")
        }
    }

    /// Text used as written, never parsed (for text the loader already refused).
    public init(verbatim source: String) {
        self.source = source
        self.variables = []
        self.template = nil
    }

    /// True when the text has no template tags.
    public var isPlain: Bool { template == nil }

    /// The text with `values` filled in; a variable absent from `values` renders as empty text, and a section over
    /// an empty or `false` value is skipped (``TemplateValue``).
    public func render(_ values: [String: String]) -> String {
        guard let template else { return source }
        return template.render(values.mapValues(TemplateValue.init(text:)))
    }

    public static func == (lhs: TemplateText, rhs: TemplateText) -> Bool { lhs.source == rhs.source }

    private static func describe(_ error: any Error) -> String {
        guard let error = error as? MustacheTemplate.Error else { return "\(error)" }
        switch error {
        case .sectionCloseNameIncorrect: return "a section is closed with a different name than it was opened with"
        case .unfinishedName: return "a tag is not closed with }}"
        case .expectedSectionEnd: return "a section is opened but never closed"
        default: return "\(error)"
        }
    }

    /// The variable names in the tags of `source`.
    static func scanVariables(_ source: String) throws -> [String] {
        var names = Set<String>()
        var rest = Substring(source)
        while let open = rest.range(of: "{{") {
            let afterOpen = rest[open.upperBound...]
            let triple = afterOpen.hasPrefix("{")
            let closer = triple ? "}}}" : "}}"
            let contentStart = triple ? afterOpen.index(after: afterOpen.startIndex) : afterOpen.startIndex
            guard let close = afterOpen[contentStart...].range(of: closer) else {
                throw TemplateSyntaxError("template syntax: a tag is not closed with \(closer)")
            }
            var content = afterOpen[contentStart..<close.lowerBound].trimmingSpaces()
            rest = afterOpen[close.upperBound...]
            if let sigil = content.first {
                switch sigil {
                case "!":
                    continue
                case "#", "^", "/", "&":
                    content = content.dropFirst().trimmingSpaces()
                case ">", "<", "$", "=", "%":
                    throw TemplateSyntaxError(
                        "template tag '{{\(content)}}' is not supported in push copy (partials, blocks, pragmas and delimiter changes are refused)")
                default:
                    break
                }
            }
            names.insert(try variableName(in: content))
        }
        return names.sorted()
    }

    /// `name` or `transform(name)` → `name`.
    private static func variableName(in tag: Substring) throws -> String {
        var name = tag
        if let paren = tag.firstIndex(of: "("), tag.hasSuffix(")") {
            let transform = String(tag[..<paren])
            guard transforms.contains(transform) else {
                throw TemplateSyntaxError(
                    "unknown transform '\(transform)' in '{{\(tag)}}' (known: \(transforms.sorted().joined(separator: ", ")))")
            }
            name = tag[tag.index(after: paren)..<tag.index(before: tag.endIndex)].trimmingSpaces()
        }
        guard isVariableName(name) else {
            throw TemplateSyntaxError(
                "'{{\(tag)}}' does not name a segment column (names are letters, digits and _, starting with a letter or _)")
        }
        return String(name)
    }

    /// True for `[A-Za-z_][A-Za-z0-9_]*`.
    public static func isVariableName(_ text: some StringProtocol) -> Bool {
        guard let first = text.utf8.first, first == UInt8(ascii: "_") || (first | 0x20 >= 0x61 && first | 0x20 <= 0x7a) else { return false }
        return text.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7a)
        }
    }
}

/// A campaign text that is not a valid template.
public struct TemplateSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var text = self
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
