/// What decides a recipient's copy: the locale tag chosen at materialization (or the device's locale), the A/B
/// variant, the rotation index, and the segment's template variables.
public struct MessageSelection: Sendable, Equatable {
    /// A configured locale tag or a device locale (resolved through the fallback chain).
    public var locale: String?
    /// The A/B variant (nil: the message's own copy).
    public var variant: String?
    /// Index into the locale's copies (taken modulo their count).
    public var copyIndex: Int
    /// Segment columns by name; nil is SQL NULL.
    public var variables: [String: String?]

    public init(locale: String?, variant: String? = nil, copyIndex: Int = 0, variables: [String: String?] = [:]) {
        self.locale = locale
        self.variant = variant
        self.copyIndex = copyIndex
        self.variables = variables
    }
}
