import BugleCore
import Foundation
import Testing

@Suite("Templates, copy rotation, A/B variants and recipient plans")
struct AudienceTests {
    static func campaign(
        locales: [String: [LocalizedCopy]] = ["en": [LocalizedCopy(title: "Hi {{first_name}}", body: "B")]],
        data: [String: String] = [:],
        defaults: [String: String] = [:],
        nullPolicy: NullVariablePolicy = .skip,
        variants: [CampaignVariant] = [],
        delivery: DeliveryOptions = DeliveryOptions()
    ) -> Campaign {
        Campaign(
            name: "spring", notificationType: "promo", segment: Segment(sql: "SELECT 1"),
            message: MessageTemplate(defaultLocale: "en", localeCopies: locales, variableDefaults: defaults, nullPolicy: nullPolicy, data: data),
            delivery: delivery, variants: variants)
    }

    static func recipient(user: String = "u1", locale: String? = "en", timezone: String? = nil, variables: [String: String?] = [:]) -> ValidRecipient {
        switch RecipientValidator.validate(
            SegmentRow(deviceID: 1, userID: user, token: "fcm-token", platform: "android", locale: locale, timezone: timezone, variables: variables))
        {
        case .success(let recipient): return recipient
        case .failure(let error): fatalError("fixture row invalid: \(error)")
        }
    }

    // MARK: Templates

    @Test("templates render segment values as plain text (no HTML escaping), with transforms and sections")
    func templateRendering() throws {
        let text = try TemplateText(parsing: "Hi {{first_name}} & {{uppercased(city)}}{{#code}}, use {{code}}{{/code}}{{^code}}!{{/code}}")
        #expect(text.variables == ["city", "code", "first_name"])
        #expect(text.render(["first_name": "Tom & <Jerry>", "city": "lisbon", "code": "X1"]) == "Hi Tom & <Jerry> & LISBON, use X1")
        #expect(text.render(["first_name": "Ana", "city": "porto"]) == "Hi Ana & PORTO!")
        #expect(try TemplateText(parsing: "no tags").isPlain)
    }

    @Test("a section tests truth: an empty or false value skips it (and opens the inverted one); other values, 0 included, open it and are inserted as written")
    func sectionTruth() throws {
        let text = try TemplateText(parsing: "{{#vip}}VIP {{vip}}{{/vip}}{{^vip}}regular{{/vip}}|{{uppercased(vip)}}")
        #expect(text.render(["vip": "true"]) == "VIP true|TRUE")
        #expect(text.render(["vip": "false"]) == "regular|FALSE")
        #expect(text.render(["vip": ""]) == "regular|")
        #expect(text.render([:]) == "regular|")
        #expect(text.render(["vip": "0"]) == "VIP 0|0")
        #expect(text.render(["vip": "False"]) == "VIP False|FALSE")
    }

    @Test("template syntax errors and unsupported tags are refused with a message")
    func templateErrors() {
        #expect(throws: TemplateSyntaxError.self) { try TemplateText(parsing: "Hi {{name") }
        #expect(throws: TemplateSyntaxError.self) { try TemplateText(parsing: "{{#a}}x{{/b}}") }
        #expect(throws: TemplateSyntaxError.self) { try TemplateText(parsing: "{{> partial}}") }
        #expect(throws: TemplateSyntaxError.self) { try TemplateText(parsing: "{{=<% %>=}}") }
        #expect(throws: TemplateSyntaxError.self) { try TemplateText(parsing: "{{user.name}}") }
        #expect(throws: TemplateSyntaxError.self) { try TemplateText(parsing: "{{reversed(name)}}") }
        do {
            _ = try TemplateText(parsing: "{{#a}}open")
            Issue.record("an unclosed section parsed")
        } catch let error as TemplateSyntaxError {
            #expect(error.message.contains("never closed"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test("NULL variables: default from message.variables, else empty; on_null skip skips only when the chosen copy uses it")
    func nullVariables() {
        let campaign = Self.campaign(
            locales: ["en": [LocalizedCopy(title: "Hi {{first_name}}", body: "B")], "pt": [LocalizedCopy(title: "Olá", body: "{{city}}")]],
            defaults: ["first_name": "there"])
        let book = CopyBook(campaign: campaign)
        #expect(book.render(MessageSelection(locale: "en", variables: ["first_name": nil])).title == "Hi there")
        #expect(book.render(MessageSelection(locale: "en", variables: ["first_name": "Ana"])).title == "Hi Ana")
        #expect(book.render(MessageSelection(locale: "pt-BR", variables: ["city": nil])).body == "")
        #expect(book.nullVariables(for: MessageSelection(locale: "pt", variables: ["city": nil])) == ["city"])
        #expect(book.nullVariables(for: MessageSelection(locale: "en", variables: ["first_name": nil, "city": nil])).isEmpty)

        let planner = RecipientPlanner(campaign: campaign, now: Instant(secondsSince1970: 0))
        #expect(planner.plan(Self.recipient(locale: "pt", variables: ["city": nil])) == .skip(.nullVariable))
        guard case .send(let plan) = planner.plan(Self.recipient(locale: "en", variables: ["city": nil])) else {
            Issue.record("an English recipient with a default for its only variable was skipped")
            return
        }
        #expect(plan.locale == "en")
        let empty = RecipientPlanner(campaign: Self.campaign(nullPolicy: .empty), now: Instant(secondsSince1970: 0))
        #expect(empty.plan(Self.recipient(variables: ["first_name": nil])) != .skip(.nullVariable))
    }

    @Test("data values are templates too, and reach both payload builders")
    func dataTemplates() throws {
        let campaign = Self.campaign(data: ["deeplink": "app://offer/{{code}}", "static": "1"])
        let composer = NotificationComposer(campaign: campaign, runID: 7)
        let selection = MessageSelection(locale: "en", variables: ["first_name": "Ana", "code": "X9"])
        guard case .success(let request) = composer.compose(seq: 1, deviceID: 1, token: "t", platform: .android, selection: selection, attempt: 1, now: 0) else {
            Issue.record("composition failed")
            return
        }
        let message = try #require((try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])?["message"] as? [String: Any])
        #expect((message["notification"] as? [String: Any])?["title"] as? String == "Hi Ana")
        #expect((message["data"] as? [String: String]) == ["deeplink": "app://offer/X9", "static": "1"])
        let hex = String(repeating: "ab", count: 32)
        guard case .success(let ios) = composer.compose(seq: 2, deviceID: 2, token: hex, platform: .ios, selection: selection, attempt: 1, now: 0) else {
            Issue.record("composition failed")
            return
        }
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(ios.body)) as? [String: Any])
        #expect(payload["deeplink"] as? String == "app://offer/X9")
        #expect(((payload["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String == "Hi Ana")
    }

    // MARK: Rotation

    @Test("copy rotation: the next index after the last, wrapping; a first-time user starts at 0")
    func rotationIndex() {
        #expect(CopyRotation.next(after: nil, count: 3) == 0)
        #expect(CopyRotation.next(after: 0, count: 3) == 1)
        #expect(CopyRotation.next(after: 2, count: 3) == 0)
        #expect(CopyRotation.next(after: 5, count: 1) == 0)
        #expect(CopyRotation.next(after: 4, count: 2) == 1)
    }

    @Test("rotation across three runs: a user gets copies A, B, C and never the same one twice in a row")
    func rotationAcrossRuns() {
        let copies = ["A", "B", "C"].map { LocalizedCopy(title: $0, body: "b") }
        let campaign = Self.campaign(locales: ["en": copies])
        let planner = RecipientPlanner(campaign: campaign, now: Instant(secondsSince1970: 0))
        let book = CopyBook(campaign: campaign)
        #expect(planner.rotates)
        var last: Int?
        var titles: [String] = []
        for _ in 0..<4 {
            guard case .send(let plan) = planner.plan(Self.recipient(), lastCopyIndex: last) else {
                Issue.record("skipped")
                return
            }
            titles.append(book.render(MessageSelection(locale: plan.locale, copyIndex: plan.copyIndex)).title)
            last = plan.copyIndex
        }
        #expect(titles == ["A", "B", "C", "A"])
        for (previous, next) in zip(titles, titles.dropFirst()) { #expect(previous != next) }
    }

    // MARK: Variants

    @Test("variant split is deterministic per user and within 2% of the weights over 100,000 users")
    func variantSplit() {
        let variants = [CampaignVariant(name: "a", weight: 70), CampaignVariant(name: "b", weight: 20), CampaignVariant(name: "c", weight: 10)]
        let assigner = VariantAssigner(campaignName: "spring", variants: variants)
        var counts: [String: Int] = [:]
        for index in 0..<100_000 {
            let variant = assigner.variant(for: "user-\(index)") ?? "none"
            counts[variant, default: 0] += 1
        }
        #expect(abs(Double(counts["a", default: 0]) / 100_000 - 0.7) < 0.02)
        #expect(abs(Double(counts["b", default: 0]) / 100_000 - 0.2) < 0.02)
        #expect(abs(Double(counts["c", default: 0]) / 100_000 - 0.1) < 0.02)
        let again = VariantAssigner(campaignName: "spring", variants: variants)
        for index in stride(from: 0, to: 100_000, by: 997) {
            #expect(again.variant(for: "user-\(index)") == assigner.variant(for: "user-\(index)"))
        }
        // Another campaign splits the same users independently.
        let other = VariantAssigner(campaignName: "autumn", variants: variants)
        let differing = (0..<1000).filter { other.variant(for: "user-\($0)") != assigner.variant(for: "user-\($0)") }.count
        #expect(differing > 200)
        #expect(VariantAssigner(campaignName: "x", variants: []).variant(for: "u") == nil)
    }

    @Test("a variant's copy and data replace the message's for its users; its locales fall back like the message's")
    func variantCopy() {
        let campaign = Self.campaign(
            locales: ["en": [LocalizedCopy(title: "Base", body: "b")], "pt": [LocalizedCopy(title: "Base PT", body: "b")]],
            data: ["k": "base", "keep": "1"],
            variants: [
                CampaignVariant(name: "control", weight: 1),
                CampaignVariant(name: "bold", weight: 1, localeCopies: ["en": [LocalizedCopy(title: "BOLD", body: "b")]], data: ["k": "bold"]),
            ])
        let book = CopyBook(campaign: campaign)
        let bold = book.render(MessageSelection(locale: "en-GB", variant: "bold"))
        #expect(bold.title == "BOLD")
        #expect(bold.data == ["k": "bold", "keep": "1"])
        #expect(book.render(MessageSelection(locale: "pt-BR", variant: "bold")).title == "Base PT")
        #expect(book.render(MessageSelection(locale: "en", variant: "control")).title == "Base")
        #expect(book.render(MessageSelection(locale: "en", variant: "control")).data == ["k": "base", "keep": "1"])
    }

    // MARK: Plans

    @Test("send_at in the future becomes every recipient's earliest send; in the past it is ignored")
    func sendAtPlan() {
        let now = Instant(secondsSince1970: 1_800_000_000)
        let later = Instant(secondsSince1970: 1_800_003_600)
        let future = RecipientPlanner(campaign: Self.campaign(locales: ["en": [LocalizedCopy(title: "t", body: "b")]], delivery: DeliveryOptions(sendAt: later)), now: now)
        #expect(future.plan(Self.recipient()) == .send(.init(locale: "en", variant: nil, copyIndex: 0, notBefore: later)))
        let past = RecipientPlanner(campaign: Self.campaign(locales: ["en": [LocalizedCopy(title: "t", body: "b")]], delivery: DeliveryOptions(sendAt: Instant(secondsSince1970: 1))), now: now)
        #expect(past.plan(Self.recipient()) == .send(.init(locale: "en", variant: nil, copyIndex: 0, notBefore: nil)))
    }

    @Test("send_at with quiet hours or a local time in the window that holds it: nobody is planned before send_at")
    func sendAtWithLocalTime() {
        // 2026-07-01T00:00:00Z; send_at 11 minutes later, inside the 00:00–00:15 window.
        let now = Instant(secondsSince1970: 1_782_864_000)
        let sendAt = Instant(secondsSince1970: 1_782_864_000 + 660)
        let quiet = LocalTimeDelivery(fallbackTimeZone: "UTC", quietHours: QuietHours(start: LocalTime(hour: 2, minute: 0), end: LocalTime(hour: 3, minute: 0)))
        let withQuietHours = RecipientPlanner(
            campaign: Self.campaign(locales: ["en": [LocalizedCopy(title: "t", body: "b")]], delivery: DeliveryOptions(sendAt: sendAt, localTime: quiet)), now: now)
        #expect(withQuietHours.plan(Self.recipient(timezone: "UTC")) == .send(.init(locale: "en", variant: nil, copyIndex: 0, notBefore: sendAt)))
        // 05:35 in Kolkata is 00:05Z: its window holds send_at, so it goes at send_at, not at 00:00Z.
        let local = LocalTimeDelivery(deliverAt: LocalTime(hour: 5, minute: 35), fallbackTimeZone: "UTC")
        let withLocalTime = RecipientPlanner(
            campaign: Self.campaign(locales: ["en": [LocalizedCopy(title: "t", body: "b")]], delivery: DeliveryOptions(sendAt: sendAt, localTime: local)), now: now)
        #expect(withLocalTime.plan(Self.recipient(timezone: "Asia/Kolkata")) == .send(.init(locale: "en", variant: nil, copyIndex: 0, notBefore: sendAt)))
        // A local time later than send_at keeps its own instant: 20:00 IST = 14:30Z.
        let evening = RecipientPlanner(
            campaign: Self.campaign(
                locales: ["en": [LocalizedCopy(title: "t", body: "b")]],
                delivery: DeliveryOptions(sendAt: sendAt, localTime: LocalTimeDelivery(deliverAt: LocalTime(hour: 20, minute: 0), fallbackTimeZone: "UTC"))),
            now: now)
        #expect(evening.plan(Self.recipient(timezone: "Asia/Kolkata")) == .send(.init(locale: "en", variant: nil, copyIndex: 0, notBefore: Instant(secondsSince1970: 1_782_864_000 + 14 * 3600 + 1800))))
    }

    @Test("local-time delivery in a recipient's plan: its own zone's 20:00, quiet hours skipping")
    func localTimePlan() {
        // 2026-07-01T00:00:00Z
        let now = Instant(secondsSince1970: 1_782_864_000)
        let rules = LocalTimeDelivery(deliverAt: LocalTime(hour: 20, minute: 0), fallbackTimeZone: "UTC")
        let planner = RecipientPlanner(campaign: Self.campaign(locales: ["en": [LocalizedCopy(title: "t", body: "b")]], delivery: DeliveryOptions(localTime: rules)), now: now)
        // Asia/Kolkata is UTC+5:30: 20:00 IST = 14:30Z.
        #expect(planner.plan(Self.recipient(timezone: "Asia/Kolkata")) == .send(.init(locale: "en", variant: nil, copyIndex: 0, notBefore: Instant(secondsSince1970: 1_782_864_000 + 14 * 3600 + 1800))))
        // Unknown zone → the fallback, UTC: 20:00Z.
        #expect(planner.plan(Self.recipient(timezone: "Mars/Olympus")) == .send(.init(locale: "en", variant: nil, copyIndex: 0, notBefore: Instant(secondsSince1970: 1_782_864_000 + 20 * 3600))))
        let quiet = LocalTimeDelivery(fallbackTimeZone: "UTC", quietHours: QuietHours(start: LocalTime(hour: 22, minute: 0), end: LocalTime(hour: 8, minute: 0)), quietHoursAction: .skip)
        let skipping = RecipientPlanner(campaign: Self.campaign(locales: ["en": [LocalizedCopy(title: "t", body: "b")]], delivery: DeliveryOptions(localTime: quiet)), now: now)
        #expect(skipping.plan(Self.recipient(timezone: "UTC")) == .skip(.quietHours))
        // At 00:00Z it is 05:30 in Kolkata (quiet) and 20:00 in New York (not quiet).
        #expect(skipping.plan(Self.recipient(timezone: "Asia/Kolkata")) == .skip(.quietHours))
        #expect(skipping.plan(Self.recipient(timezone: "America/New_York")) != .skip(.quietHours))
    }
}
