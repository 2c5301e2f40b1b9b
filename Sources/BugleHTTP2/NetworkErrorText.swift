import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// A connect or TLS error as a line for a person: the address and the system's reason for a failed connect
/// (`127.0.0.1:2195: Connection refused`), BoringSSL's reasons without the library's source paths, and anything else
/// as Swift prints it, source paths removed.
public enum NetworkErrorText {
    public static func describe(_ error: any Error) -> String {
        if let connection = error as? NIOConnectionError {
            let attempts = connection.connectionErrors.map { "\(address($0.target)): \(describe($0.error))" }
            if !attempts.isEmpty { return attempts.joined(separator: "; ") }
            if let dns = connection.dnsAError ?? connection.dnsAAAAError { return "cannot resolve \(connection.host): \(describe(dns))" }
            return "cannot connect to \(connection.host):\(connection.port)"
        }
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) + " (errno \(io.errnoCode))" }
        if case ChannelError.connectTimeout(let limit) = error { return "no TCP connection within \(limit.nanoseconds / 1_000_000) ms" }
        return withoutSourcePaths(String(describing: error))
    }

    /// `host:port` of a socket address (`[::1]:443` for IPv6).
    static func address(_ address: SocketAddress) -> String {
        let host = address.ipAddress ?? "?"
        let port = address.port.map(String.init) ?? "?"
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// `text` without the ` at /…/file.cc:123` BoringSSL appends to each of its errors.
    static func withoutSourcePaths(_ text: String) -> String {
        text.replacingOccurrences(of: #" at /[^\s\]\),]+"#, with: "", options: .regularExpression)
    }
}
