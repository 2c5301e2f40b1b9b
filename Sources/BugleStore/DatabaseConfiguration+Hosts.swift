extension DatabaseConfiguration {
    /// One configuration per server of the host list, in order: ``endpoint`` first, then ``alternateEndpoints``, each
    /// with the TLS mode it comes to there and no alternates of its own.
    public var candidates: [DatabaseConfiguration] {
        ([endpoint] + alternateEndpoints).map { endpoint in
            var candidate = self
            candidate.endpoint = endpoint
            candidate.alternateEndpoints = []
            candidate.sslMode = Self.sslMode(requestedSSLMode, on: endpoint)
            return candidate
        }
    }

    /// `host:port`, or the socket's path, for messages.
    public var endpointDescription: String {
        switch endpoint {
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unixSocket: return unixSocketPath ?? ""
        }
    }
}
