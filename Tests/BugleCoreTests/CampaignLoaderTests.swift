import Foundation
import Testing

@testable import BugleCore

/// One fixture that must be rejected, with the exact position and key path of the error.
struct BadConfigurationCase: Sendable, CustomTestStringConvertible {
    var fixture: String
    var line: Int
    var column: Int
    var keyPath: String
    /// A fragment the message must contain.
    var message: String

    var testDescription: String { fixture }
}

/// Where this file's fixtures and the repository's example campaigns live (via `#filePath`, not bundles).
private enum Paths {
    static let testsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static func fixture(_ name: String) -> String {
        testsFolder.appendingPathComponent("Fixtures").appendingPathComponent(name).path
    }
    static let campaignsFolder = testsFolder.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("campaigns")
}


@Suite("CampaignLoader")
struct CampaignLoaderTests {
    static let badCases: [BadConfigurationCase] = [
        .init(
            fixture: "campaign-syntax-error.yaml", line: 5, column: 13, keyPath: "",
            message: "syntax error: mapping values are not allowed in this context"),
        .init(
            fixture: "campaign-unknown-key.yaml", line: 5, column: 3, keyPath: "segment.pagesize",
            message: "unknown key 'pagesize' (did you mean 'page_size'?); "
                + "allowed keys: sql, page_size, statement_timeout, max_rows"),
        .init(
            fixture: "campaign-wrong-type.yaml", line: 5, column: 14, keyPath: "segment.page_size",
            message: "expected an integer, got \"abc\""),
        .init(
            fixture: "campaign-duplicate-key.yaml", line: 6, column: 3, keyPath: "segment.page_size",
            message: "duplicate key 'page_size' (first defined at line 4, column 3)"),
        .init(
            fixture: "campaign-missing-key.yaml", line: 3, column: 1, keyPath: "segment.sql",
            message: "missing required key 'sql'"),
        .init(
            fixture: "campaign-bad-priority.yaml", line: 9, column: 39, keyPath: "message.apns.priority",
            message: "expected one of 1, 5 or 10, got 7"),
        .init(
            fixture: "campaign-background-priority.yaml", line: 11, column: 15, keyPath: "message.apns.priority",
            message: "push_type background requires priority 5, got 10"),
        .init(
            fixture: "campaign-liveactivity.yaml", line: 10, column: 16, keyPath: "message.apns.push_type",
            message: "push_type liveactivity is not a campaign push: it goes to a Live Activity's push token, with an event, "
                + "timestamp and content-state payload, not to the device tokens a campaign sends its copy to; a campaign "
                + "sends alert, background, voip or complication"),
        .init(
            fixture: "campaign-collapse-id.yaml", line: 10, column: 18, keyPath: "message.apns.collapse_id",
            message: "must be at most 64 bytes of UTF-8, got 65 bytes"),
        .init(
            fixture: "campaign-default-locale.yaml", line: 6, column: 19, keyPath: "message.default_locale",
            message: "default locale 'fr' has no copy in message.locales (defined: de, en)"),
        .init(
            fixture: "campaign-alias-bomb.yaml", line: 4, column: 4, keyPath: "e[0]",
            message: "alias *d (anchor &d defined here) expands the document past the limit of 10000 nodes"),
        .init(
            fixture: "campaign-alias-key-bomb.yaml", line: 10, column: 1, keyPath: "",
            message: "explicit mapping keys ('? ') are not supported"),
        .init(
            fixture: "campaign-dedupe-typo.yaml", line: 3, column: 9, keyPath: "dedupe",
            message: "expected one of none, daily, weekly, monthly, once, got \"dayly\" (did you mean 'daily'?)"),
        .init(
            fixture: "campaign-data-map.yaml", line: 11, column: 12, keyPath: "message.data.extra",
            message: "data values must be strings, numbers or booleans, got a mapping"),
        .init(
            fixture: "campaign-android-ttl.yaml", line: 9, column: 19, keyPath: "message.android.ttl",
            message: "must be between 0 and 2419200 seconds, got 2505600 seconds"),
        .init(
            fixture: "campaign-empty-title.yaml", line: 9, column: 14, keyPath: "message.locales.en.title",
            message: "must not be empty"),
    ]

    @Test("rejects a bad fixture at the exact line, column and key path", arguments: badCases)
    func rejectsBadFixture(_ bad: BadConfigurationCase) throws {
        let path = Paths.fixture(bad.fixture)
        let error = try #require(configurationError { try CampaignLoader.load(path: path) })
        #expect(error.file == path)
        #expect(error.line == bad.line, "\(error)")
        #expect(error.column == bad.column, "\(error)")
        #expect(error.keyPath == bad.keyPath, "\(error)")
        #expect(error.message.contains(bad.message), "\(error)")
        let prefix = bad.keyPath.isEmpty ? "" : "\(bad.keyPath): "
        #expect(error.description == "\(path):\(bad.line):\(bad.column): \(prefix)\(error.message)")
    }

    @Test("problems in several sections are all reported, in file order, one per line")
    func everyProblemInFileOrder() throws {
        let yaml = """
            name: x
            notification_type: promo
            message:
              default_locale: en
              locales: { en: { title: a, body: b } }
              bogus: 1
            segment:
              sql: SELECT 1
              page_sise: 10
            delivery:
              rate: { apns: -1 }
            """
        let error = try #require(configurationError { try CampaignLoader.load(yaml: yaml, path: "c.yaml") })
        // The message section is checked after the segment, yet its problem comes first: it is first in the file.
        #expect(error.keyPath == "message.bogus" && error.line == 6, "\(error)")
        #expect(error.further.map(\.keyPath) == ["segment.page_sise", "delivery.rate.apns"], "\(error)")
        let lines = error.description.split(separator: "\n")
        #expect(lines.count == 3 && lines[1].hasPrefix("c.yaml:9:3: segment.page_sise: unknown key") && lines[2].hasPrefix("c.yaml:11:17: delivery.rate.apns:"), "\(error)")
        // One problem: one line, as before.
        let one = try #require(configurationError { try CampaignLoader.load(yaml: yaml.replacingOccurrences(of: "  bogus: 1\n", with: "").replacingOccurrences(of: "apns: -1", with: "apns: 5"), path: "c.yaml") })
        #expect(one.further.isEmpty && !one.description.contains("\n"), "\(one)")
    }

    /// The variants were checked only when the message loaded: a wrong `message.apns.priority` hid them.
    @Test("a problem in message does not hide the variants' problems; their locales are still checked against the message's")
    func messageProblemDoesNotHideVariants() throws {
        let yaml = """
            name: x
            notification_type: promo
            segment: { sql: SELECT 1 }
            message:
              default_locale: en
              locales: { en: { title: a, body: b } }
              apns: { priority: 7 }
            variants:
              - { name: a, weight: 0 }
              - { name: b, weight: 1, locales: { fr: { title: c, body: d } } }
            """
        let error = try #require(configurationError { try CampaignLoader.load(yaml: yaml, path: "c.yaml") })
        #expect(error.keyPath == "message.apns.priority" && error.line == 7, "\(error)")
        #expect(error.further.map(\.keyPath) == ["variants[0].weight"], "\(error)")
        let lines = error.description.split(separator: "\n")
        #expect(lines.count == 2 && lines[1].hasPrefix("c.yaml:9:24: variants[0].weight: must be a number above 0"), "\(error)")
        // With the weight right, the variant's locale is checked against the message's tags as written.
        let locale = try #require(
            configurationError {
                try CampaignLoader.load(yaml: yaml.replacingOccurrences(of: "weight: 0", with: "weight: 1"), path: "c.yaml")
            })
        #expect(locale.keyPath == "message.apns.priority", "\(locale)")
        #expect(locale.further.map(\.keyPath) == ["variants[1].locales.fr"], "\(locale)")
        #expect(locale.further.first?.message.contains("locale 'fr' is not in message.locales (defined: en)") == true, "\(locale)")
    }

    /// VoIP and complication pushes go to PushKit tokens; through FCM they went to FCM registration tokens.
    @Test("push_type voip and complication are refused with ios_transport: fcm, where push_type is written", arguments: ["voip", "complication"])
    func pushKitTypesThroughFCM(pushType: String) throws {
        let yaml = """
            name: x
            notification_type: promo
            segment: { sql: SELECT 1 }
            message:
              default_locale: en
              locales: { en: { title: a, body: b } }
              apns:
                push_type: \(pushType)
            ios_transport: fcm
            """
        let error = try #require(configurationError { try CampaignLoader.load(yaml: yaml, path: "c.yaml") })
        #expect(error.located.hasPrefix("c.yaml:8:16: message.apns.push_type: push_type \(pushType) cannot be sent with ios_transport: fcm"), "\(error)")
        #expect(error.further.isEmpty, "\(error)")
        // Through APNs they are sent; background goes through FCM.
        #expect(try CampaignLoader.load(yaml: yaml.replacingOccurrences(of: "ios_transport: fcm", with: "ios_transport: http2"), path: "c.yaml").message.apns.pushType.rawValue == pushType)
        #expect(try CampaignLoader.load(yaml: yaml.replacingOccurrences(of: "push_type: \(pushType)", with: "push_type: background"), path: "c.yaml").iosTransport == .fcm)
    }

    /// Dedupe compares notification_type exactly: "audit-dd " was a family of its own, and bypassed audit-dd's dedupe.
    @Test(
        "notification_type with surrounding whitespace or a control character is refused where it is written",
        arguments: [
            (#""audit-dd ""#, "must not begin or end with whitespace, got \"audit-dd \": dedupe compares notification_type exactly, so it would not match 'audit-dd'"),
            (#"" audit-dd""#, "must not begin or end with whitespace"),
            (#""audit-dd\u00A0""#, "must not begin or end with whitespace"),
            (#""audit-dd\n""#, "must be a single line without control characters"),
            (#""audit\u0007dd""#, "must be a single line without control characters"),
        ])
    func notificationTypeWhitespace(value: String, message: String) throws {
        let yaml = "name: x\nnotification_type: \(value)\nsegment: { sql: SELECT 1 }\n"
            + "message: { default_locale: en, locales: { en: { title: a, body: b } } }\n"
        let error = try #require(configurationError { try CampaignLoader.load(yaml: yaml, path: "c.yaml") })
        #expect(error.located.hasPrefix("c.yaml:2:20: notification_type: "), "\(error)")
        #expect(error.message.contains(message), "\(error)")
        let inner = try CampaignLoader.load(yaml: yaml.replacingOccurrences(of: value, with: "\"audit dd\""), path: "c.yaml")
        #expect(inner.notificationType == "audit dd")
    }

    /// String-valued keys took what YAML reads as a boolean, number or date as text: `sound: true` was sent as "true".
    @Test(
        "a key that takes text refuses an unquoted boolean, number or date, suggesting quotes; quoted it is text",
        arguments: [
            ("  sound: true", 7, 10, "message.sound", "got true, which YAML reads as a boolean; write it in quotes (\"true\")"),
            ("  android: { channel_id: false }", 7, 26, "message.android.channel_id", "got false, which YAML reads as a boolean"),
            ("  apns: { category: 5 }", 7, 21, "message.apns.category", "got 5, which YAML reads as a number; write it in quotes (\"5\")"),
            ("  sound: 2026-01-01", 7, 10, "message.sound", "got 2026-01-01, which YAML reads as a date"),
            ("  android: { tag: 1.5 }", 7, 19, "message.android.tag", "got 1.5, which YAML reads as a number"),
            ("  locales: { en: { title: True, body: b } }", 6, 27, "message.locales.en.title", "got True, which YAML reads as a boolean"),
        ])
    func unquotedNonText(line text: String, line: Int, column: Int, keyPath: String, message: String) throws {
        let head = "name: x\nnotification_type: promo\nsegment: { sql: SELECT 1 }\nmessage:\n  default_locale: en\n"
        let locales = text.contains("locales:") ? "" : "  locales: { en: { title: a, body: b } }\n"
        let yaml = head + locales + text + "\n"
        let error = try #require(configurationError { try CampaignLoader.load(yaml: yaml, path: "c.yaml") })
        #expect(error.line == line && error.column == column, "\(error)")
        #expect(error.keyPath == keyPath, "\(error)")
        #expect(error.message.hasPrefix("expected a string, ") && error.message.contains(message), "\(error)")
        // Quoted, the same value is text.
        let key = "\(keyPath.split(separator: ".").last ?? ""): "
        let after = try #require(text.range(of: key)).upperBound
        let value = text[after...].prefix { $0 != " " && $0 != "," }
        let quoted = text.replacingOccurrences(of: key + value, with: key + "\"\(value)\"")
        #expect(throws: Never.self) { try CampaignLoader.load(yaml: head + locales + quoted + "\n", path: "c.yaml") }
    }

    @Test("data values and variable defaults still take numbers and booleans; instants and times stay unquoted")
    func unquotedScalarsWhereDocumented() throws {
        let yaml = """
            name: x
            notification_type: promo
            segment: { sql: SELECT 1 }
            message:
              default_locale: en
              locales: { en: { title: "{{n}}", body: b } }
              variables: { n: 0 }
              data: { discount: 20, vip: true, since: 2026-01-01 }
            delivery: { not_after: 2026-11-22T18:00:00Z, deliver_at_local: 20:00 }
            """
        let campaign = try CampaignLoader.load(yaml: yaml, path: "c.yaml")
        #expect(campaign.message.data == ["discount": "20", "vip": "true", "since": "2026-01-01"])
        #expect(campaign.message.variableDefaults == ["n": "0"])
        #expect(campaign.delivery.notAfter != nil)
    }

    @Test("a key file given as the campaign is refused without quoting it (the audit saw 17 characters of an EC key printed); a PEM block as a value is not quoted either")
    func keyFileNotQuoted() throws {
        let key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIECCSX8jNN7sq46GQUsecretsecretsecretsecretAoGCCqGSM49\n-----END EC PRIVATE KEY-----\n"
        let whole = try #require(configurationError { try CampaignLoader.load(yaml: key, path: "ec.key") })
        #expect(whole.message == "expected a mapping, got a string", "\(whole)")
        #expect(!whole.description.contains("MHcCAQEE") && !whole.description.contains("BEGIN"), "\(whole)")
        let pasted = "name: \"-----BEGIN PRIVATE KEY----- MIGHAgEAMBMGByqGSM49AgEGCCqGSM49\"\nnotification_type: [x]\n"
        let value = try #require(configurationError { try CampaignLoader.load(yaml: pasted.replacingOccurrences(of: "name:", with: "segment:"), path: "c.yaml") })
        #expect(!value.description.contains("MIGHAgEA"), "\(value)")
        // Any document that is one scalar reads as a string, whatever its text.
        let plain = try #require(configurationError { try CampaignLoader.load(yaml: "just text", path: "c.yaml") })
        #expect(plain.message == "expected a mapping, got a string", "\(plain)")
    }

    @Test("decodes the complete fixture to an exact Campaign")
    func decodesGoodFixture() throws {
        let path = Paths.fixture("campaign-good.yaml")
        let campaign = try CampaignLoader.load(path: path)
        let expected = Campaign(
            name: "spring-sale-2026",
            notificationType: "promo",
            dedupe: .daily,
            providersPath: Paths.testsFolder.appendingPathComponent("providers.yaml").path,
            segment: Segment(
                sql: """
                    SELECT d.id AS device_id, d.user_id, d.token, d.platform, d.locale
                    FROM bugle.devices d WHERE d.is_active
                    """,
                pageSize: 2500,
                statementTimeoutSeconds: 120,
                maxRows: 1_000_000),
            message: MessageTemplate(
                defaultLocale: "en",
                locales: [
                    "en": LocalizedCopy(title: "Spring sale", body: "20% off everything until Sunday"),
                    "de": LocalizedCopy(title: "Frühlingsangebot", body: "20 % Rabatt bis Sonntag"),
                    "pt-BR": LocalizedCopy(title: "Promoção de primavera", body: "20% de desconto até domingo"),
                ],
                data: ["deeplink": "app://sale", "discount": "20", "featured": "true", "ratio": "1.50"],
                badge: 1,
                sound: "default",
                image: "https://cdn.example.com/spring.png",
                apns: APNsOptions(
                    pushType: .alert, priority: 10, collapseID: "spring-sale", expirationSeconds: 86_400,
                    threadID: "sales", mutableContent: true, contentAvailable: false, category: "SALE"),
                android: AndroidOptions(
                    channelID: "promos", priority: .high, ttlSeconds: 3600, collapseKey: "spring", tag: "spring-sale"),
                webpush: WebPushOptions(link: "https://example.com/sale", ttlSeconds: 5400)),
            delivery: DeliveryOptions(ambiguousPolicy: .resend, inFlightWindow: 500, maxAttempts: 3),
            iosTransport: .http2,
            sourcePath: path)
        #expect(campaign == expected)
    }

    @Test("applies documented defaults and accepts small aliases")
    func defaultsAndAliases() throws {
        let campaign = try CampaignLoader.load(path: Paths.fixture("campaign-anchors.yaml"))
        #expect(campaign.dedupe == .none)
        #expect(campaign.providersPath == nil)
        #expect(campaign.segment == Segment(sql: campaign.segment.sql, pageSize: 5000, statementTimeoutSeconds: 60))
        #expect(campaign.message.locales["en-GB"] == LocalizedCopy(title: "Hello", body: "It's spring"))
        #expect(campaign.message.apns == APNsOptions())
        #expect(campaign.delivery == DeliveryOptions())
        #expect(campaign.iosTransport == .http2)
    }

    @Test("background push type defaults to priority 5")
    func backgroundDefaultsToPriorityFive() throws {
        let yaml = """
            name: refresh
            notification_type: refresh
            segment: { sql: "SELECT 1" }
            message:
              default_locale: en
              locales: { en: { title: t, body: b } }
              apns: { push_type: background }
            """
        let campaign = try CampaignLoader.load(yaml: yaml, path: "inline.yaml")
        #expect(campaign.message.apns.priority == 5)
        #expect(campaign.sourcePath == "inline.yaml")
    }

    @Test("default_locale matches its locale's tag ignoring case, as tags are case-insensitive")
    func defaultLocaleIgnoresCase() throws {
        let campaign = try Self.inline(message: ["default_locale: en", "locales: { EN: { title: t, body: b }, de: { title: t, body: b } }"])
        #expect(campaign.message.defaultLocale == "EN")
    }

    /// A minimal campaign whose `message:` holds `lines`.
    private static func inline(message lines: [String]) throws -> Campaign {
        let message = lines.map { "  " + $0 }.joined(separator: "\n")
        return try CampaignLoader.load(
            yaml: "name: d\nnotification_type: t\nsegment: { sql: \"SELECT 1\" }\nmessage:\n\(message)\n", path: "inline.yaml")
    }

    @Test(
        "durations accept seconds and units",
        arguments: [("3600", 3600), ("3600s", 3600), ("90m", 5400), ("1h", 3600), ("7d", 604_800), ("0", 0)])
    func durations(text: String, seconds: Int) throws {
        let campaign = try Self.inline(message: ["default_locale: en", "locales: { en: { title: t, body: b } }", "android: { ttl: \(text) }"])
        #expect(campaign.message.android.ttlSeconds == seconds)
    }

    @Test("providers path is resolved against the campaign's folder")
    func providersPathResolution() throws {
        let yaml = """
            name: p
            notification_type: t
            providers: ../providers.yaml
            segment: { sql: "SELECT 1" }
            message: { default_locale: en, locales: { en: { title: t, body: b } } }
            """
        #expect(try CampaignLoader.load(yaml: yaml, path: "campaigns/x.yaml").providersPath == "providers.yaml")
        #expect(
            try CampaignLoader.load(yaml: yaml, path: "/srv/bugle/campaigns/x.yaml").providersPath
                == "/srv/bugle/providers.yaml")
        #expect(try CampaignLoader.load(yaml: yaml, path: "x.yaml").providersPath == "../providers.yaml")
    }

    @Test("refuses a file over 1 MiB, and a 200 MB file quickly")
    func oversizedFiles() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bugle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let justOver = folder.appendingPathComponent("big.yaml")
        let line = "# padding padding padding padding\n"
        var text = "name: big\n" + String(repeating: line, count: (1 << 20) / line.utf8.count)
        while text.utf8.count <= 1 << 20 { text += "#" }
        try text.write(to: justOver, atomically: true, encoding: .utf8)
        let error = try #require(configurationError { try CampaignLoader.load(path: justOver.path) })
        #expect(error.line == 1 && error.column == 1 && error.keyPath == "")
        #expect(error.message.contains("1 MiB (1048576 bytes) limit"))

        // Exactly at the limit is still read (and then fails on content, not size).
        let atLimit = String(text.utf8.prefix(1 << 20)) ?? ""
        let atLimitError = try #require(configurationError { try CampaignLoader.load(yaml: atLimit, path: "a.yaml") })
        #expect(!atLimitError.message.contains("limit"))

        // A sparse 200 MB file: only the first MiB + 1 byte is ever read.
        let huge = folder.appendingPathComponent("huge.yaml")
        _ = FileManager.default.createFile(atPath: huge.path, contents: Data("a: [".utf8))
        let handle = try FileHandle(forWritingTo: huge)
        try handle.truncate(atOffset: 200_000_000)
        try handle.close()
        let start = ContinuousClock.now
        let hugeError = try #require(configurationError { try CampaignLoader.load(path: huge.path) })
        #expect(ContinuousClock.now - start < .seconds(1))
        #expect(hugeError.message.contains("limit"))
    }

    @Test("a file that is not UTF-8 is refused at the first bad byte")
    func invalidUTF8() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bugle-\(UUID().uuidString).yaml").path
        _ = FileManager.default.createFile(atPath: path, contents: Data("name: ok\nbody: caf".utf8) + Data([0xE9, 0x0A]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let error = try #require(configurationError { try CampaignLoader.load(path: path) })
        #expect(error.line == 2 && error.column == 10, "\(error)")
        #expect(error.message == "the file is not valid UTF-8 text")
        let missing = try #require(configurationError { try CampaignLoader.load(path: path + ".missing") })
        #expect(missing.message == "file not found")
    }

    @Test("the 9-level alias bomb is refused in well under a second")
    func aliasBombIsFast() throws {
        let path = Paths.fixture("campaign-alias-bomb.yaml")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size < 600)
        let start = ContinuousClock.now
        let error = try #require(configurationError { try CampaignLoader.load(path: path) })
        #expect(ContinuousClock.now - start < .milliseconds(500))
        #expect(error.message.contains("alias bomb"))
    }

    @Test(
        "keys that would make composing an alias bomb expensive are refused before parsing",
        arguments: [
            ("? *i\n: boom\n", 10, 1, "explicit mapping keys"),
            ("[*i, *i]: boom\n", 10, 1, "flow collection is used as a mapping key"),
            ("*i : boom\n", 10, 1, "alias *i is used as a mapping key"),
            ("x: { *i : boom }\n", 10, 6, "alias *i is used as a mapping key"),
            ("x: {[*i]: boom}\n", 10, 5, "flow collection is used as a mapping key"),
        ])
    func keyBombs(tail: String, line: Int, column: Int, message: String) throws {
        var yaml = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        for (previous, name) in zip("abcdefgh", "bcdefghi") {
            yaml += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ", ") + "]\n"
        }
        yaml += tail
        let start = ContinuousClock.now
        let error = try #require(configurationError { try CampaignLoader.load(yaml: yaml, path: "bomb.yaml") })
        #expect(ContinuousClock.now - start < .milliseconds(500))
        #expect(error.line == line && error.column == column, "\(error)")
        #expect(error.message.contains(message), "\(error)")
    }

    @Test(
        "text that only looks like a complex key is not refused",
        arguments: [
            "title: \"[Sale]: 50% off\"",
            "title: '*now: 50% off'",
            "title: x # ? *a: [b]: c",
            "title: |\n    [Sale]: 50% off\n    ? *a\n    *b: c",
            "title: first line\n    ? and a continuation",
        ])
    func scannerFalsePositives(text: String) {
        #expect(YAMLKeyScanner.firstComplexKey(in: text) == nil)
    }

    @Test(
        "syntax, type and schema problems in inline YAML",
        arguments: [
            ("name: [unclosed\n", 2, 1, "", "syntax error"),
            ("", 1, 1, "", "the file is empty"),
            ("- a\n- b\n", 1, 1, "", "expected a mapping, got a list"),
            ("name: x\nnotification_type: t\nsegment: { sql: '  ' }\n", 3, 17, "segment.sql", "must not be empty"),
            (
                "name: x\nnotification_type: t\nsegment: { sql: s, page_size: '10' }\n", 3, 31, "segment.page_size",
                "expected an integer, got the string \"10\" (remove the quotes)"
            ),
            (
                "name: x\nnotification_type: t\nsegment: { sql: s, page_size: 0 }\n", 3, 31, "segment.page_size",
                "must be between 1 and 100000, got 0"
            ),
            ("nam: x\n", 1, 1, "nam", "unknown key 'nam' (did you mean 'name'?)"),
            ("name: x\nname: y\n", 2, 1, "name", "duplicate key 'name' (first defined at line 1, column 1)"),
            ("segment: {sql: a, \"sql\": b}\n", 1, 19, "segment.sql", "duplicate key 'sql'"),
            ("name: x\n---\nname: y\n", 2, 1, "", "syntax error: but found another document"),
            ("name: x\nsegment:\n\tsql: a\n", 3, 1, "", "syntax error"),
            (
                "name: x\nnotification_type: t\nsegment: { sql: s }\nmessage:\n  default_locale: pt_BR\n"
                    + "  locales: { pt_BR: { title: t, body: b } }\n", 6, 14, "message.locales.pt_BR", "use 'pt-BR'"
            ),
            ("name: \(String(repeating: "x", count: 201))\n", 1, 7, "name", "must be at most 200 characters"),
            (
                "name: x\nnotification_type: t\nsegment: { sql: s }\nmessage:\n  default_locale: en\n"
                    + "  locales:\n    en: &copy { title: t, body: b }\n    de: { <<: [{ subtitle: s }, *copy], title: u }\n", 8, 18,
                "message.locales.de.subtitle", "unknown key 'subtitle'"
            ),
            (
                "name: x\nnotification_type: t\nsegment: { sql: s }\nmessage:\n  default_locale: en\n"
                    + "  locales:\n    en: { title: t, body: b }\n    de: { <<: t }\n", 8, 15,
                "message.locales.de.<<", "a merge key (<<) takes a mapping or a list of mappings"
            ),
        ])
    func inlineProblems(yaml: String, line: Int, column: Int, keyPath: String, message: String) throws {
        let error = try #require(configurationError { try CampaignLoader.load(yaml: yaml, path: "inline.yaml") })
        #expect(error.line == line && error.column == column, "\(error)")
        #expect(error.keyPath == keyPath, "\(error)")
        #expect(error.message.contains(message), "\(error)")
    }

    /// YAML merge keys were refused as an unknown key `<<`: copy shared between locales had to be written out.
    @Test("YAML merge keys: a locale's copy from an anchor, its own keys winning; a list of mappings, the first winning")
    func mergeKeys() throws {
        let yaml = """
            name: merged
            notification_type: promo
            segment: { sql: SELECT 1 }
            message:
              default_locale: en
              locales:
                en: &copy { title: Hello, body: Spring sale }
                en-GB: { <<: *copy, body: "Spring sale, innit" }
                fr:
                  <<: [{ title: Bonjour }, *copy]
              android: &android { channel_id: promo, collapse_key: spring }
            """
        let campaign = try CampaignLoader.load(yaml: yaml, path: "merged.yaml")
        #expect(campaign.message.locales["en"] == LocalizedCopy(title: "Hello", body: "Spring sale"))
        #expect(campaign.message.locales["en-GB"] == LocalizedCopy(title: "Hello", body: "Spring sale, innit"))
        #expect(campaign.message.locales["fr"] == LocalizedCopy(title: "Bonjour", body: "Spring sale"))
        // A quoted "<<" is a key like any other.
        let quoted = yaml.replacingOccurrences(of: "{ <<: *copy", with: "{ \"<<\": *copy")
        let error = try #require(configurationError { try CampaignLoader.load(yaml: quoted, path: "merged.yaml") })
        #expect(error.message.contains("unknown key '<<'"), "\(error)")
    }

    @Test("every example in campaigns/ loads")
    func exampleCampaignsLoad() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Paths.campaignsFolder.path)
            .filter { $0.hasSuffix(".yaml") }
            .sorted()
        #expect(names.count >= 3)
        for name in names {
            let path = Paths.campaignsFolder.appendingPathComponent(name).path
            let campaign = try CampaignLoader.load(path: path)
            #expect(campaign.segment.sql.contains("bugle.devices d"), "\(name)")
            #expect(campaign.segment.sql.contains("d.id AS device_id"), "\(name)")
        }
    }
}
