extension MessageTemplate {
    /// Every text that may hold template tags: titles and bodies of every copy, then the data values.
    public var templateSources: [String] {
        var texts: [String] = []
        for (_, copies) in localeCopies.sorted(by: { $0.key < $1.key }) {
            for copy in copies { texts += [copy.title, copy.body] }
        }
        texts += data.sorted { $0.key < $1.key }.map(\.value)
        return texts
    }
}

extension Campaign {
    /// Segment columns the campaign's texts refer to (message and variants), sorted. Texts that do not parse
    /// contribute nothing (the loader refuses them before a campaign exists).
    public var templateVariables: [String] {
        var texts = message.templateSources
        for variant in variants {
            for (_, copies) in variant.localeCopies {
                for copy in copies { texts += [copy.title, copy.body] }
            }
            texts += variant.data.values
        }
        var names = Set<String>()
        for text in texts where text.contains("{{") {
            if let parsed = try? TemplateText(parsing: text) { names.formUnion(parsed.variables) }
        }
        return names.sorted()
    }

    /// True when some locale (of the message or a variant) has more than one copy.
    public var rotatesCopy: Bool {
        message.localeCopies.values.contains { $0.count > 1 } || variants.contains { $0.localeCopies.values.contains { $0.count > 1 } }
    }
}

extension Campaign {
    /// Where each template variable is used first, as a key path (`message.locales.en.title`,
    /// `variants.b.data.code`), for messages.
    public var templateVariableUses: [String: String] {
        var uses: [String: String] = [:]
        func scan(_ text: String, _ path: String) {
            guard text.contains("{{"), let parsed = try? TemplateText(parsing: text) else { return }
            for name in parsed.variables where uses[name] == nil { uses[name] = path }
        }
        func scan(copies: [String: [LocalizedCopy]], data: [String: String], prefix: String) {
            for (tag, list) in copies.sorted(by: { $0.key < $1.key }) {
                for (index, copy) in list.enumerated() {
                    let base = list.count > 1 ? "\(prefix).locales.\(tag)[\(index)]" : "\(prefix).locales.\(tag)"
                    scan(copy.title, base + ".title")
                    scan(copy.body, base + ".body")
                }
            }
            for (key, value) in data.sorted(by: { $0.key < $1.key }) { scan(value, "\(prefix).data.\(key)") }
        }
        scan(copies: message.localeCopies, data: message.data, prefix: "message")
        for variant in variants { scan(copies: variant.localeCopies, data: variant.data, prefix: "variants.\(variant.name)") }
        return uses
    }

    /// Template variables that are not among `columns` (the segment's result columns), sorted.
    public func templateVariablesMissing(from columns: [String]) -> [String] {
        let available = Set(columns)
        return templateVariables.filter { !available.contains($0) }
    }
}
