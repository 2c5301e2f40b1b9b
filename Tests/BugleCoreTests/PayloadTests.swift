import BugleCore
import BugleRunner
import Foundation
import Testing

@Suite("Payload rendering and size limits")
struct PayloadTests {
    static func template(title: String = "Hi", body: String = "There", pushType: APNsPushType = .alert, priority: Int = 10) -> MessageTemplate {
        MessageTemplate(
            defaultLocale: "en",
            locales: ["en": LocalizedCopy(title: title, body: body), "pt": LocalizedCopy(title: "Olá", body: "Tudo bem")],
            data: ["deeplink": "app://x", "n": "1"],
            badge: 3,
            sound: "default",
            apns: APNsOptions(pushType: pushType, priority: priority, collapseID: "c", expirationSeconds: 3600, threadID: "t"),
            android: AndroidOptions(channelID: "promos", priority: .high, ttlSeconds: 3600, collapseKey: "k")
        )
    }

    static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test("APNs alert payload: aps fields and custom data at top level")
    func apnsAlert() throws {
        let builder = APNsPayloadBuilder(template: Self.template())
        let json = try Self.object(try builder.payload(for: RenderedCopy(locale: "en", title: "Hi", body: "There")))
        let aps = try #require(json["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["title"] as? String == "Hi")
        #expect(alert["body"] as? String == "There")
        #expect(aps["badge"] as? Int == 3)
        #expect(aps["sound"] as? String == "default")
        #expect(aps["thread-id"] as? String == "t")
        #expect(json["deeplink"] as? String == "app://x")
        #expect(json["n"] as? String == "1")
    }

    @Test("APNs background payload has content-available and no alert")
    func apnsBackground() throws {
        let builder = APNsPayloadBuilder(template: Self.template(pushType: .background, priority: 5))
        let json = try Self.object(try builder.payload(for: RenderedCopy(locale: "en", title: "Hi", body: "There")))
        let aps = try #require(json["aps"] as? [String: Any])
        #expect(aps["alert"] == nil)
        #expect(aps["content-available"] as? Int == 1)
    }

    @Test("APNs headers: expiration relative to now, collapse id, deterministic apns-id")
    func apnsHeaders() {
        let builder = APNsPayloadBuilder(template: Self.template())
        let id = NotificationID.apnsID(runID: 7, seq: 42)
        let headers = builder.headers(apnsID: id, now: 1_000_000)
        #expect(headers.expiration == 1_003_600)
        #expect(headers.collapseID == "c")
        #expect(headers.priority == 10)
        #expect(id == NotificationID.apnsID(runID: 7, seq: 42))
        // Pinned: support tools derive the same id (SHA-1 of "bugle-apns-id" ‖ run ‖ seq, big-endian, v5 layout).
        #expect(id == "88a2027c-0792-5137-9781-63af0ca86aed")
        #expect(id != NotificationID.apnsID(runID: 7, seq: 43))
        #expect(id.range(of: "^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", options: .regularExpression) != nil)
    }

    @Test("sizes are UTF-8 bytes: exactly 4096 passes, 4097 is rejected")
    func apnsSizeBoundary() throws {
        let empty = try APNsPayloadBuilder(template: Self.template(body: "")).payload(for: RenderedCopy(locale: "en", title: "Hi", body: ""))
        let room = 4096 - empty.count
        // "é" is 2 bytes in UTF-8: fill with ASCII then check one more byte tips it over.
        let fits = String(repeating: "é", count: room / 2) + String(repeating: "a", count: room % 2)
        let fitting = try APNsPayloadBuilder(template: Self.template()).payload(for: RenderedCopy(locale: "en", title: "Hi", body: fits))
        #expect(fitting.count == 4096)
        #expect(throws: PayloadTooLarge.self) {
            try APNsPayloadBuilder(template: Self.template()).payload(for: RenderedCopy(locale: "en", title: "Hi", body: fits + "a"))
        }
    }

    @Test("VoIP allows 5120 bytes")
    func voipLimit() throws {
        let body = String(repeating: "v", count: 4500)
        let bytes = try APNsPayloadBuilder(template: Self.template(pushType: .voip)).payload(for: RenderedCopy(locale: "en", title: "", body: body))
        #expect(bytes.count > 4096)
    }

    @Test("escaping: quotes, backslashes, control characters, emoji and U+2028 survive a JSON round trip")
    func escaping() throws {
        let tricky = "\"q\" \\ \n\t\u{01} 👩‍👩‍👧 \u{2028} שלום"
        let bytes = try APNsPayloadBuilder(template: Self.template()).payload(for: RenderedCopy(locale: "en", title: tricky, body: tricky))
        let json = try Self.object(bytes)
        let alert = try #require((json["aps"] as? [String: Any])?["alert"] as? [String: Any])
        #expect(alert["title"] as? String == tricky)
    }

    @Test("FCM android message: token, notification, stringified data, android options, stable tag")
    func fcmAndroid() throws {
        let builder = FCMMessageBuilder(template: Self.template(), defaultTag: "bugle-x")
        let bytes = try builder.body(token: "tok-1", platform: .android, copy: RenderedCopy(locale: "en", title: "Hi", body: "There"))
        let message = try #require(try Self.object(bytes)["message"] as? [String: Any])
        #expect(message["token"] as? String == "tok-1")
        #expect((message["notification"] as? [String: Any])?["title"] as? String == "Hi")
        #expect((message["data"] as? [String: String])?["n"] == "1")
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["priority"] as? String == "high")
        #expect(android["ttl"] as? String == "3600s")
        #expect(android["collapse_key"] as? String == "k")
        let notification = try #require(android["notification"] as? [String: Any])
        #expect(notification["channel_id"] as? String == "promos")
        #expect(notification["tag"] as? String == "bugle-x")
        #expect(message["webpush"] == nil)
    }

    /// campaigns/README.md said an Android message has no tag by default; every message carried the campaign's.
    @Test("without android.tag an Android message carries bugle- and 10 hex digits of the campaign name's hash, the same in every run")
    func androidTagDefault() throws {
        func tag(name: String, runID: Int64, tag: String? = nil) throws -> String? {
            var message = Self.template()
            message.android.tag = tag
            let campaign = Campaign(name: name, notificationType: "t", segment: Segment(sql: "SELECT 1"), message: message, delivery: DeliveryOptions())
            let request = try NotificationComposer(campaign: campaign, runID: runID)
                .compose(seq: 1, deviceID: 1, token: "a:1", platform: .android, locale: "en", attempt: 1, now: 0).get()
            let android = (try Self.object(request.body)["message"] as? [String: Any])?["android"] as? [String: Any]
            return (android?["notification"] as? [String: Any])?["tag"] as? String
        }
        let weekly = try #require(try tag(name: "weekly-digest", runID: 1))
        #expect(weekly.range(of: "^bugle-[0-9a-f]{10}$", options: .regularExpression) != nil, "\(weekly)")
        #expect(try tag(name: "weekly-digest", runID: 2) == weekly)
        #expect(try tag(name: "spring-sale", runID: 1) != weekly)
        #expect(try tag(name: "weekly-digest", runID: 1, tag: "digest-w48") == "digest-w48")
    }

    @Test("FCM web message uses webpush, validate_only when asked")
    func fcmWeb() throws {
        let builder = FCMMessageBuilder(template: Self.template())
        let bytes = try builder.body(token: "w", platform: .web, copy: RenderedCopy(locale: "en", title: "Hi", body: "There"), validateOnly: true)
        let json = try Self.object(bytes)
        #expect(json["validate_only"] as? Bool == true)
        let message = try #require(json["message"] as? [String: Any])
        #expect(message["android"] == nil)
        #expect(message["webpush"] != nil)
    }

    @Test("FCM message to an iOS device (ios_transport: fcm): the apns override block carries the campaign's APNs headers and aps keys")
    func fcmAPNsOverrides() throws {
        var template = Self.template()
        template.image = "https://example.com/i.png"
        template.apns.category = "sale"
        let builder = FCMMessageBuilder(template: template, defaultTag: "bugle-x", now: 1_000_000)
        let bytes = try builder.body(token: "ios-fcm:APA91b", platform: .ios, copy: RenderedCopy(locale: "en", title: "Hi", body: "There"))
        let message = try #require(try Self.object(bytes)["message"] as? [String: Any])
        #expect(message["token"] as? String == "ios-fcm:APA91b")
        #expect((message["notification"] as? [String: Any])?["body"] as? String == "There")
        #expect(message["android"] == nil)
        #expect(message["webpush"] == nil)
        let apns = try #require(message["apns"] as? [String: Any])
        // Every header value is a string (ApnsConfig.headers is map<string, string>).
        let headers = try #require(apns["headers"] as? [String: String])
        #expect(headers == ["apns-priority": "10", "apns-push-type": "alert", "apns-collapse-id": "c", "apns-expiration": "1003600"])
        let aps = try #require((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["badge"] as? Int == 3)
        #expect(aps["sound"] as? String == "default")
        #expect(aps["thread-id"] as? String == "t")
        #expect(aps["category"] as? String == "sale")
        #expect(aps["mutable-content"] as? Int == 1)
        #expect(aps["alert"] == nil)
        #expect((apns["fcm_options"] as? [String: Any])?["image"] as? String == "https://example.com/i.png")

        // Without a collapse id the campaign's stable tag is used; a background push has content-available only.
        var background = Self.template(pushType: .background, priority: 5)
        background.apns.collapseID = nil
        let quiet = try FCMMessageBuilder(template: background, defaultTag: "bugle-x")
            .body(token: "t:1", platform: .ios, copy: RenderedCopy(locale: "en", title: "", body: ""))
        let quietAPNs = try #require((try Self.object(quiet)["message"] as? [String: Any])?["apns"] as? [String: Any])
        #expect((quietAPNs["headers"] as? [String: String])?["apns-collapse-id"] == "bugle-x")
        #expect((quietAPNs["headers"] as? [String: String])?["apns-priority"] == "5")
        #expect(((quietAPNs["payload"] as? [String: Any])?["aps"] as? [String: Any])?.keys.sorted() == ["content-available"])
    }

    /// FCM builds an alert from `notification`: a background push to iOS carried title, body and image with
    /// `apns-push-type: background`, which APNs does not allow (the direct path sends `content-available` only).
    @Test("FCM message to an iOS device with push_type background: no notification and no image, as the direct APNs path")
    func fcmBackgroundToIOS() throws {
        var template = Self.template(pushType: .background, priority: 5)
        template.image = "https://example.com/i.png"
        let copy = RenderedCopy(locale: "en", title: "Hi", body: "There")
        let builder = FCMMessageBuilder(template: template, defaultTag: "bugle-x")
        let message = try #require(try Self.object(try builder.body(token: "t:1", platform: .ios, copy: copy))["message"] as? [String: Any])
        #expect(message["notification"] == nil)
        #expect(message.keys.sorted() == ["apns", "data", "token"])
        #expect((message["data"] as? [String: String]) == ["deeplink": "app://x", "n": "1"])
        let apns = try #require(message["apns"] as? [String: Any])
        #expect(apns["fcm_options"] == nil)
        #expect((apns["headers"] as? [String: String])?["apns-push-type"] == "background")
        #expect(((apns["payload"] as? [String: Any])?["aps"] as? [String: Any])?.keys.sorted() == ["content-available"])
        // Android and web keep their notification; an alert to iOS keeps it too.
        let android = try #require(try Self.object(try builder.body(token: "a", platform: .android, copy: copy))["message"] as? [String: Any])
        #expect((android["notification"] as? [String: Any])?["title"] as? String == "Hi")
        let alert = try FCMMessageBuilder(template: Self.template()).body(token: "t:1", platform: .ios, copy: copy)
        #expect(((try Self.object(alert)["message"] as? [String: Any])?["notification"] as? [String: Any])?["body"] as? String == "There")
    }

    @Test("the composer routes iOS through FCM only with ios_transport: fcm, and validates such tokens as FCM tokens")
    func iosTransportFCM() throws {
        var campaign = Campaign(
            name: "c", notificationType: "t", segment: Segment(sql: "SELECT 1"), message: Self.template(),
            delivery: DeliveryOptions(), iosTransport: .fcm)
        #expect(campaign.provider(for: .ios) == .fcm)
        #expect(campaign.provider(for: .android) == .fcm)
        let viaFCM = NotificationComposer(campaign: campaign, runID: 1)
        let request = try viaFCM.compose(seq: 1, deviceID: 1, token: "ios:APA91b", platform: .ios, locale: "en", attempt: 1, now: 0).get()
        #expect(request.apns == nil)
        #expect((try Self.object(request.body)["message"] as? [String: Any])?["apns"] != nil)
        #expect(RecipientValidator.normalizedToken("ios:APA91b", platform: .ios, iosViaFCM: true) == "ios:APA91b")
        #expect(RecipientValidator.normalizedToken("ios:APA91b", platform: .ios) == nil)

        campaign.iosTransport = .http2
        #expect(campaign.provider(for: .ios) == .apns)
        let direct = try NotificationComposer(campaign: campaign, runID: 1)
            .compose(seq: 1, deviceID: 1, token: "aabb", platform: .ios, locale: "en", attempt: 1, now: 0).get()
        #expect(direct.apns != nil)
        #expect(try Self.object(direct.body)["aps"] != nil)
    }

    @Test("without derived ids every apns-id is the placeholder, the same length; the dry run's samples carry derived ids")
    func placeholderAPNsIDs() throws {
        let campaign = Campaign(
            name: "c", notificationType: "t", segment: Segment(sql: "SELECT 1"), message: Self.template(), delivery: DeliveryOptions())
        let token = String(repeating: "ab", count: 32)
        let derived = try NotificationComposer(campaign: campaign, runID: 0)
            .compose(seq: 2, deviceID: 7, token: token, platform: .ios, locale: "en", attempt: 1, now: 0).get()
        let placeholder = try NotificationComposer(campaign: campaign, runID: 0, apnsIDs: false)
            .compose(seq: 2, deviceID: 7, token: token, platform: .ios, locale: "en", attempt: 1, now: 0).get()
        #expect(placeholder.apns?.apnsID == NotificationComposer.placeholderAPNsID)
        #expect(derived.apns?.apnsID == NotificationID.apnsID(runID: 0, seq: 2))
        #expect(placeholder.apns?.apnsID.utf8.count == derived.apns?.apnsID.utf8.count)
        #expect(placeholder.body == derived.body)

        var report = DryRunReport(campaign: campaign, now: 0)
        _ = report.add([SegmentRow(deviceID: 1, userID: "u", token: "zz", platform: "ios"), SegmentRow(deviceID: 2, userID: "u", token: token, platform: "ios")], csv: false)
        #expect(report.samples[.ios]?.first?.apns?.apnsID == NotificationID.apnsID(runID: 0, seq: 2))
    }

    /// `--samples N` printed one sample per platform whatever N was.
    @Test("a dry run keeps up to N samples per platform, other locales first: three of five rows show en, de and fr; two of one locale show two")
    func samplesPerPlatform() throws {
        let message = MessageTemplate(
            defaultLocale: "en",
            locales: ["en": LocalizedCopy(title: "Hello", body: "b"), "de": LocalizedCopy(title: "Hallo", body: "b"), "fr": LocalizedCopy(title: "Salut", body: "b")])
        let campaign = Campaign(name: "c", notificationType: "t", segment: Segment(sql: "SELECT 1"), message: message, delivery: DeliveryOptions())
        let locales = ["en", "en", "en", "de", "en", "fr"]
        let rows = locales.enumerated().map { index, locale in
            SegmentRow(deviceID: Int64(index + 1), userID: "u", token: String(repeating: "ab", count: 32), platform: "ios", locale: locale)
        }
        var three = DryRunReport(campaign: campaign, now: 0, sampleLimit: 3)
        _ = three.add(rows, csv: false)
        let titles = (three.samples[.ios] ?? []).map { String(decoding: $0.body, as: UTF8.self) }
        #expect(titles.count == 3)
        for title in ["Hello", "Hallo", "Salut"] { #expect(titles.contains { $0.contains("\"\(title)\"") }, "\(titles)") }
        var two = DryRunReport(campaign: campaign, now: 0, sampleLimit: 2)
        _ = two.add(Array(rows.prefix(3)), csv: false)
        #expect(two.samples[.ios]?.count == 2)
        var none = DryRunReport(campaign: campaign, now: 0, sampleLimit: 0)
        _ = none.add(rows, csv: false)
        #expect(none.samples[.ios] == nil)
    }

    /// The legacy lane refuses a payload over its `payload_limit` (default 2,048 bytes): the dry run used to count
    /// such iOS rows as would-send, and the real run failed them all `payload_too_large`.
    @Test("through the legacy gateway an iOS payload over its payload_limit is payload_too_large in the dry run; HTTP/2 takes it")
    func legacyPayloadLimitInTheDryRun() throws {
        let message = MessageTemplate(defaultLocale: "en", locales: ["en": LocalizedCopy(title: "Hi", body: String(repeating: "x", count: 2100))])
        let token = String(repeating: "ab", count: 32)
        let rows = [SegmentRow(deviceID: 1, userID: "u", token: token, platform: "ios"), SegmentRow(deviceID: 2, userID: "v", token: "fcm-1", platform: "android")]
        for (transport, limit, sent) in [(IOSTransport.legacy, LegacyAPNsSettings.defaultPayloadLimit, 1), (.legacy, 4096, 2), (.http2, 256, 2)] {
            let campaign = Campaign(
                name: "c", notificationType: "t", segment: Segment(sql: "SELECT 1"), message: message, delivery: DeliveryOptions(), iosTransport: transport)
            var report = DryRunReport(campaign: campaign, now: 0, legacyPayloadLimit: limit)
            _ = report.add(rows, csv: false)
            #expect(report.totalWouldSend == Int64(sent), "\(transport) \(limit)")
            #expect(report.skipped[.payloadTooLarge] == (sent == 1 ? 1 : nil), "\(transport) \(limit)")
        }
    }

    @Test(
        "the dry run's body size is the size of the body a send builds: every platform, plain and templated copy, both iOS transports",
        arguments: [IOSTransport.http2, .fcm]
    )
    func bodySizeMatchesComposition(transport: IOSTransport) throws {
        let templated = MessageTemplate(
            defaultLocale: "en",
            locales: ["en": LocalizedCopy(title: "Hi {{first_name}}", body: "There"), "pt": LocalizedCopy(title: "Olá", body: String(repeating: "é", count: 2100))],
            data: ["deeplink": "app://x"]
        )
        for message in [Self.template(), templated] {
            let campaign = Campaign(
                name: "c", notificationType: "t", segment: Segment(sql: "SELECT 1"), message: message, delivery: DeliveryOptions(), iosTransport: transport)
            let composer = NotificationComposer(campaign: campaign, runID: 3, apnsIDs: false)
            for platform in Platform.allCases {
                for token in ["aabbcc", "fcm:APA91b-x_y.z", String(repeating: "Q", count: 300), "needs \"escaping\" \\ here"] {
                    for selection in [
                        MessageSelection(locale: "en", variables: ["first_name": "Ana"]), MessageSelection(locale: "en", variables: ["first_name": "Ünïcødé"]),
                        MessageSelection(locale: "pt"), MessageSelection(locale: "xx"),
                    ] {
                        let built = composer.compose(seq: 5, deviceID: 9, token: token, platform: platform, selection: selection, attempt: 1, now: 100)
                        let sized = composer.bodySize(token: token, platform: platform, selection: selection, now: 100)
                        switch (built, sized) {
                        case (.success(let request), .success(let size)):
                            #expect(request.body.count == size, "\(platform) \(token) \(selection)")
                        case (.failure, .failure):
                            break
                        default:
                            Issue.record("compose and bodySize disagree for \(platform) \(token) \(selection): \(built) vs \(sized)")
                        }
                    }
                }
            }
        }
    }

    @Test("FCM size is the payload's: the message without its token (and without the request around it) passes at 4096 bytes whatever the token length")
    func fcmSize() throws {
        let builder = FCMMessageBuilder(template: Self.template())
        let short = try builder.body(token: "t", platform: .android, copy: RenderedCopy(locale: "en", title: "", body: ""))
        // Less the token, `"token":"",`, and `{"message":` with its closing `}`.
        let room = 4096 - (short.count - 1 - 11 - 12)
        let body = String(repeating: "b", count: room)
        let longToken = String(repeating: "x", count: 300)
        let fitting = try builder.body(token: longToken, platform: .android, copy: RenderedCopy(locale: "en", title: "", body: body))
        #expect(fitting.count == 4096 + 300 + 11 + 12)
        #expect(throws: PayloadTooLarge.self) {
            try builder.body(token: longToken, platform: .android, copy: RenderedCopy(locale: "en", title: "", body: body + "b"))
        }
    }

    @Test("locale fallback chain: pt-BR → pt → default")
    func localeFallback() {
        #expect(LocaleResolver.chain(for: "pt-BR", defaultLocale: "en") == ["pt-br", "pt", "en"])
        #expect(LocaleResolver.chain(for: nil, defaultLocale: "en") == ["en"])
        let resolver = LocaleResolver(locales: ["en", "pt", "de-AT"], defaultLocale: "en")
        #expect(resolver.resolve("pt-BR") == "pt")
        #expect(resolver.resolve("pt_br") == "pt")
        #expect(resolver.resolve("de-AT") == "de-AT")
        #expect(resolver.resolve("de") == "en")
        #expect(resolver.resolve("fr") == "en")
        #expect(resolver.resolve(nil) == "en")
        let book = CopyBook(campaign: Campaign(name: "c", notificationType: "t", segment: Segment(sql: "SELECT 1"), message: Self.template()))
        #expect(book.render(MessageSelection(locale: "pt-BR")).title == "Olá")
    }
}
