import BugleCore
import Foundation
import Testing

@Suite("Copy too large for every payload, found before sending")
struct PayloadPrecheckTests {
    static func campaign(_ message: String, variants: String = "") throws -> Campaign {
        try CampaignLoader.load(
            yaml: "name: big\nnotification_type: promo\nsegment: { sql: \"SELECT 1\" }\nmessage:\n  default_locale: en\n" + message + variants,
            path: "big.yaml")
    }

    @Test("a 5,000-character title is over every platform's limit for its locale only; a variant's copy is named by its path; ordinary and templated copy pass")
    func oversizedCopy() throws {
        let long = String(repeating: "a", count: 5000)
        let big = try Self.campaign("  locales:\n    en: { title: \"\(long)\", body: b }\n    de: { title: kurz, body: b }\n")
        let found = PayloadPrecheck.oversized(big)
        #expect(Set(found.map(\.platform)) == Set(Platform.allCases), "\(found)")
        #expect(found.allSatisfy { $0.keyPath == "message.locales.en" && $0.size > $0.limit }, "\(found)")
        #expect(found.first?.description.contains("every ios recipient given this copy would fail payload_too_large") == true || found.contains {
            $0.description.hasPrefix("message.locales.en: at least ")
        })
        let variant = try Self.campaign(
            "  locales: { en: { title: t, body: b } }\n",
            variants: "variants:\n  - { name: A, weight: 1 }\n  - { name: B, weight: 1, locales: { en: { title: \"\(long)\", body: b } } }\n")
        #expect(Set(PayloadPrecheck.oversized(variant).map(\.keyPath)) == ["variants.B.locales.en"])
        #expect(PayloadPrecheck.oversized(try Self.campaign("  locales: { en: { title: \"Hi {{first_name}}\", body: b } }\n")).isEmpty)
        #expect(PayloadPrecheck.oversized(try Self.campaign("  locales: { en: { title: t, body: b } }\n")).isEmpty)
    }

    /// A variant that changes only `data` used to be checked nowhere: its whole arm failed `payload_too_large` while
    /// `validate` said ok and the run exited 0.
    @Test("a variant's own data is judged with the message's copy of each locale; a copy already over the limit is named once")
    func variantData() throws {
        let long = String(repeating: "x", count: 5000)
        let dataOnly = try Self.campaign(
            "  locales: { en: { title: t, body: b }, de: { title: t, body: b } }\n",
            variants: "variants:\n  - { name: a, weight: 50 }\n  - { name: b, weight: 50, data: { big: \"\(long)\" } }\n")
        let found = PayloadPrecheck.oversized(dataOnly)
        #expect(Set(found.map(\.keyPath)) == ["variants.b.data (with message.locales.de)", "variants.b.data (with message.locales.en)"], "\(found)")
        #expect(Set(found.map(\.platform)) == Set(Platform.allCases))
        let bigMessage = try Self.campaign(
            "  locales: { en: { title: \"\(long)\", body: b } }\n",
            variants: "variants:\n  - { name: a, weight: 50 }\n  - { name: b, weight: 50, data: { k: v } }\n")
        #expect(Set(PayloadPrecheck.oversized(bigMessage).map(\.keyPath)) == ["message.locales.en"])
    }

    @Test("under ios_transport: legacy, iOS copy over the gateway's payload_limit is named with that limit; a larger limit takes it")
    func legacyPayloadLimit() throws {
        let long = String(repeating: "x", count: 2500)
        let legacy = try CampaignLoader.load(
            yaml: "name: big\nnotification_type: promo\nios_transport: legacy\nsegment: { sql: \"SELECT 1\" }\nmessage:\n  default_locale: en\n"
                + "  locales: { en: { title: t, body: \"\(long)\" } }\n",
            path: "big.yaml")
        let found = PayloadPrecheck.oversized(legacy)
        #expect(found.map(\.platform) == [.ios] && found.first?.limit == LegacyAPNsSettings.defaultPayloadLimit, "\(found)")
        #expect(PayloadPrecheck.oversized(legacy, legacyPayloadLimit: 4096).isEmpty)
    }
}
