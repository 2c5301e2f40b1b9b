/// One error answer of the APNs simulator, kept (with the accepted records) when records are kept in memory, so a
/// test can see when each token was refused and how: retry gaps, attempts per token.
public struct APNsRejection: Sendable, Equatable {
    /// Simulator wall-clock time of the answer, seconds since 1970.
    public var time: Double
    /// The device token, when the request got far enough to name one.
    public var token: String?
    /// The HTTP status answered.
    public var status: Int
    /// The APNs reason answered.
    public var reason: String
}
