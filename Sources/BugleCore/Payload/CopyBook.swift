/// A campaign's copy, parsed once: for every (variant, locale tag), the copies in rotation order, each with its
/// title, body and data as templates. Chooses and renders the copy of one recipient.
public struct CopyBook: Sendable {
    /// One copy as templates.
    struct Entry: Sendable {
        var title: TemplateText
        var body: TemplateText
        var data: [(key: String, value: TemplateText)]
        /// True when nothing in it depends on the recipient.
        var isPlain: Bool
        /// Segment columns it refers to.
        var variables: Set<String>
    }

    /// Copies per variant (nil key: no variant) and configured locale tag.
    private let entries: [String?: [String: [Entry]]]
    private let resolver: LocaleResolver
    private let defaults: [String: String]

    public init(campaign: Campaign) {
        let message = campaign.message
        self.resolver = LocaleResolver(locales: message.localeCopies.keys, defaultLocale: message.defaultLocale)
        self.defaults = message.variableDefaults
        var entries: [String?: [String: [Entry]]] = [nil: Self.entries(copies: message.localeCopies, data: message.data)]
        for variant in campaign.variants {
            let copies = message.localeCopies.merging(variant.localeCopies) { _, override in override }
            entries[variant.name] = Self.entries(copies: copies, data: message.data.merging(variant.data) { _, override in override })
        }
        self.entries = entries
    }

    private static func entries(copies: [String: [LocalizedCopy]], data: [String: String]) -> [String: [Entry]] {
        let dataTemplates = data.sorted { $0.key < $1.key }.map { (key: $0.key, value: Self.template($0.value)) }
        return copies.mapValues { list in
            list.map { copy in
                let title = Self.template(copy.title)
                let body = Self.template(copy.body)
                let all = [title, body] + dataTemplates.map(\.value)
                return Entry(
                    title: title, body: body, data: dataTemplates, isPlain: all.allSatisfy(\.isPlain),
                    variables: Set(all.flatMap(\.variables)))
            }
        }
    }

    /// A parsed text; text the loader would have refused renders as written.
    private static func template(_ text: String) -> TemplateText {
        (try? TemplateText(parsing: text)) ?? TemplateText(verbatim: text)
    }

    /// The configured locale tag a device locale gets.
    public func localeTag(for locale: String?) -> String { resolver.resolve(locale) }

    /// Number of copies for a variant and locale tag (≥ 1).
    public func copyCount(variant: String?, locale: String) -> Int {
        max(1, entries[variant]?[locale]?.count ?? entries[nil]?[locale]?.count ?? 1)
    }

    /// The entry a selection picks, with its locale tag and index.
    func entry(for selection: MessageSelection) -> (tag: String, index: Int, entry: Entry)? {
        let tag = resolver.resolve(selection.locale)
        guard let list = entries[selection.variant]?[tag] ?? entries[nil]?[tag], !list.isEmpty else { return nil }
        let index = ((selection.copyIndex % list.count) + list.count) % list.count
        return (tag, index, list[index])
    }

    /// Segment columns the selected copy refers to whose value is NULL (or missing) and that have no default.
    public func nullVariables(for selection: MessageSelection) -> [String] {
        guard let entry = entry(for: selection)?.entry else { return [] }
        return nullVariables(of: entry, selection.variables)
    }

    func nullVariables(of entry: Entry, _ variables: [String: String?]) -> [String] {
        guard !entry.isPlain else { return [] }
        return entry.variables.filter { name in defaults[name] == nil && (variables[name] ?? nil) == nil }.sorted()
    }

    /// The rendered copy: NULL values take their `message.variables` default, or render as empty text.
    public func render(_ selection: MessageSelection) -> RenderedCopy {
        guard let (tag, _, entry) = entry(for: selection) else { return RenderedCopy(locale: resolver.resolve(selection.locale), title: "", body: "") }
        return render(entry, tag: tag, variables: selection.variables)
    }

    /// An entry found by ``entry(for:)``, rendered with a recipient's variables.
    func render(_ entry: Entry, tag: String, variables: [String: String?]) -> RenderedCopy {
        let values = entry.isPlain ? [:] : values(for: entry, variables)
        var data: [String: String] = [:]
        for (key, value) in entry.data { data[key] = value.render(values) }
        return RenderedCopy(locale: tag, title: entry.title.render(values), body: entry.body.render(values), data: data)
    }

    private func values(for entry: Entry, _ variables: [String: String?]) -> [String: String] {
        var values: [String: String] = [:]
        for name in entry.variables {
            if let value = variables[name] ?? nil {
                values[name] = value
            } else if let fallback = defaults[name] {
                values[name] = fallback
            }
        }
        return values
    }

    /// Every (variant, tag, index) whose copy is the same for every recipient, rendered once.
    func plainCopies() -> [CopyKey: RenderedCopy] {
        var result: [CopyKey: RenderedCopy] = [:]
        for (variant, locales) in entries {
            for (tag, list) in locales {
                for (index, entry) in list.enumerated() where entry.isPlain {
                    result[CopyKey(variant: variant, locale: tag, index: index)] = render(MessageSelection(locale: tag, variant: variant, copyIndex: index))
                }
            }
        }
        return result
    }
}

/// Identifies one copy of a campaign.
struct CopyKey: Hashable, Sendable {
    var variant: String?
    var locale: String
    var index: Int
}
