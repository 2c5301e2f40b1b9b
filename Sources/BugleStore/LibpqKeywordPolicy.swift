/// What Bugle does with a libpq connection keyword it does not read itself, wherever it is given (the URL, a service
/// file, a `PG…` variable): a setting that only tunes the connection is ignored and named in a notice; one that asks
/// for a protection Bugle cannot give (certificate revocation lists, peer or authentication-method checks, GSS
/// encryption, TLS 1.3 only) is refused, so nothing a user relies on is silently dropped.
enum LibpqKeywordPolicy {
    /// The verdict on one keyword and value.
    enum Verdict: Equatable {
        /// Ignored: it only tunes the connection, or asks for what Bugle does anyway.
        case ignored
        /// Refused, with why and what to do.
        case refused(String)
        /// Not a libpq keyword Bugle knows of.
        case unknown
    }

    /// libpq's variables for these keywords.
    static let environmentVariables: [(variable: String, keyword: String)] = [
        ("PGHOSTADDR", "hostaddr"), ("PGCLIENTENCODING", "client_encoding"),
        ("PGGSSENCMODE", "gssencmode"), ("PGSSLCERTMODE", "sslcertmode"), ("PGSSLCRL", "sslcrl"), ("PGSSLCRLDIR", "sslcrldir"),
        ("PGSSLMINPROTOCOLVERSION", "ssl_min_protocol_version"), ("PGSSLMAXPROTOCOLVERSION", "ssl_max_protocol_version"),
        ("PGREQUIREPEER", "requirepeer"), ("PGREQUIREAUTH", "require_auth"), ("PGLOADBALANCEHOSTS", "load_balance_hosts"),
        ("PGSSLCOMPRESSION", "sslcompression"), ("PGSSLSNI", "sslsni"), ("PGKRBSRVNAME", "krbsrvname"), ("PGGSSLIB", "gsslib"),
        ("PGGSSDELEGATION", "gssdelegation"), ("PGSSLNEGOTIATION", "sslnegotiation"), ("PGREQUIRESSL", "requiressl"),
    ]

    /// Keywords that only tune the connection: ignored whatever their value.
    private static let tuning: Set<String> = [
        "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
        "fallback_application_name", "sslcompression", "sslsni", "krbsrvname", "gsslib", "gssdelegation",
        "ssl_max_protocol_version",
    ]

    /// The verdict on `keyword` = `value`.
    static func verdict(_ keyword: String, _ value: String) -> Verdict {
        if tuning.contains(keyword) { return .ignored }
        let lowered = value.lowercased()
        switch keyword {
        case "client_encoding":
            return ["utf8", "utf-8", "unicode", "auto"].contains(lowered) ? .ignored : .refused("Bugle speaks UTF8 to the server; remove it or set UTF8")
        case "gssencmode":
            return lowered == "require" ? .refused("GSS encryption is not supported; use sslmode=verify-full") : .ignored
        case "sslcertmode":
            return lowered == "require" ? .refused("give sslcert and sslkey instead: Bugle presents a certificate exactly when they are set") : .ignored
        case "ssl_min_protocol_version":
            return ["tlsv1", "tlsv1.1", "tlsv1.2", ""].contains(lowered) ? .ignored : .refused("Bugle's minimum is TLS 1.2 and it cannot be raised")
        case "load_balance_hosts":
            return lowered == "disable" ? .ignored : .refused("Bugle tries a host list in order; remove it or set disable")
        case "requiressl":
            return lowered == "0" ? .ignored : .refused("use sslmode=require (or verify-full) instead")
        case "sslcrl", "sslcrldir":
            return .refused("certificate revocation lists are not checked; remove it, or rely on sslmode=verify-full with a short-lived certificate")
        case "requirepeer":
            return .refused("the server process's user is not checked over a Unix socket")
        case "require_auth":
            return .refused("the server's authentication method is not restricted")
        case "hostaddr":
            return .refused("give the address as host instead")
        case "replication":
            return .refused("Bugle does not open replication connections")
        case "sslnegotiation":
            return lowered == "postgres" ? .ignored : .refused("direct TLS negotiation is not supported")
        default:
            return .unknown
        }
    }
}
