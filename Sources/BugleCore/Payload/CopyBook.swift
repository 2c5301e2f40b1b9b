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
        /// Its position among all the book's entries (0..<``CopyBook/entryCount``), for per-entry tables.
        var id = 0
    }

    /// Copies per variant (nil key: no variant) and configured locale tag.
    private let entries: [String?: [String: [Entry]]]
    /// The copies without a variant, per tag, searched in order when there are few tags: comparing a short tag is
    /// cheaper than hashing it, and every row of a campaign without variants looks one up (twice).
    private let unvaried: [(tag: String, list: [Entry])]
    /// Number of entries (copies of every variant and tag).
    let entryCount: Int
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
        var count = 0
        entries = entries.mapValues { locales in
            locales.mapValues { list in
                list.map { entry in
                    var numbered = entry
                    numbered.id = count
                    count += 1
                    return numbered
                }
            }
        }
        self.entries = entries
        self.entryCount = count
        let plain = (entries[nil] ?? [:]).sorted { $0.key < $1.key }.map { (tag: $0.key, list: $0.value) }
        self.unvaried = plain.count <= Self.searchedTags ? plain : []
    }

    /// Most tags searched in order (more are hashed).
    private static let searchedTags = 16

    /// The copies of a variant (nil: none) and tag, falling back to the copies without a variant.
    private func list(variant: String?, tag: String) -> [Entry]? {
        if variant == nil, !unvaried.isEmpty {
            for candidate in unvaried where candidate.tag == tag { return candidate.list }
            return nil
        }
        return entries[variant]?[tag] ?? entries[nil]?[tag]
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
        max(1, list(variant: variant, tag: locale)?.count ?? 1)
    }

    /// The entry a selection picks, with its locale tag and index.
    func entry(for selection: MessageSelection) -> (tag: String, index: Int, entry: Entry)? {
        guard let (tag, list, index) = pick(selection) else { return nil }
        return (tag, index, list[index])
    }

    /// The ``Entry/id`` of the entry a selection picks when that copy is the same for every recipient; nil when it is
    /// templated or there is none. Reads two fields of the entry rather than copying it (its templates and data).
    func plainEntryID(for selection: MessageSelection) -> Int? {
        guard let (_, list, index) = pick(selection) else { return nil }
        return list[index].isPlain ? list[index].id : nil
    }

    /// A selection's locale tag, copies, and the index of its copy among them (rotation wraps).
    private func pick(_ selection: MessageSelection) -> (tag: String, list: [Entry], index: Int)? {
        let tag = resolver.resolve(selection.locale)
        guard let list = list(variant: selection.variant, tag: tag), !list.isEmpty else { return nil }
        return (tag, list, ((selection.copyIndex % list.count) + list.count) % list.count)
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

    /// Every entry whose copy is the same for every recipient, by ``Entry/id``, rendered once.
    func plainCopies() -> [(id: Int, copy: RenderedCopy)] {
        entries.values.flatMap { locales in
            locales.flatMap { tag, list in list.filter(\.isPlain).map { (id: $0.id, copy: render($0, tag: tag, variables: [:])) } }
        }
    }
}
