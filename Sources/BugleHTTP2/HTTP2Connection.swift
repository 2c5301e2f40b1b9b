import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One established HTTP/2 connection: the TCP channel and its stream multiplexer.
public final class HTTP2Connection: Sendable {
    /// Pool-wide connection id.
    let id: Int
    let channel: any Channel
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    private let goAwayLastStreamID = NIOLockedValueBox<Int?>(nil)

    init(id: Int, channel: any Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer) {
        self.id = id
        self.channel = channel
        self.multiplexer = multiplexer
    }

    /// Sends one request on a new stream.
    /// - Parameters:
    ///   - headers: Request headers.
    ///   - body: Request body.
    ///   - deadline: Per-request deadline.
    /// - Returns: The answer, or a failed future with an ``HTTP2TransportError``.
    public func execute(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline) -> EventLoopFuture<HTTP2Response> {
        let promise = channel.eventLoop.makePromise(of: HTTP2Response.self)
        let streamPromise = channel.eventLoop.makePromise(of: (any Channel).self)
        multiplexer.createStreamChannel(promise: streamPromise) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(
                    HTTP2StreamHandler(
                        headers: headers,
                        body: body,
                        deadline: deadline,
                        connection: self,
                        promise: promise
                    )
                )
            }
        }
        streamPromise.futureResult.whenFailure { error in
            promise.fail(HTTP2TransportError.notWritten("cannot open a stream: \(error)"))
        }
        return promise.futureResult
    }

    /// Records a received GOAWAY (the lowest last-stream-id wins).
    /// - Parameter lastStreamID: The GOAWAY's last-stream-id.
    func recordGoAway(lastStreamID: Int) {
        goAwayLastStreamID.withLockedValue { current in
            current = min(current ?? lastStreamID, lastStreamID)
        }
    }

    /// True when a GOAWAY said the server did not and will not process `streamID`.
    /// - Parameter streamID: A stream of this connection.
    func isAboveGoAway(streamID: Int) -> Bool {
        guard let last = goAwayLastStreamID.withLockedValue({ $0 }) else { return false }
        return streamID > last
    }

    /// Closes the connection.
    func close() {
        channel.close(promise: nil)
    }
}
