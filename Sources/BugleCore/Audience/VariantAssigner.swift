import Crypto

/// Splits users between a campaign's A/B variants by weight, deterministically: the same campaign and user
/// always get the same variant, on every run, worker and machine, and a dry run shows the real split.
///
/// The user's point in `[0, 1)` is the first 8 bytes of SHA-256(campaign name, NUL, user id) as a fraction;
/// variants own consecutive slices of that interval in file order, each as wide as its share of the weights.
public struct VariantAssigner: Sendable {
    private let campaignKey: [UInt8]
    private let names: [String]
    /// Upper edge of each variant's slice, in file order; the last is 1.
    private let edges: [Double]

    public init(campaignName: String, variants: [CampaignVariant]) {
        self.campaignKey = Array(campaignName.utf8) + [0]
        self.names = variants.map(\.name)
        let total = variants.reduce(0) { $0 + $1.weight }
        var running = 0.0
        var edges: [Double] = []
        for variant in variants {
            running += variant.weight
            edges.append(total > 0 ? running / total : 1)
        }
        if !edges.isEmpty { edges[edges.count - 1] = 1 }
        self.edges = edges
    }

    /// The variant of `userID`, or nil when the campaign has none.
    public func variant(for userID: String) -> String? {
        guard !names.isEmpty else { return nil }
        let point = Self.point(key: campaignKey, userID: userID)
        for (index, edge) in edges.enumerated() where point < edge { return names[index] }
        return names[names.count - 1]
    }

    /// The user's position in `[0, 1)`.
    static func point(key: [UInt8], userID: String) -> Double {
        var hasher = SHA256()
        hasher.update(data: key)
        hasher.update(data: Array(userID.utf8))
        var value: UInt64 = 0
        for byte in hasher.finalize().prefix(8) { value = value << 8 | UInt64(byte) }
        // 53 significant bits, as a Double holds them exactly.
        return Double(value >> 11) / Double(UInt64(1) << 53)
    }
}
