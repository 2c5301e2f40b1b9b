import Foundation
import NIOSSL

/// Whether a TLS client certificate can be presented now. Apple refuses an expired or not-yet-valid client
/// certificate at the handshake, after a run has claimed its first recipients; a lane checks it at start-up
/// instead, so the run never starts, and warns when the certificate will expire within a month.
public enum ClientCertificateValidity: Equatable, Sendable {
    /// Usable now, until `expires`.
    case valid(expires: Date)
    /// Its `notAfter` has passed.
    case expired(on: Date)
    /// Its `notBefore` is still ahead.
    case notYetValid(until: Date)

    /// How long before expiry a lane warns.
    public static let warningPeriod: TimeInterval = 30 * 86_400

    /// The validity of `certificate` (the leaf) at `now`.
    /// - Parameters:
    ///   - certificate: The leaf certificate the lane presents.
    ///   - now: The time to judge at.
    public init(of certificate: NIOSSLCertificate, at now: Date = Date()) {
        let notBefore = Date(timeIntervalSince1970: TimeInterval(certificate.notValidBefore))
        let notAfter = Date(timeIntervalSince1970: TimeInterval(certificate.notValidAfter))
        if now > notAfter {
            self = .expired(on: notAfter)
        } else if now < notBefore {
            self = .notYetValid(until: notBefore)
        } else {
            self = .valid(expires: notAfter)
        }
    }

    /// Why the certificate cannot be used, or nil when it can.
    /// - Parameter path: The certificate file, named in the reason.
    public func refusal(path: String) -> String? {
        switch self {
        case .valid:
            return nil
        case .expired(let date):
            return "the client certificate in \(path) expired on \(Self.format(date)); the server will refuse it: renew it"
        case .notYetValid(let date):
            return "the client certificate in \(path) is not valid before \(Self.format(date)); the server will refuse it until then "
                + "(check the machine's clock)"
        }
    }

    /// A warning when the certificate expires within ``warningPeriod`` of `now`, else nil.
    /// - Parameters:
    ///   - path: The certificate file, named in the warning.
    ///   - now: The time to judge at.
    public func warning(path: String, at now: Date = Date()) -> String? {
        guard case .valid(let expires) = self, expires.timeIntervalSince(now) < Self.warningPeriod else { return nil }
        let days = Int(expires.timeIntervalSince(now) / 86_400)
        return "the client certificate in \(path) expires on \(Self.format(expires)) (in \(days) day\(days == 1 ? "" : "s")): renew it"
    }

    private static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date)
    }
}
