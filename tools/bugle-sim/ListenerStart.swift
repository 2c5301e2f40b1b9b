import Foundation
import NIOCore

/// Starts one of the simulators' listeners, turning a port that cannot be bound into an error that names the option
/// and the port (it was the networking library's `bind(descriptor:ptr:bytes:): Address already in use`).
enum ListenerStart {
    /// A listener whose port could not be bound.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `start`, which binds 127.0.0.1 on the ports `options` name.
    /// - Parameter options: The options (and their values) whose ports `start` binds.
    /// - Throws: ``Failure`` when a port is in use or needs privileges; anything else `start` throws.
    static func run<T>(_ options: [(String, Int)], _ start: () async throws -> T) async throws -> T {
        do {
            return try await start()
        } catch let error as IOError where error.errnoCode == EADDRINUSE || error.errnoCode == EACCES {
            let named = options.map { "\($0.0) \($0.1)" }.joined(separator: " or ")
            let which = options.count == 1 ? "127.0.0.1:\(options[0].1) is" : "one of these ports is"
            let why = error.errnoCode == EADDRINUSE
                ? "already in use" : "reserved for privileged users (ports below 1024)"
            throw Failure(description: "\(named): \(which) \(why); choose another port (0 picks a free one)")
        }
    }
}
