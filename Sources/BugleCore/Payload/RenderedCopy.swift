/// The copy chosen for one recipient.
public struct RenderedCopy: Sendable, Equatable {
    /// The configured locale tag whose copy was used.
    public var locale: String
    public var title: String
    public var body: String
    /// The data map sent with it (variant data merged, templates rendered); nil: the campaign's `message.data`.
    public var data: [String: String]?

    public init(locale: String, title: String, body: String, data: [String: String]? = nil) {
        self.locale = locale
        self.title = title
        self.body = body
        self.data = data
    }

    /// Data pairs in key order: this copy's, or `fallback` (the campaign's, pre-sorted).
    func sortedData(or fallback: [(String, String)]) -> [(String, String)] {
        guard let data else { return fallback }
        return data.sorted { $0.key < $1.key }
    }
}
