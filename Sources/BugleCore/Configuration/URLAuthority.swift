/// The `host[:port]` part of a URL (IPv6 literals in brackets, `[::1]:8443`), as providers-file endpoints and proxy URLs
/// give it.
struct URLAuthority: Equatable {
    /// Why a text is not `host[:port]`. Never quotes the text.
    struct Malformed: Error, Equatable {
        var problem: String
    }

    var host: String
    var port: Int

    /// Parses `text`, which holds nothing but the authority.
    /// - Parameters:
    ///   - text: `host`, `host:port`, `[v6]` or `[v6]:port`.
    ///   - defaultPort: The port when none is given.
    /// - Throws: ``Malformed``.
    init(parsing text: Substring, defaultPort: Int) throws(Malformed) {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw Malformed(problem: "an IPv6 host needs its closing ]") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw Malformed(problem: "expected :port after the IPv6 host")
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            host = text
        }
        guard !host.isEmpty else { throw Malformed(problem: "the host is missing") }
        var port = defaultPort
        if let portText {
            guard let value = Int(portText), (1...65_535).contains(value) else {
                throw Malformed(problem: "the port must be between 1 and 65535")
            }
            port = value
        }
        self.host = String(host)
        self.port = port
    }
}
