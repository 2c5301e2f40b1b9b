/// Levenshtein distance, used to suggest the key or value a typo most likely meant.
enum EditDistance {
    /// The number of single-character insertions, deletions and substitutions turning `a` into `b`.
    /// - Parameters:
    ///   - a: First string.
    ///   - b: Second string.
    static func between(_ a: String, _ b: String) -> Int {
        let a = Array(a.lowercased())
        let b = Array(b.lowercased())
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = Array(repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }

    /// The candidate closest to `word`, if it is close enough to be a plausible typo
    /// (at most 2 edits, or a third of the word for long words; separators `_`/`-` are ignored).
    /// - Parameters:
    ///   - word: What the user wrote.
    ///   - candidates: The accepted spellings.
    static func closest(to word: String, among candidates: [String]) -> String? {
        guard word.count <= 100 else { return nil }
        let strip: (String) -> String = { $0.filter { $0 != "_" && $0 != "-" } }
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = min(between(word, candidate), between(strip(word), strip(candidate)))
            if distance < (best?.distance ?? Int.max) {
                best = (candidate, distance)
            }
        }
        guard let best, best.distance <= max(2, word.count / 3), best.distance < word.count else { return nil }
        return best.candidate
    }
}
