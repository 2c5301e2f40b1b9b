import Foundation
import Logging
import NIOHTTP1

/// Live counters of running simulators over plain HTTP/1.1, bound to 127.0.0.1 only, so a test or a script in another
/// process counts deliveries exactly while the simulators serve (`bugle-sim serve --counters-port P`).
///
/// `GET /counters` answers 200 with a ``SimulatorCountersSnapshot`` as one JSON object (`application/json`, keys
/// sorted), read afresh for every request; another path is 404, another method on `/counters` 405 with `Allow: GET`.
public final class SimulatorCountersServer: Sendable {
    /// The one path it serves.
    public static let path = "/counters"
    /// The address it binds: loopback only, whatever the caller wants.
    public static let host = "127.0.0.1"

    /// Where a server on `port` answers: `http://127.0.0.1:<port>/counters`.
    public static func url(port: Int) -> String {
        "http://\(host):\(port)\(path)"
    }

    private let port: Int
    private let snapshot: @Sendable () -> SimulatorCountersSnapshot
    private let listener = SimulatorHTTP1Listener(name: "the counters server")
    private let logger: Logger

    /// A server, not yet listening.
    /// - Parameters:
    ///   - port: Port to bind on 127.0.0.1; 0 picks an ephemeral one.
    ///   - logger: Where it logs its start.
    ///   - snapshot: Reads the simulators' counters now; called once per `GET /counters`, on an event loop.
    public init(
        port: Int = 0,
        logger: Logger = Logger(label: "bugle.sim.counters"),
        snapshot: @escaping @Sendable () -> SimulatorCountersSnapshot
    ) {
        self.port = port
        self.logger = logger
        self.snapshot = snapshot
    }

    /// Starts listening.
    /// - Returns: The bound port.
    /// - Throws: The bind error, or ``APNsSimulator/LifecycleError`` when already started.
    @discardableResult
    public func start() async throws -> Int {
        let bound = try await listener.start(host: Self.host, port: port) { [self] head in
            self.answer(method: head.method, uri: head.uri)
        }
        logger.info("counters server listening", metadata: ["port": "\(bound)"])
        return bound
    }

    /// Stops listening, closes its connections and its event loop.
    public func stop() async throws {
        try await listener.stop()
    }

    /// The answer to one request.
    func answer(method: HTTPMethod, uri: String) -> SimulatorHTTP1Responder.Response {
        let path = URLComponents(string: uri)?.path ?? uri
        guard path == Self.path else { return Self.text(.notFound, "Not Found\n") }
        guard method == .GET else {
            var response = Self.text(.methodNotAllowed, "Method Not Allowed\n")
            response.headers.add(name: "Allow", value: "GET")
            return response
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(snapshot()) else {
            return Self.text(.internalServerError, "the counters could not be encoded\n")
        }
        return .init(
            status: .ok,
            headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
            body: String(decoding: data, as: UTF8.self) + "\n"
        )
    }

    private static func text(_ status: HTTPResponseStatus, _ body: String) -> SimulatorHTTP1Responder.Response {
        .init(status: status, headers: ["Content-Type": "text/plain"], body: body)
    }
}
