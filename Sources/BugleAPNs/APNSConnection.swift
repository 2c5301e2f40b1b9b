import NIOCore
import NIOHPACK
import NIOHTTP2

/// One established HTTP/2 connection to APNs: the TCP channel and its stream multiplexer.
final class APNSConnection: Sendable {
    /// Pool-wide connection id.
    let id: Int
    let channel: any Channel
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer

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
    /// - Returns: The answer, or a failed future with an ``APNSTransportError``.
    func execute(headers: HPACKHeaders, body: ByteBuffer, deadline: NIODeadline) -> EventLoopFuture<APNSRawResponse> {
        let promise = channel.eventLoop.makePromise(of: APNSRawResponse.self)
        let streamPromise = channel.eventLoop.makePromise(of: (any Channel).self)
        multiplexer.createStreamChannel(promise: streamPromise) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(
                    APNSStreamHandler(headers: headers, body: body, deadline: deadline, promise: promise)
                )
            }
        }
        streamPromise.futureResult.whenFailure { error in
            promise.fail(APNSTransportError.notWritten("cannot open a stream: \(error)"))
        }
        return promise.futureResult
    }

    /// Closes the connection.
    func close() {
        channel.close(promise: nil)
    }
}
