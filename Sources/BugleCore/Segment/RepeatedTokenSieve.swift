#if canImport(Glibc)
import Glibc
#endif

/// Finds the tokens a segment may list more than once, in fixed memory, as the rows stream past.
///
/// A blocked Bloom filter over the token's bytes: each token sets 6 bits inside one 512-bit block (one cache line,
/// so one memory miss per row). A token whose bits are all set already is a *candidate*. Every repeat of a token is a
/// candidate (its first sighting set the bits), so the exact count of repeats needs only the candidates' rows; a few
/// first sightings are candidates too (false positives), which the exact count ignores. With the default 2^27 bits
/// (16 MiB), about 0.01 false candidates are expected at 1,000,000 distinct tokens and about 100 at 5,000,000.
///
/// Only the token is hashed, not the platform: rows that compare equal as (platform, token) under any collation share
/// the token's bytes, so no repeat is missed however the database lowercases platforms.
///
/// Past `candidateLimit` candidates or `candidateBytes` bytes of them (a segment that repeats many tokens), it stops
/// collecting and reports ``overflowed``; the caller then counts without it.
public struct RepeatedTokenSieve: Sendable {
    /// The filter: 8 words (512 bits) per block; allocated by the first ``add(_:)``, so a sieve handed around
    /// before its scan starts is never copied.
    private var words: [UInt64] = []
    private let wordCount: Int
    private let blockMask: UInt64
    public private(set) var candidates: Set<String> = []
    /// More candidates than the limits allow: ``candidates`` is incomplete.
    public private(set) var overflowed = false
    private var candidateByteCount = 0
    private let candidateLimit: Int
    private let candidateBytes: Int

    /// - Parameters:
    ///   - log2Bits: filter size as a power of two, 9 (one block) to 40 (2^31 blocks, chosen by 32 hash bits).
    ///   - candidateLimit: most candidates kept.
    ///   - candidateBytes: most candidate bytes kept (tokens may be up to 4 KiB).
    public init(log2Bits: Int = 27, candidateLimit: Int = 50_000, candidateBytes: Int = 8 << 20) {
        let bits = min(max(log2Bits, 9), 40)
        self.wordCount = 1 << (bits - 6)
        self.blockMask = (UInt64(1) << UInt64(bits - 9)) - 1
        self.candidateLimit = candidateLimit
        self.candidateBytes = candidateBytes
    }

    /// Records a token; keeps it as a candidate when it may have been seen before.
    public mutating func add(_ token: String) { add([token]) }

    /// Records tokens in order (a token repeated within them is a candidate too).
    ///
    /// Hashes first, then sets bits: the second loop is short and its memory reads do not depend on one another, so
    /// the processor waits for many blocks at once (one token at a time, a read missing the cache was 90% of the
    /// sieve's time: about 250 ns a row).
    public mutating func add(_ tokens: [String]) {
        guard !tokens.isEmpty else { return }
        if words.isEmpty { words = Self.filter(words: wordCount) }
        let hashes = tokens.map { token in
            var token = token
            return token.withUTF8 { Self.hash($0) }
        }
        var seen: [Int] = []
        words.withUnsafeMutableBufferPointer { words in
            guard let words = words.baseAddress else { return }
            for (position, hash) in hashes.enumerated() {
                // The high half picks the block; six 9-bit fields of a second mix pick a bit each inside it.
                let base = Int((hash >> 32) & blockMask) << 3
                var fields = Self.finalize(hash ^ 0x5851_F42D_4C95_7F2D)
                var missing: UInt64 = 0
                for _ in 0..<6 {
                    let bit = Int(fields & 511)
                    fields >>= 9
                    let word = words + base + (bit >> 6)
                    let mask = UInt64(1) << UInt64(bit & 63)
                    missing |= ~word.pointee & mask
                    word.pointee |= mask
                }
                if missing == 0 { seen.append(position) }
            }
        }
        for position in seen where !overflowed {
            let token = tokens[position]
            candidateByteCount += token.utf8.count
            if candidates.count >= candidateLimit || candidateByteCount > candidateBytes {
                overflowed = true
                candidates = []
            } else {
                candidates.insert(token)
            }
        }
    }

    /// A zeroed filter. On Linux its memory is first marked for huge pages (where the system allows them on request):
    /// with 4 KiB pages nearly every row's block also missed the TLB.
    private static func filter(words count: Int) -> [UInt64] {
        [UInt64](unsafeUninitializedCapacity: count) { buffer, initialized in
            guard let base = buffer.baseAddress else { return }
            #if canImport(Glibc)
            let huge = 2 << 20
            let start = (Int(bitPattern: base) + huge - 1) & ~(huge - 1)
            let end = (Int(bitPattern: base) + count * 8) & ~(huge - 1)
            if end > start, let aligned = UnsafeMutableRawPointer(bitPattern: start) {
                _ = madvise(aligned, end - start, MADV_HUGEPAGE)
            }
            #endif
            base.initialize(repeating: 0, count: count)
            initialized = count
        }
    }

    /// A 64-bit hash of the bytes, eight at a time (not cryptographic: a crafted segment only makes more candidates).
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        let k1: UInt64 = 0x9E37_79B9_7F4A_7C15
        let k2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
        var h = UInt64(bytes.count) &* k1
        guard let start = bytes.baseAddress else { return finalize(h) }
        let raw = UnsafeRawPointer(start)
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            h = (h ^ (word &* k2)).rotated(27) &* k1
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            tail |= UInt64(start[offset]) << shift
            shift += 8
            offset += 1
        }
        h = (h ^ (tail &* k2)).rotated(31) &* k1
        return finalize(h)
    }

    /// MurmurHash3's 64-bit finaliser: every input bit moves every output bit.
    private static func finalize(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 33
        h &*= 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h &*= 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }
}

extension UInt64 {
    fileprivate func rotated(_ count: UInt64) -> UInt64 { self << count | self >> (64 - count) }
}
