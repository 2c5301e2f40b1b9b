import Mustache

/// One segment value as a template sees it: inserted as its text, and false to a section when it is empty or
/// `false` (PostgreSQL's text of a false boolean), so `{{#vip}}…{{/vip}}` renders for `true` only and `{{^vip}}`
/// for `false` too. Values arrive as text, so without this every non-NULL value — `false` included — opened a section.
struct TemplateValue: MustacheCustomRenderable, MustacheTransformable {
    let text: String

    var renderText: String { text }

    /// What a section tests: true (the section is skipped, an inverted one rendered) for `""` and `false`.
    var isNull: Bool { text.isEmpty || text == "false" }

    /// `{{uppercased(name)}}` and the other transforms, as on the text.
    func transform(_ name: String) -> Any? { text.transform(name) }
}
