import Foundation

/// What the legacy binary APNs simulator serves and how it misbehaves. See ``LegacyAPNsSimulator`` and
/// the README's "Legacy binary APNs" section.
public struct LegacyAPNsSimulatorConfiguration: Sendable {
    /// Fault injection.
    public struct Faults: Sendable {
        /// Every Nth accepted notification (counted across all connections) is followed by an error response
        /// with status 10 (shutdown) naming it as the last one processed, and the connection closes.
        public var shutdownEvery: Int?
        /// Every Nth accepted notification (across all connections) is followed by a close without an error
        /// response (a silent close).
        public var silentCloseEvery: Int?
        /// How the feedback service ends its stream (nil: every tuple, then a close).
        public var feedbackCut: FeedbackCut?

        /// Creates faults.
        /// - Parameters:
        ///   - shutdownEvery: Status 10 after every Nth accepted notification.
        ///   - silentCloseEvery: Silent close after every Nth accepted notification.
        ///   - feedbackCut: A feedback stream cut short.
        public init(shutdownEvery: Int? = nil, silentCloseEvery: Int? = nil, feedbackCut: FeedbackCut? = nil) {
            self.shutdownEvery = shutdownEvery
            self.silentCloseEvery = silentCloseEvery
            self.feedbackCut = feedbackCut
        }
    }

    /// A feedback stream that ends badly after `after` complete tuples. The list is emptied all the same (the
    /// service's list is cleared once read), so the tuples not sent are lost, as they would be at Apple.
    public enum FeedbackCut: Sendable, Equatable {
        /// Half of the next tuple (or half a tuple header when there is none), then a close.
        case midTuple(after: Int)
        /// Nothing more, and the connection is left open.
        case stall(after: Int)
    }

    /// Server certificate (PEM, leaf).
    public var certificatePEM: String
    /// Server private key (PEM).
    public var privateKeyPEM: String
    /// The CA that client certificates must chain to (PEM).
    public var clientCAPEM: String
    /// Listen address.
    public var host = "127.0.0.1"
    /// Gateway port (0 = ephemeral).
    public var gatewayPort: Int
    /// Feedback port (0 = ephemeral).
    public var feedbackPort: Int
    /// Largest payload of a command-2 frame (and of commands 0/1 unless strict).
    public var payloadLimit = 2048
    /// Apply the archived 256-byte limit to commands 0 and 1.
    public var strictLegacyPayloadLimit = false
    /// Faults.
    public var faults = Faults()
    /// Append every accepted notification as a JSON line to this file.
    public var recordFile: String?
    /// Keep accepted records in memory for ``LegacyAPNsSimulator/accepted()``.
    public var keepRecordsInMemory = true
    /// Event-loop threads.
    public var threads = 1
    /// After an error response the simulator discards input and waits this long for the client to close
    /// before closing itself (a lingering close, so the response is not lost to a TCP reset).
    public var lingerAfterError: Duration = .seconds(1)
    /// Wall clock in UNIX seconds (record times and feedback times).
    public var wallClock: @Sendable () -> Double = { Date().timeIntervalSince1970 }

    /// Creates a configuration from simulator material (server identity and CA from `bugle-sim certs`).
    /// - Parameters:
    ///   - certificates: The simulator directory's material.
    ///   - gatewayPort: Gateway port (0 = ephemeral).
    ///   - feedbackPort: Feedback port (0 = ephemeral).
    public init(certificates: SimulatorCertificates, gatewayPort: Int = 0, feedbackPort: Int = 0) {
        self.certificatePEM = certificates.serverCertificatePEM
        self.privateKeyPEM = certificates.serverKeyPEM
        self.clientCAPEM = certificates.caPEM
        self.gatewayPort = gatewayPort
        self.feedbackPort = feedbackPort
    }
}
