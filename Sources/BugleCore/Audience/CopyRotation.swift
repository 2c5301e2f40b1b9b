/// Which of a locale's copies a user gets next, so that nobody sees the same copy twice in a row for one
/// notification type: the copy after the one they got last time (the index is kept per user and notification
/// type in `bugle.copy_rotation`, written when a notification is sent).
public enum CopyRotation {
    /// The index to use.
    /// - Parameters:
    ///   - last: the index the user got last time, nil for a user who never got one.
    ///   - count: copies available for the user's locale (and variant).
    public static func next(after last: Int?, count: Int) -> Int {
        guard count > 1 else { return 0 }
        guard let last, last >= 0 else { return 0 }
        return (last + 1) % count
    }
}
