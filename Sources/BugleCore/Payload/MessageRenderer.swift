/// The copy chosen for one recipient.
public struct RenderedCopy: Sendable, Equatable {
    /// The configured locale tag whose copy was used.
    public var locale: String
    public var title: String
    public var body: String

    public init(locale: String, title: String, body: String) {
        self.locale = locale
        self.title = title
        self.body = body
    }
}

/// Chooses a recipient's copy (locale fallback) from a campaign's message template.
public struct MessageRenderer: Sendable {
    private let template: MessageTemplate
    private let resolver: LocaleResolver

    public init(template: MessageTemplate) {
        self.template = template
        self.resolver = LocaleResolver(locales: template.locales.keys, defaultLocale: template.defaultLocale)
    }

    /// The copy for a device locale (nil or unknown → fallback chain → default locale).
    public func copy(for locale: String?) -> RenderedCopy {
        let tag = resolver.resolve(locale)
        let copy = template.locales[tag] ?? template.locales[template.defaultLocale] ?? LocalizedCopy(title: "", body: "")
        return RenderedCopy(locale: tag, title: copy.title, body: copy.body)
    }
}
