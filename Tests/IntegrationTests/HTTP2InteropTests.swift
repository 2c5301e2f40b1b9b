import BugleHTTP2
import BugleSimulator
import Foundation
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Testing

/// Bugle's HTTP/2 client (the pool both provider lanes send through) against nghttpd, an HTTP/2 server it was not
/// written against: nghttpd's HPACK encoder (dynamic table, Huffman strings, table size updates), its flow-control
/// windows, its stream limit, padded frames and trailers. The simulators run swift-nio-http2 and APNs and FCM run
/// neither, so each behaviour here is one Bugle's own frame code has to meet on its own.
///
/// `--echo-upload` makes nghttpd answer each POST with its body, so every answer proves its stream carried exactly
/// its own bytes, both ways.
@Suite("HTTP/2 client against nghttpd (an independent server)", .enabled(if: NGHTTPDServer.enabled, NGHTTPDServer.reason))
struct HTTP2InteropTests {
    static func pool(_ server: NGHTTPDServer, connections: Int) throws -> HTTP2ConnectionPool {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(server.material.caFile))
        let configuration = HTTP2ConnectionPool.Configuration(
            host: "127.0.0.1", port: server.port, connections: connections, tls: tls, serviceName: "nghttpd")
        return try HTTP2ConnectionPool(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: APNsTestEnvironment.logger)
    }

    /// `size` bytes naming request `index` throughout, so a body delivered to another stream, cut short or spliced
    /// from two requests does not compare equal.
    static func body(index: Int, size: Int) -> ByteBuffer {
        let unit = "{\"request\":\(index)}\n"
        return ByteBuffer(string: String(String(repeating: unit, count: size / unit.utf8.count + 1).utf8.prefix(size)) ?? "")
    }

    static func headers(port: Int, method: String, path: String) -> HPACKHeaders {
        [":method": method, ":scheme": "https", ":authority": "127.0.0.1:\(port)", ":path": path, "content-type": "application/json"]
    }

    /// Sends `count` POSTs (sizes taken in turn from `sizes`), at most `concurrency` at once, and returns what is wrong
    /// with any answer (empty when each is 200 with exactly its own body) and the answers' headers.
    static func echo(
        _ pool: HTTP2ConnectionPool, _ server: NGHTTPDServer, count: Int, sizes: [Int], concurrency: Int
    ) async throws -> (problems: [String], headers: [HPACKHeaders]) {
        let port = server.port
        return try await withThrowingTaskGroup(of: (String?, HPACKHeaders).self) { group in
            var next = 0
            func add() {
                let index = next
                next += 1
                group.addTask {
                    let size = sizes[index % sizes.count]
                    let sent = Self.body(index: index, size: size)
                    let response = try await pool.execute(
                        headers: Self.headers(port: port, method: "POST", path: "/3/device/\(index)"), body: sent, deadline: .now() + .seconds(120))
                    let received = response.body ?? ByteBuffer()
                    if response.status != 200 { return ("request \(index): status \(response.status)", response.headers) }
                    if received != sent { return ("request \(index): \(received.readableBytes) bytes back for \(size) sent, or other bytes", response.headers) }
                    return (nil, response.headers)
                }
            }
            for _ in 0..<min(concurrency, count) { add() }
            var problems: [String] = []
            var headers: [HPACKHeaders] = []
            while let (problem, answerHeaders) = try await group.next() {
                if let problem { problems.append(problem) }
                headers.append(answerHeaders)
                if next < count { add() }
            }
            return (problems, headers)
        }
    }

    @Test("2,000 POSTs over two connections, bodies of 1 byte to 70 KB: nghttpd's header blocks decoded, every body echoed to its own stream")
    func echoesOverTwoConnections() async throws {
        try await NGHTTPDServer.with(["--echo-upload"]) { server in
            let pool = try Self.pool(server, connections: 2)
            // 16,385 bytes take two DATA frames; 70,000 exceed nghttpd's 65,535-byte stream window, so the client must
            // wait for its WINDOW_UPDATE before the rest; the answers fill Bugle's connection window many times over.
            let sizes = [1, 57, 512, 2_000, 4_096, 5_120, 16_385, 70_000]
            let (problems, headers) = try await Self.echo(pool, server, count: 2_000, sizes: sizes, concurrency: 300)
            await pool.shutdown()
            #expect(problems.isEmpty, "\(problems.count) bad answers, first: \(problems.prefix(3))")
            #expect(headers.count == 2_000)
            // nghttpd indexes `server` and `date` in its dynamic table after the first answer: every later answer names
            // them by index, so each decoded value shows the table stayed in step.
            #expect(headers.allSatisfy { $0.first(name: "server")?.hasPrefix("nghttpd") == true })
            #expect(headers.allSatisfy { $0.first(name: "date")?.hasSuffix("GMT") == true })
        }
    }

    @Test("1,023-byte stream windows and four concurrent streams: bodies wait for WINDOW_UPDATE, the stream limit is honoured")
    func smallWindowsAndFourStreams() async throws {
        try await NGHTTPDServer.with(["--echo-upload", "--window-bits=10", "--max-concurrent-streams=4"]) { server in
            let pool = try Self.pool(server, connections: 1)
            // nghttp2 resets a stream opened beyond its limit, and answers a body sent beyond its window with a
            // FLOW_CONTROL_ERROR: either would show up as a failed request.
            let (problems, _) = try await Self.echo(pool, server, count: 300, sizes: [1, 1_022, 1_023, 1_024, 3_000, 5_120], concurrency: 100)
            #expect(pool.streamLimits() == [4])
            await pool.shutdown()
            #expect(problems.isEmpty, "\(problems.count) bad answers, first: \(problems.prefix(3))")
        }
    }

    @Test("padded HEADERS and DATA, trailers, and a 64-byte encoder table that evicts on every answer")
    func paddingTrailersAndEvictions() async throws {
        let options = ["--echo-upload", "--padding=37", "--trailer=x-bugle-trailer: end", "--encoder-header-table-size=64"]
        try await NGHTTPDServer.with(options) { server in
            let pool = try Self.pool(server, connections: 1)
            let (problems, headers) = try await Self.echo(pool, server, count: 500, sizes: [1, 300, 20_000], concurrency: 50)
            await pool.shutdown()
            #expect(problems.isEmpty, "\(problems.count) bad answers, first: \(problems.prefix(3))")
            #expect(headers.allSatisfy { $0.first(name: "x-bugle-trailer") == "end" }, "an answer lost its trailer")
            #expect(headers.allSatisfy { $0.first(name: "server")?.hasPrefix("nghttpd") == true })
        }
    }

    @Test(
        "fields indexed in Bugle's encoder table, against nghttpd's decoder with a table of 4,096, 100 or 0 bytes: each request's fields arrive with its own values",
        arguments: [4_096, 100, 0]
    )
    func indexedFieldsAgainstDecoderTables(tableSize: Int) async throws {
        try await NGHTTPDServer.with(["--verbose", "--echo-upload", "--header-table-size=\(tableSize)"]) { server in
            let pool = try Self.pool(server, connections: 1)
            let port = server.port
            // Values that repeat in a few variants, as a lane's topic and push type do: in a 100-byte table one entry
            // fits, so nearly every request inserts and evicts; at 0 nothing may be indexed at all.
            let topics = ["com.example.alpha", "com.example.beta", "com.example.gamma"]
            let kinds = ["alert", "background", "voip", "location", "complication"]
            let problems = try await withThrowingTaskGroup(of: String?.self) { group in
                for index in 0..<300 {
                    group.addTask {
                        var block = HTTP2HeaderBlock(Self.headers(port: port, method: "POST", path: "/3/device/\(index)"))
                        block.addIndexed(name: "x-bugle-topic", value: topics[index % topics.count])
                        block.addIndexed(name: "x-bugle-kind", value: kinds[index % kinds.count])
                        let sent = Self.body(index: index, size: 64)
                        let response = try await pool.execute(headers: block, body: sent, deadline: .now() + .seconds(60))
                        return response.status == 200 && response.body == sent ? nil : "request \(index): status \(response.status)"
                    }
                }
                var problems: [String] = []
                for try await problem in group { if let problem { problems.append(problem) } }
                return problems
            }
            await pool.shutdown()
            #expect(problems.isEmpty, "\(problems.count) bad answers, first: \(problems.prefix(3))")
            // What nghttpd decoded, stream by stream: the request's index from its literal `:path`, beside the two
            // indexed fields.
            var fields: [String: [String: String]] = [:]
            for line in server.output().split(separator: "\n") {
                guard let open = line.range(of: "recv (stream_id="), let close = line[open.upperBound...].firstIndex(of: ")") else { continue }
                let stream = String(line[open.upperBound..<close])
                let field = line[line.index(close, offsetBy: 2)...]
                guard let colon = field.dropFirst().firstIndex(of: ":") else { continue }
                fields[stream, default: [:]][String(field[..<colon])] = String(field[field.index(colon, offsetBy: 2)...])
            }
            var wrong: [String] = []
            var seen = Set<Int>()
            for (stream, request) in fields {
                guard let path = request[":path"], let index = Int(path.dropFirst("/3/device/".count)) else { continue }
                seen.insert(index)
                if request["x-bugle-topic"] != topics[index % topics.count] || request["x-bugle-kind"] != kinds[index % kinds.count] {
                    wrong.append("stream \(stream), request \(index): \(request)")
                }
            }
            #expect(seen == Set(0..<300), "nghttpd's log names \(seen.count) of 300 requests")
            #expect(wrong.isEmpty, "\(wrong.count) requests decoded with other values, first: \(wrong.prefix(2))")
        }
    }

    @Test("an error answer keeps its status and body; a served file arrives whole")
    func errorAnswerAndFile() async throws {
        try await NGHTTPDServer.with([]) { server in
            let reason = #"{"reason":"BadDeviceToken"}"#
            try reason.write(toFile: server.htdocs + "/reason.json", atomically: true, encoding: .utf8)
            let pool = try Self.pool(server, connections: 1)
            let missing = try await pool.execute(
                headers: Self.headers(port: server.port, method: "POST", path: "/3/device/missing"), body: Self.body(index: 1, size: 100), deadline: .now() + .seconds(30))
            let file = try await pool.execute(
                headers: Self.headers(port: server.port, method: "GET", path: "/reason.json"), body: ByteBuffer(), deadline: .now() + .seconds(30))
            await pool.shutdown()
            #expect(missing.status == 404)
            #expect(missing.body.map { String(buffer: $0).contains("404") } == true)
            #expect(file.status == 200)
            #expect(file.body.map { String(buffer: $0) } == reason)
            #expect(file.headers.first(name: "content-length") == String(reason.utf8.count))
        }
    }
}
