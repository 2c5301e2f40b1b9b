import BugleSimulator
import Foundation
import Testing

/// A client may reset a stream at any time (RFC 9113 §5.1, §8.1): a request and its RST_STREAM(CANCEL) can reach a
/// server in one read — Bugle cancels a request whose deadline passes as it is written, and a busy server reads a
/// request and the cancel that followed it together. Real servers drop the cancelled request's answer and go on
/// serving the connection. The simulators flushed that answer onto the stream the reset had just closed; NIOHTTP2
/// refused it with `NoSuchStream` raised as a connection error, and the simulator closed the connection a second
/// later (no GOAWAY), every other request on it written and unanswered.
@Suite("Simulators: a request read together with its RST_STREAM", .serialized)
struct SimulatorStreamResetTests {
    /// Stream 1's request and its cancel in one write; then, past the second after which the simulator used to close
    /// the connection, stream 3's request, which must be answered on the same connection.
    static func cancelThenAsk(port: Int, caPEM: String, fields: [(String, String)], body: [UInt8]) async throws {
        let connection = try await RawHTTP2TestConnection(port: port, caPEM: caPEM)
        defer { Task { await connection.close() } }
        try await connection.write(
            RawHTTP2TestConnection.request(streamID: 1, fields: fields, body: body) + RawHTTP2TestConnection.cancel(streamID: 1)
        )
        try await Task.sleep(for: .milliseconds(1_500))
        do {
            try await connection.write(RawHTTP2TestConnection.request(streamID: 3, fields: fields, body: body))
        } catch {
            Issue.record("the simulator closed the connection after the cancelled request: \(error)")
            return
        }
        let (frames, closed) = try await connection.wait(upTo: .seconds(20)) { frames in
            frames.contains { $0.streamID == 3 && $0.type == RawHTTP2TestConnection.headers }
        }
        #expect(!closed, "the simulator closed the connection")
        #expect(!frames.contains { $0.type == RawHTTP2TestConnection.goAway }, "the simulator sent GOAWAY")
        #expect(frames.contains { $0.streamID == 3 && $0.type == RawHTTP2TestConnection.headers }, "stream 3 was not answered")
        #expect(!frames.contains { $0.streamID == 1 && $0.type != RawHTTP2TestConnection.rstStream }, "the reset stream was answered")
    }

    @Test("FCM: a request and its RST_STREAM(CANCEL) in one write; the connection stays open and answers the next request")
    func fcmRequestCancelledAsItArrives() async throws {
        let environment = try FCMTestEnvironment()
        defer { environment.remove() }
        let simulator = FCMSimulator(configuration: environment.configuration())
        let port = try await simulator.start()
        do {
            let fields = [
                (":method", "POST"), (":scheme", "https"), (":path", environment.sendPath), (":authority", "localhost"),
                ("content-type", "application/json"),
            ]
            try await Self.cancelThenAsk(port: port, caPEM: environment.material.caPEM, fields: fields, body: FCMTestEnvironment.message(token: "cancelled-token"))
            #expect(simulator.counters().http2Connections == 1)
        } catch {
            try await simulator.stop()
            throw error
        }
        try await simulator.stop()
    }

    @Test("APNs: a request and its RST_STREAM(CANCEL) in one write; the connection stays open and answers the next request")
    func apnsRequestCancelledAsItArrives() async throws {
        let environment = try APNsTestEnvironment()
        defer { environment.remove() }
        let simulator = APNsSimulator(configuration: environment.simulatorConfiguration())
        let port = try await simulator.start()
        do {
            let fields = [
                (":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + String(repeating: "ab", count: 32)),
                (":authority", "localhost"), ("apns-topic", environment.material.topic),
            ]
            try await Self.cancelThenAsk(port: port, caPEM: environment.material.caPEM, fields: fields, body: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        } catch {
            try await simulator.stop()
            throw error
        }
        try await simulator.stop()
    }
}
