/// Asks ``HTTP2ClientSession`` to send a PING carrying `data` (written by the keepalive of ``HTTP2ConnectionHandler``).
struct HTTP2PingRequest {
    var data: UInt64
}
