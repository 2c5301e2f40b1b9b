/// A mapping whose keys were checked against an allow-list, with lookups that report missing keys.
///
/// Obtained from ``ConfigurationNode/mapping(allowedKeys:)``. A key written with a null value (`sound: ~`)
/// counts as absent for optional lookups.
struct ConfigurationMapping: Sendable {
    /// The mapping node itself (for positions and the key path).
    let node: ConfigurationNode
    private let values: [String: ConfigurationNode]

    /// Wraps a mapping node's entries.
    /// - Parameters:
    ///   - node: The mapping node.
    ///   - entries: Its entries (keys are unique: the document reader rejects duplicates).
    init(node: ConfigurationNode, entries: [ConfigurationNode.Entry]) {
        self.node = node
        var values: [String: ConfigurationNode] = [:]
        for entry in entries where values[entry.key] == nil {
            values[entry.key] = entry.value
        }
        self.values = values
    }

    /// Whether `key` is written (even with a null value).
    func contains(_ key: String) -> Bool {
        values[key] != nil
    }

    /// The value of `key`, or `nil` when it is absent or null.
    subscript(_ key: String) -> ConfigurationNode? {
        guard let value = values[key], !value.isNull else { return nil }
        return value
    }

    /// The value of `key`.
    /// - Parameter key: A key that must be present.
    /// - Throws: ``ConfigurationError`` at the mapping's own key when `key` is absent, or at the value when
    ///   it is null.
    func required(_ key: String) throws -> ConfigurationNode {
        guard let value = values[key] else { throw missing(key) }
        if value.isNull { throw value.error("must not be empty") }
        return value
    }

    /// The error for a missing required key, located where the mapping is named.
    /// - Parameters:
    ///   - key: The missing key.
    ///   - hint: Optional extra guidance appended to the message.
    func missing(_ key: String, hint: String? = nil) -> ConfigurationError {
        var message = "missing required key '\(key)'"
        if let hint { message += " (\(hint))" }
        var error = ConfigurationError(
            file: node.origin.file, line: node.keyLine, column: node.keyColumn,
            keyPath: node.childPath(key), message: message)
        error.isMissingKey = true
        return error
    }

    /// An optional string value.
    func string(_ key: String) throws -> String? {
        try self[key]?.string()
    }

    /// An optional integer in `range`, or `defaultValue` when absent.
    func int(_ key: String, default defaultValue: Int, in range: ClosedRange<Int>) throws -> Int {
        try self[key]?.int(in: range) ?? defaultValue
    }

    /// An optional boolean, or `defaultValue` when absent.
    func bool(_ key: String, default defaultValue: Bool) throws -> Bool {
        try self[key]?.bool() ?? defaultValue
    }

    /// An optional enum value, or `defaultValue` when absent.
    func choice<Choice: RawRepresentable & CaseIterable>(_ key: String, default defaultValue: Choice) throws -> Choice
    where Choice.RawValue == String {
        try self[key]?.choice(Choice.self) ?? defaultValue
    }

    /// An optional sub-mapping restricted to `allowedKeys`.
    func mapping(_ key: String, allowedKeys: [String]) throws -> ConfigurationMapping? {
        try self[key]?.mapping(allowedKeys: allowedKeys)
    }
}
