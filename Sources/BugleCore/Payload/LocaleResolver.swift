import Synchronization

/// Picks the copy for a device locale with a fallback chain: `pt-BR` → `pt` → the default locale.
///
/// Device locales repeat endlessly across a segment, so answers are memoised (up to ``cacheLimit`` distinct
/// locale strings) behind a `Mutex`; the resolver is shared by concurrent senders.
public struct LocaleResolver: Sendable {
    /// Distinct device locale strings remembered.
    public static let cacheLimit = 4096
    private let cache = Cache()
    private let available: Set<String>
    /// The configured tags, compared in order when there are few: a short string compare is cheaper than a hash, and
    /// every row resolves its locale.
    private let searched: [String]
    private let lowercased: [String: String]
    private let defaultLocale: String

    public init(locales: some Sequence<String>, defaultLocale: String) {
        var lowered: [String: String] = [:]
        for tag in locales { lowered[Self.normalize(tag)] = tag }
        self.available = Set(lowered.values)
        self.searched = available.count <= 16 ? available.sorted() : []
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
        guard let locale else { return defaultLocale }
        if searched.isEmpty {
            if available.contains(locale) { return locale }
        } else {
            for tag in searched where tag == locale { return tag }
        }
        if let known = cache.storage.withLock({ $0[locale] }) { return known }
        var resolved = defaultLocale
        for candidate in Self.chain(for: locale, defaultLocale: defaultLocale) {
            if let tag = lowercased[candidate] {
                resolved = tag
                break
            }
        }
        cache.storage.withLock { storage in
            if storage.count < Self.cacheLimit { storage[locale] = resolved }
        }
        return resolved
    }

    /// The memo table (a class so copies of the resolver share it).
    private final class Cache: Sendable {
        let storage = Mutex<[String: String]>([:])
    }

    /// `pt_BR`, `PT-br` → `pt-br` (comparison form).
    static func normalize(_ tag: String) -> String {
        String(tag.lowercased().map { $0 == "_" ? "-" : $0 })
    }
}
