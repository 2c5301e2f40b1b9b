/// Decides, once per recipient when a run's audience is frozen (and in dry runs), what the recipient gets and
/// when: the locale tag, the A/B variant, the rotation index, and the earliest send time (`send_at`, local-time
/// delivery, quiet hours) — or that it is skipped (a NULL template variable under `on_null: skip`, quiet hours
/// under `quiet_hours_action: skip`).
public struct RecipientPlanner: Sendable {
    /// A recipient that will be sent.
    public struct Planned: Sendable, Equatable {
        /// The configured locale tag of its copy.
        public var locale: String
        public var variant: String?
        /// Rotation index (0 when the locale has one copy).
        public var copyIndex: Int
        /// Not before this instant (nil: as soon as the run sends).
        public var notBefore: Instant?

        public init(locale: String, variant: String?, copyIndex: Int, notBefore: Instant?) {
            self.locale = locale
            self.variant = variant
            self.copyIndex = copyIndex
            self.notBefore = notBefore
        }
    }

    /// The plan for one recipient.
    public enum Decision: Sendable, Equatable {
        case send(Planned)
        case skip(SkipReason)
    }

    private let book: CopyBook
    private let variants: VariantAssigner
    /// `on_null: skip` and some copy uses a variable: NULLs must be looked for.
    private let skipsNulls: Bool
    private let local: LocalDeliveryPlanner?
    private let start: Instant
    private let sendAt: Instant?
    /// True when some locale has several copies: the caller passes each user's last index.
    public let rotates: Bool

    /// - Parameters:
    ///   - now: when the run starts (injected in tests); `send_at`, when later, is the start instead.
    public init(campaign: Campaign, now: Instant) {
        self.book = CopyBook(campaign: campaign)
        self.variants = VariantAssigner(campaignName: campaign.name, variants: campaign.variants)
        self.skipsNulls = campaign.message.nullPolicy == .skip && !campaign.templateVariables.isEmpty
        let delivery = campaign.delivery
        self.local = delivery.localTime.isActive ? LocalDeliveryPlanner(rules: delivery.localTime) : nil
        self.sendAt = delivery.sendAt.flatMap { $0 > now ? $0 : nil }
        self.start = self.sendAt ?? now
        self.rotates = campaign.rotatesCopy
    }

    /// The locale tag and A/B variant `recipient` has whatever the plan: a skipped recipient keeps them in the ledger, the
    /// CSV and the per-variant summary (a variant whose copy has a NULL variable used to vanish from the A/B counts).
    public func placement(_ recipient: ValidRecipient) -> (locale: String, variant: String?) {
        (book.localeTag(for: recipient.locale), variants.variant(for: recipient.userID))
    }

    /// The plan for `recipient`.
    /// - Parameter lastCopyIndex: the rotation index the user got last time for this notification type.
    public func plan(_ recipient: ValidRecipient, lastCopyIndex: Int? = nil) -> Decision {
        let variant = variants.variant(for: recipient.userID)
        let tag = book.localeTag(for: recipient.locale)
        let index = CopyRotation.next(after: lastCopyIndex, count: book.copyCount(variant: variant, locale: tag))
        if skipsNulls,
            let chosen = book.entry(for: MessageSelection(locale: tag, variant: variant, copyIndex: index)),
            !book.nullVariables(of: chosen.entry, recipient.variables).isEmpty
        {
            return .skip(.nullVariable)
        }
        var notBefore = sendAt
        if let local {
            switch local.plan(timeZone: recipient.timezone, now: start) {
            // Local times are planned in 15-minute windows, the one holding `send_at` included: nothing goes out before
            // `send_at` for all that (with local-time delivery or quiet hours, sends went out up to 15 minutes early).
            case .at(let instant): notBefore = sendAt.map { max($0, instant) } ?? instant
            case .skipQuietHours: return .skip(.quietHours)
            }
        }
        return .send(Planned(locale: tag, variant: variant, copyIndex: index, notBefore: notBefore))
    }
}
