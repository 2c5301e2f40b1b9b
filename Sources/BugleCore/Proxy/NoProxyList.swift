/// The hosts `no_proxy` / `NO_PROXY` sends directly: entries separated by commas or spaces, each a host name (which
/// also covers its subdomains; a leading `.` or `*.` is the same), an IP literal, or `*` for every host. A `:port`
/// on an entry is ignored. Matching ignores case.
struct NoProxyList {
    private let entries: [String]
    private let matchesAll: Bool

    init(_ text: String) {
        var entries: [String] = []
        var all = false
        for raw in text.split(whereSeparator: { $0 == "," || $0 == " " }) {
            var entry = raw.lowercased()
            if entry == "*" {
                all = true
                continue
            }
            if entry.hasPrefix("[") , let close = entry.firstIndex(of: "]") {
                entry = String(entry[entry.index(after: entry.startIndex)..<close])
            } else if entry.filter({ $0 == ":" }).count == 1, let colon = entry.lastIndex(of: ":") {
                entry = String(entry[..<colon])
            }
            while entry.hasPrefix("*") || entry.hasPrefix(".") { entry.removeFirst() }
            if !entry.isEmpty { entries.append(entry) }
        }
        self.entries = entries
        self.matchesAll = all
    }

    /// Whether `host` is reached directly.
    func matches(_ host: String) -> Bool {
        if matchesAll { return true }
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        return entries.contains { name == $0 || name.hasSuffix("." + $0) }
    }
}
