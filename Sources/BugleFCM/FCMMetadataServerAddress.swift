/// Where Google Cloud's metadata server is.
public struct FCMMetadataServerAddress: Sendable, Equatable, CustomStringConvertible {
    /// Its host.
    public var host: String
    /// Its port.
    public var port: Int

    /// Google's fixed link-local address (what its client libraries use when `GCE_METADATA_HOST` is unset).
    public static let standard = FCMMetadataServerAddress(host: "169.254.169.254", port: 80)

    /// `GCE_METADATA_HOST` (`host` or `host:port`, as Google's client libraries read it), else ``standard``.
    /// - Throws: ``FCMConfigurationError`` when the variable is not a host with an optional port.
    public static func from(environment: [String: String]) throws(FCMConfigurationError) -> FCMMetadataServerAddress {
        guard let value = environment["GCE_METADATA_HOST"], !value.isEmpty else { return .standard }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        let host = String(parts[0])
        let validHost = !host.isEmpty && host.allSatisfy { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }
        guard validHost, parts.count <= 2 else {
            throw .unsupported("GCE_METADATA_HOST must be host or host:port")
        }
        guard parts.count == 2 else { return FCMMetadataServerAddress(host: host, port: 80) }
        guard let port = Int(parts[1]), (1...65535).contains(port) else {
            throw .unsupported("GCE_METADATA_HOST must be host or host:port, with a port from 1 to 65535")
        }
        return FCMMetadataServerAddress(host: host, port: port)
    }

    public var description: String { "\(host):\(port)" }
}
