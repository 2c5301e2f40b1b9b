/// A conservative pre-scan that refuses mapping keys which are not plain or quoted scalars.
///
/// Why it exists: `Yams.compose` is cheap for aliases (an alias returns the anchored `Node`), but while
/// composing a mapping it hashes every key to detect duplicates, and hashing a `Node` walks it with
/// aliases expanded. A key such as `? *bomb` or `[*bomb, *bomb]: 1` therefore makes compose itself
/// exponential, before any node budget can act. Bugle's files never need such keys, so this scanner
/// rejects them on the raw text first: explicit keys (`? `), aliases used as keys (`*a: 1`) and flow
/// collections used as keys (`[a]: 1`, `{a: 1}: 2`).
///
/// It is a lexer, not a parser. It skips comments, quoted scalars, block scalars (`|`, `>`) and
/// continuation lines of multi-line plain scalars, so text such as `title: "[Sale]: 50% off"` or SQL
/// containing `*` is never mistaken for a key. In the unquoted text that remains, `: ` is always a
/// value indicator (a plain scalar cannot contain it), so whatever precedes it is a key.
enum YAMLKeyScanner {
    /// Where a forbidden key starts, 1-based, with a message for the user.
    struct Finding: Equatable, Sendable {
        var line: Int
        var column: Int
        var message: String
    }

    private enum Quote {
        case none, single, double
    }

    private struct BlockScalar {
        var ownerIndent: Int
        var contentIndent: Int?
    }

    /// Returns the first key that is not a scalar, or `nil` when every key is a plain or quoted scalar.
    /// - Parameter yaml: The document text.
    static func firstComplexKey(in yaml: String) -> Finding? {
        var quote = Quote.none
        var flowOpenings: [(line: Int, column: Int)] = []
        var block: BlockScalar?
        // Indentation of the node that owns an open multi-line plain scalar (block context only).
        var plainOwnerIndent: Int?
        var lineNumber = 0

        for rawLine in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            var s = Array(rawLine.unicodeScalars)
            if s.last == "\r" { s.removeLast() }
            let indent = s.prefix { $0 == " " }.count
            let isBlank = s.allSatisfy { $0 == " " || $0 == "\t" }

            if var current = block {
                if isBlank { continue }
                if let contentIndent = current.contentIndent {
                    if indent >= contentIndent { continue }
                    block = nil
                } else if indent > current.ownerIndent {
                    current.contentIndent = indent
                    block = current
                    continue
                } else {
                    block = nil
                }
            }

            var i = 0
            var atTokenStart = true
            var keyColumn = indent
            var lastDashColumn: Int?
            var afterValueIndicator = false
            var plainOpen = false

            if quote == .none {
                if isBlank { continue }
                if let owner = plainOwnerIndent, flowOpenings.isEmpty, indent > owner {
                    // Continuation line of a multi-line plain scalar: all of it is scalar text.
                    atTokenStart = false
                    plainOpen = true
                } else {
                    plainOwnerIndent = nil
                }
                i = indent
                if flowOpenings.isEmpty && indent == 0 {
                    if s.first == "%" { continue }
                    if startsWithDocumentMarker(s) {
                        i = 3
                        keyColumn = -1
                    }
                }
                if atTokenStart {
                    var j = i
                    while j < s.count, s[j] == "-", isBlankOrEnd(s, j + 1) {
                        lastDashColumn = j
                        j += 1
                        while j < s.count, s[j] == " " || s[j] == "\t" { j += 1 }
                    }
                    keyColumn = j
                }
            }

            scan: while i < s.count {
                let c = s[i]
                switch quote {
                case .double:
                    if c == "\\" {
                        i += 2
                    } else {
                        if c == "\"" { quote = .none }
                        i += 1
                    }
                    continue scan
                case .single:
                    if c == "'" {
                        if i + 1 < s.count, s[i + 1] == "'" {
                            i += 2
                            continue scan
                        }
                        quote = .none
                    }
                    i += 1
                    continue scan
                case .none:
                    break
                }

                let previousIsBlank = i == 0 || s[i - 1] == " " || s[i - 1] == "\t"
                if c == " " || c == "\t" {
                    i += 1
                    continue scan
                }
                if c == "#" && previousIsBlank {
                    break scan
                }
                let inFlow = !flowOpenings.isEmpty

                if atTokenStart {
                    switch c {
                    case "\"":
                        quote = .double
                        atTokenStart = false
                        plainOpen = false
                        i += 1
                        continue scan
                    case "'":
                        quote = .single
                        atTokenStart = false
                        plainOpen = false
                        i += 1
                        continue scan
                    case "?" where isBlankOrEnd(s, i + 1) || (inFlow && isFlowIndicator(s, i + 1)):
                        return Finding(
                            line: lineNumber, column: i + 1,
                            message: "explicit mapping keys ('? ') are not supported; keys must be plain strings")
                    case "-" where isBlankOrEnd(s, i + 1):
                        lastDashColumn = i
                        afterValueIndicator = false
                        i += 1
                        continue scan
                    case "*":
                        var j = i + 1
                        while j < s.count, isAnchorCharacter(s[j]) { j += 1 }
                        let name = String(String.UnicodeScalarView(s[(i + 1)..<j]))
                        var k = j
                        while k < s.count, s[k] == " " || s[k] == "\t" { k += 1 }
                        if k < s.count, s[k] == ":", isBlankOrEnd(s, k + 1) || isFlowIndicator(s, k + 1) {
                            return Finding(
                                line: lineNumber, column: i + 1,
                                message: "alias *\(name) is used as a mapping key; keys must be plain strings")
                        }
                        atTokenStart = false
                        plainOpen = false
                        i = j
                        continue scan
                    case "&", "!":
                        var j = i + 1
                        while j < s.count, s[j] != " ", s[j] != "\t", !(inFlow && isFlowIndicator(s, j)) { j += 1 }
                        i = j
                        continue scan
                    case "[", "{":
                        flowOpenings.append((lineNumber, i + 1))
                        plainOwnerIndent = nil
                        plainOpen = false
                        i += 1
                        continue scan
                    case "|" where !inFlow, ">" where !inFlow:
                        var j = i + 1
                        while j < s.count, s[j] == "+" || s[j] == "-" || ("0"..."9").contains(s[j]) { j += 1 }
                        let headerEnd = j
                        while j < s.count, s[j] == " " || s[j] == "\t" { j += 1 }
                        if j == s.count || (s[j] == "#" && j > headerEnd) {
                            let owner: Int
                            if afterValueIndicator {
                                owner = keyColumn
                            } else if let dash = lastDashColumn {
                                owner = dash
                            } else {
                                owner = -1
                            }
                            block = BlockScalar(ownerIndent: owner, contentIndent: nil)
                            plainOpen = false
                            break scan
                        }
                    default:
                        break
                    }
                }

                switch c {
                case ":" where isBlankOrEnd(s, i + 1) || (inFlow && isFlowIndicator(s, i + 1)):
                    atTokenStart = true
                    afterValueIndicator = true
                    plainOpen = false
                case "," where inFlow:
                    atTokenStart = true
                    plainOpen = false
                case "[" where inFlow, "{" where inFlow:
                    flowOpenings.append((lineNumber, i + 1))
                    atTokenStart = true
                    plainOpen = false
                case "]" where inFlow, "}" where inFlow:
                    let opening = flowOpenings.removeLast()
                    var k = i + 1
                    while k < s.count, s[k] == " " || s[k] == "\t" { k += 1 }
                    if k < s.count, s[k] == ":", isBlankOrEnd(s, k + 1) || isFlowIndicator(s, k + 1) {
                        return Finding(
                            line: opening.line, column: opening.column,
                            message: "a flow collection is used as a mapping key; keys must be plain strings")
                    }
                    atTokenStart = false
                    plainOpen = false
                default:
                    if atTokenStart && !inFlow {
                        // A plain scalar starts here; remember who owns it in case it continues on later lines.
                        if afterValueIndicator {
                            plainOwnerIndent = keyColumn
                        } else {
                            plainOwnerIndent = lastDashColumn ?? -1
                        }
                        plainOpen = true
                    }
                    atTokenStart = false
                }
                i += 1
            }
            if !plainOpen || quote != .none {
                plainOwnerIndent = nil
            }
        }
        return nil
    }

    private static func startsWithDocumentMarker(_ s: [Unicode.Scalar]) -> Bool {
        guard s.count >= 3 else { return false }
        let marker = String(String.UnicodeScalarView(s[0..<3]))
        return (marker == "---" || marker == "...") && isBlankOrEnd(s, 3)
    }

    private static func isBlankOrEnd(_ s: [Unicode.Scalar], _ index: Int) -> Bool {
        index >= s.count || s[index] == " " || s[index] == "\t"
    }

    private static func isFlowIndicator(_ s: [Unicode.Scalar], _ index: Int) -> Bool {
        guard index < s.count else { return false }
        return s[index] == "," || s[index] == "[" || s[index] == "]" || s[index] == "{" || s[index] == "}"
    }

    private static func isAnchorCharacter(_ c: Unicode.Scalar) -> Bool {
        c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "_" || c == "-"
    }
}
