import Foundation

/// One answer to a plain HTTP/1.1 request on 127.0.0.1 (``loopbackHTTPExchange(_:port:path:)``), parsed.
struct LoopbackHTTPResponse: CustomStringConvertible {
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    var status: Int
    /// Header values by lowercased name.
    var headers: [String: String]
    var body: String

    var description: String { "\(status) \(headers) \(body)" }

    /// The body as a JSON object, or nil.
    var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
    }

    /// Sends `method path` to 127.0.0.1:`port` from a dispatch thread (never one of the cooperative pool's) and parses
    /// the answer.
    /// - Throws: `POSIXError` when nothing accepts there, ``Malformed`` when the answer is not HTTP.
    static func fetch(_ method: String = "GET", port: Int, path: String) async throws -> LoopbackHTTPResponse {
        let raw = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try loopbackHTTPExchange(method, port: port, path: path) })
            }
        }
        return try LoopbackHTTPResponse(parsing: raw)
    }

    /// Parses a whole HTTP/1.x answer (no chunked bodies: the servers under test send `Content-Length`).
    init(parsing raw: String) throws {
        guard let split = raw.range(of: "\r\n\r\n") else { throw Malformed(description: "no end of headers in \(raw.debugDescription)") }
        let lines = raw[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusLine = lines[0].split(separator: " ")
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw Malformed(description: "not a status line: \(lines[0].debugDescription)")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        self.status = status
        self.headers = headers
        self.body = String(raw[split.upperBound...])
    }
}
