import BugleCore
import Logging
import PostgresNIO

/// How this database's segments are read: through a login of the reader role itself when one is configured (the
/// session then has no other role a segment could take), else as `bugle_segment_reader` through `SET LOCAL ROLE` on
/// the main pool when the role exists (a segment can take the login's role back, see the README), else as the login.
public struct SegmentAccess: Sendable {
    /// The main pool (role checks, and the reads without a reader login).
    public let client: PostgresClient
    /// A login of `bugle_segment_reader`, or nil.
    public let readerLogin: DatabaseConfiguration?
    /// Server settings for segment SQL (libpq's `options` of the login the segments are read through).
    public let options: SessionOptions

    /// - Parameter options: The main login's `options`, used when there is no `readerLogin` (whose own are used).
    public init(client: PostgresClient, readerLogin: DatabaseConfiguration?, options: SessionOptions = SessionOptions()) {
        self.client = client
        self.readerLogin = readerLogin
        self.options = readerLogin?.segmentOptions ?? options
    }

    /// A reader for `segment`, keeping of its extra columns only `variables` (nil: every one; see ``SegmentReader``).
    public func reader(for segment: Segment, variables: Set<String>? = nil, logger: Logger) async throws -> SegmentReader {
        if let readerLogin {
            return SegmentReader(
                client: client, segment: segment, useReaderRole: false, readerLogin: readerLogin, options: options, variables: variables, logger: logger)
        }
        let useRole = try await Migrator(client: client, logger: logger).segmentReaderRoleAvailable()
        return SegmentReader(client: client, segment: segment, useReaderRole: useRole, options: options, variables: variables, logger: logger)
    }
}
