import BugleCore
import Testing

@Suite("Repeated-token sieve")
struct RepeatedTokenSieveTests {
    /// FCM-like tokens of varied lengths (every tail length of the 8-byte hash loop).
    static func token(_ n: Int) -> String { "fcm-\(n):" + String(repeating: "x", count: n % 23) + "\(n * 7919)" }

    @Test("every repeated token is a candidate, and few first sightings are")
    func repeatsAreCandidates() {
        var sieve = RepeatedTokenSieve()
        for n in 0..<200_000 { sieve.add(Self.token(n)) }
        let repeated = (0..<5_000).map { Self.token($0 * 37) }
        for token in repeated { sieve.add(token) }
        #expect(!sieve.overflowed)
        #expect(Set(repeated).isSubset(of: sieve.candidates))
        // 16 MiB for 200,000 tokens: a false candidate is about a one-in-a-million event per token.
        #expect(sieve.candidates.count - Set(repeated).count < 5)
    }

    @Test("a filter far too small still misses no repeat; it only names more candidates")
    func smallFilterMissesNothing() {
        var sieve = RepeatedTokenSieve(log2Bits: 12, candidateLimit: 1_000_000, candidateBytes: 1 << 30)
        for n in 0..<20_000 { sieve.add(Self.token(n)) }
        for n in stride(from: 0, to: 20_000, by: 3) { sieve.add(Self.token(n)) }
        let repeated = Set(stride(from: 0, to: 20_000, by: 3).map(Self.token))
        #expect(repeated.isSubset(of: sieve.candidates))
        #expect(sieve.candidates.count > repeated.count, "a 4,096-bit filter cannot tell 20,000 tokens apart")
    }

    @Test("past its limits the sieve gives up and says so", arguments: [(10, 1 << 20), (1_000, 100)])
    func overflowIsReported(limit: Int, bytes: Int) {
        var sieve = RepeatedTokenSieve(candidateLimit: limit, candidateBytes: bytes)
        for n in 0..<100 { sieve.add(Self.token(n)) }
        #expect(!sieve.overflowed && sieve.candidates.isEmpty)
        for n in 0..<100 { sieve.add(Self.token(n)) }
        #expect(sieve.overflowed)
        #expect(sieve.candidates.isEmpty)
    }

    @Test("tokens differing in one byte, at any position and length, are told apart")
    func oneByteApart() {
        var sieve = RepeatedTokenSieve()
        var tokens: [String] = [""]
        for length in 1...40 {
            let base = Array(repeating: UInt8(ascii: "a"), count: length)
            for position in 0..<length {
                var bytes = base
                bytes[position] = UInt8(ascii: "b")
                tokens.append(String(decoding: bytes, as: UTF8.self))
            }
            tokens.append(String(decoding: base, as: UTF8.self))
        }
        for token in tokens { sieve.add(token) }
        #expect(sieve.candidates.isEmpty, "\(sieve.candidates.sorted())")
    }
}
