/// Picks the copy for a device locale with a fallback chain: `pt-BR` → `pt` → the default locale.
public struct LocaleResolver: Sendable {
    private let available: Set<String>
    private let lowercased: [String: String]
    private let defaultLocale: String

    public init(locales: some Sequence<String>, defaultLocale: String) {
        var lowered: [String: String] = [:]
        for tag in locales { lowered[Self.normalize(tag)] = tag }
        self.available = Set(lowered.values)
        self.lowercased = lowered
        self.defaultLocale = defaultLocale
    }

    /// The chain of tags tried for `locale`, most specific first, ending with the default locale.
    public static func chain(for locale: String?, defaultLocale: String) -> [String] {
        var chain: [String] = []
        if let locale, !locale.isEmpty {
            var parts = normalize(locale).split(separator: "-").map(String.init)
            while !parts.isEmpty {
                chain.append(parts.joined(separator: "-"))
                parts.removeLast()
            }
        }
        let fallback = normalize(defaultLocale)
        if !chain.contains(fallback) { chain.append(fallback) }
        return chain
    }

    /// The configured locale tag to use for a device locale (always one of the configured tags).
    public func resolve(_ locale: String?) -> String {
        if let locale, available.contains(locale) { return locale }
        for candidate in Self.chain(for: locale, defaultLocale: defaultLocale) {
            if let tag = lowercased[candidate] { return tag }
        }
        return defaultLocale
    }

    /// `pt_BR`, `PT-br` → `pt-br` (comparison form).
    static func normalize(_ tag: String) -> String {
        String(tag.lowercased().map { $0 == "_" ? "-" : $0 })
    }
}
