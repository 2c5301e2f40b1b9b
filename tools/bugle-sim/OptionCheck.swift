import ArgumentParser

/// Range checks of `bugle-sim`'s numeric options for the commands' `validate()`: each failure is a `ValidationError`
/// that names the option, what it allows and the value given.
enum OptionCheck {
    /// TCP ports; 0 asks for an ephemeral one.
    static let ports = 0...65_535
    /// HTTP/2 stream limits: `SETTINGS_MAX_CONCURRENT_STREAMS` is a 32-bit value.
    static let streamLimits = 0...Int(UInt32.max)
    /// Event-loop threads (100,000 made NIO abort creating them).
    static let threads = 1...256
    /// Answer delays, in milliseconds: up to an hour (far beyond any client's deadline).
    static let latencies = 0...3_600_000

    /// Requires each given port (nil: option absent) to be within ``ports``.
    /// - Throws: `ValidationError` naming the first option out of range.
    static func ports(_ options: [(String, Int?)]) throws {
        for (option, value) in options {
            try within(ports, option, value, note: " (0 = ephemeral)")
        }
    }

    /// Requires each given value (nil: option absent) to be at least `minimum`.
    /// - Throws: `ValidationError` naming the first option below it.
    static func atLeast(_ minimum: Int, _ options: [(String, Int?)]) throws {
        for (option, value) in options {
            if let value, value < minimum {
                throw ValidationError("\(option) must be at least \(minimum), not \(value)")
            }
        }
    }

    /// Requires `value` (when given) to be within `range`.
    /// - Throws: `ValidationError` naming `option` and the range.
    static func within(_ range: ClosedRange<Int>, _ option: String, _ value: Int?, note: String = "") throws {
        if let value, !range.contains(value) {
            throw ValidationError("\(option) must be within \(range.lowerBound)...\(range.upperBound)\(note), not \(value)")
        }
    }
}
