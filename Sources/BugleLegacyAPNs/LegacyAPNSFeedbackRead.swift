/// What one read of the feedback service got: the complete tuples received, and why the stream ended badly, if it
/// did. The service empties its list once read (PROTOCOLS.md §3.4), so complete tuples received before a cut or a
/// stall are kept: they cannot be read again.
public struct LegacyAPNSFeedbackRead: Sendable, Equatable {
    /// The complete tuples, in the order sent.
    public var tuples: [LegacyAPNSFeedbackTuple]
    /// Why the stream did not end with a close after a whole tuple (nil: it did).
    public var problem: LegacyAPNSFeedbackError?

    /// Creates a read.
    /// - Parameters:
    ///   - tuples: The complete tuples.
    ///   - problem: How the stream ended badly (nil: it ended cleanly).
    public init(tuples: [LegacyAPNSFeedbackTuple], problem: LegacyAPNSFeedbackError? = nil) {
        self.tuples = tuples
        self.problem = problem
    }
}
