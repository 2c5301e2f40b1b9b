/// One node of a parsed configuration file, with its position and key path.
///
/// Built from a Yams `Node` by ``ConfigurationDocument`` with aliases already expanded (under a node
/// budget), duplicate keys rejected and every position kept, so each later check can point at the exact
/// line and column. Typed accessors live in `ConfigurationNode+Values.swift`.
struct ConfigurationNode: Sendable {
    /// Where a document came from and how its errors are worded.
    struct Origin: Sendable {
        /// The file name used in errors.
        var file: String
        /// When true, errors never quote scalar values (the providers file names credentials).
        var redactsValues: Bool
    }

    /// A scalar's text and whether YAML would resolve it by its content (plain, untagged).
    struct Scalar: Sendable {
        /// The scalar's text as composed by libyaml (escapes and folding applied).
        var text: String
        /// `true` for plain, untagged scalars (`10`, `true`, `null`); `false` for quoted, block or tagged ones.
        var isPlain: Bool
    }

    /// One `key: value` pair of a mapping.
    struct Entry: Sendable {
        /// The key's text.
        var key: String
        /// The value, whose `keyLine`/`keyColumn` point at this key.
        var value: ConfigurationNode
    }

    /// The three YAML node kinds.
    enum Content: Sendable {
        case scalar(Scalar)
        case mapping([Entry])
        case sequence([ConfigurationNode])
    }

    /// The node's content.
    var content: Content
    /// 1-based line where the value starts.
    var line: Int
    /// 1-based column where the value starts.
    var column: Int
    /// 1-based line of the key that names this node (the value's own line for the root and list items).
    var keyLine: Int
    /// 1-based column of the key that names this node.
    var keyColumn: Int
    /// Dotted key path from the root (`message.locales.en`); empty for the root.
    var keyPath: String
    /// The document this node belongs to.
    var origin: Origin

    /// The key path of a child called `key`.
    /// - Parameter key: The child's key.
    func childPath(_ key: String) -> String {
        keyPath.isEmpty ? key : "\(keyPath).\(key)"
    }

    /// An error located at this node's value.
    /// - Parameter message: What is wrong.
    func error(_ message: String) -> ConfigurationError {
        ConfigurationError(file: origin.file, line: line, column: column, keyPath: keyPath, message: message)
    }

    /// An error located at the key that names this node.
    /// - Parameter message: What is wrong.
    func keyError(_ message: String) -> ConfigurationError {
        ConfigurationError(file: origin.file, line: keyLine, column: keyColumn, keyPath: keyPath, message: message)
    }
}
