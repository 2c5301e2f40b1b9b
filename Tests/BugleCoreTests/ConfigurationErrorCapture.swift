import BugleCore
import Testing

/// Runs `body` and returns the ``ConfigurationError`` it throws, or records an issue.
func configurationError(_ body: () throws -> some Any) -> ConfigurationError? {
    do {
        _ = try body()
        Issue.record("expected a ConfigurationError, but loading succeeded")
    } catch let error as ConfigurationError {
        return error
    } catch {
        Issue.record("expected a ConfigurationError, got \(error)")
    }
    return nil
}
