/// Copy too large for a platform's payload whatever the recipient: every configured locale, variant and rotated copy,
/// rendered with every template variable empty (a value only adds bytes), for each platform. Such a copy fails every
/// recipient it reaches with `payload_too_large`; the run used to find that one recipient at a time and complete.
public enum PayloadPrecheck {
    /// One copy over a platform's limit.
    public struct Oversize: Sendable, Equatable, CustomStringConvertible {
        /// The copy's key path (`message.locales.en`, `variants.B.locales.de`, `message.locales.en[1]` for a rotated copy).
        public var keyPath: String
        public var platform: Platform
        /// Its smallest payload, in bytes.
        public var size: Int
        /// The platform's limit, in bytes.
        public var limit: Int

        public var description: String {
            "\(keyPath): at least \(size) bytes for \(platform.rawValue) devices (with every template variable empty), over the "
                + "\(limit)-byte limit: every \(platform.rawValue) recipient given this copy would fail payload_too_large"
        }
    }

    /// The copies of `campaign` over a platform's limit, in key-path order. A variant's own locales are its copies; its
    /// other locales use the message's copy with the variant's `data` (a variant of `data` alone used to be checked
    /// nowhere, and its whole arm could fail `payload_too_large`).
    /// - Parameter legacyPayloadLimit: The legacy gateway's `payload_limit`, which iOS payloads meet under
    ///   `ios_transport: legacy`.
    public static func oversized(_ campaign: Campaign, legacyPayloadLimit: Int = LegacyAPNsSettings.defaultPayloadLimit) -> [Oversize] {
        let composer = NotificationComposer(campaign: campaign, runID: 0, apnsIDs: false)
        var found: [Oversize] = []
        var books: [(variant: String?, copies: [String: [LocalizedCopy]], own: Set<String>)] =
            [(nil, campaign.message.localeCopies, Set(campaign.message.localeCopies.keys))]
        for variant in campaign.variants {
            books.append((variant.name, campaign.message.localeCopies.merging(variant.localeCopies) { $1 }, Set(variant.localeCopies.keys)))
        }
        for (variant, copies, own) in books {
            for (locale, list) in copies.sorted(by: { $0.key < $1.key }) {
                for index in list.indices {
                    let selection = MessageSelection(locale: locale, variant: variant, copyIndex: index)
                    let rotated = list.count > 1 ? "[\(index)]" : ""
                    let keyPath: String
                    switch variant {
                    case nil: keyPath = "message.locales.\(locale)\(rotated)"
                    case let name? where own.contains(locale): keyPath = "variants.\(name).locales.\(locale)\(rotated)"
                    case let name?: keyPath = "variants.\(name).data (with message.locales.\(locale)\(rotated))"
                    }
                    for platform in Platform.allCases {
                        let composed = PayloadTooLarge.meetingLegacyLimit(
                            composer.compose(seq: 0, deviceID: 0, token: "", platform: platform, selection: selection, attempt: 1, now: 0).map(\.body.count),
                            platform: platform, transport: campaign.iosTransport, legacyLimit: legacyPayloadLimit)
                        // A limit of 0 is not a size (a copy a missing variable leaves out): only sizes are judged here.
                        guard case .failure(let tooLarge) = composed, tooLarge.limit > 0 else { continue }
                        // The message's own copy already said so: the variant adds nothing to it.
                        let base = "message.locales.\(locale)\(rotated)"
                        if variant != nil, !own.contains(locale), found.contains(where: { $0.keyPath == base && $0.platform == platform }) { continue }
                        found.append(Oversize(keyPath: keyPath, platform: platform, size: tooLarge.size, limit: tooLarge.limit))
                    }
                }
            }
        }
        return found
    }
}
