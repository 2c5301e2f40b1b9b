/// Which of a locale's copies a user gets next, so that nobody sees the same copy twice in a row for one
/// notification type: the copy after the one they got last time. `bugle.copy_rotation` keeps, per user and
/// notification type, a counter of the runs that notified the user (from 0); each of the user's devices takes the
/// counter's next value modulo the copies of its own locale, so devices in locales with different numbers of copies
/// each rotate through their own.
public enum CopyRotation {
    /// The index to use.
    /// - Parameters:
    ///   - last: the user's rotation counter (`copy_rotation.last_index`), nil for a user who never got one.
    ///   - count: copies available for the user's locale (and variant).
    public static func next(after last: Int?, count: Int) -> Int {
        guard count > 1 else { return 0 }
        guard let last, last >= 0 else { return 0 }
        return (last + 1) % count
    }
}
