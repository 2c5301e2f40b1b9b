import Foundation
import Testing

@testable import BugleCore

/// Where the repository's example campaigns live (via `#filePath`, not bundles).
private enum Paths {
    static let campaignsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("campaigns")
    static func campaign(_ name: String) -> String {
        campaignsFolder.appendingPathComponent(name).path
    }
}


/// A campaign with the given `message:` body (indented lines) followed by more top-level YAML.
private func campaignYAML(
    message: String = "  default_locale: en\n  locales: { en: { title: t, body: b } }\n", _ rest: String = ""
) -> String {
    "name: features\nnotification_type: promo\nsegment: { sql: \"SELECT 1\" }\nmessage:\n" + message + rest
}

/// A campaign with a minimal message and the given `delivery:` body (indented lines).
private func deliveryYAML(_ body: String) -> String {
    campaignYAML("delivery:\n" + body)
}

/// One inline campaign that must be rejected; the error must point at an occurrence of `at`.
struct RejectedFeatureCase: Sendable, CustomTestStringConvertible {
    var name: String
    var yaml: String
    /// Text whose `occurrence`-th appearance in `yaml` is where the error must point.
    var at: String
    var occurrence = 1
    var keyPath: String
    /// A fragment the message must contain.
    var message: String

    var testDescription: String { name }

    /// 1-based line and column (in Unicode scalars, as libyaml counts) of the `occurrence`-th `at`.
    var expectedPosition: (line: Int, column: Int)? {
        var searchStart = yaml.startIndex
        var found: Range<String.Index>?
        for _ in 0..<occurrence {
            guard let range = yaml.range(of: at, range: searchStart..<yaml.endIndex) else { return nil }
            found = range
            searchStart = range.upperBound
        }
        guard let range = found else { return nil }
        let before = yaml[..<range.lowerBound]
        let line = before.filter { $0 == "\n" }.count + 1
        let lineStart = before.lastIndex(of: "\n").map { yaml.index(after: $0) } ?? yaml.startIndex
        return (line, yaml[lineStart..<range.lowerBound].unicodeScalars.count + 1)
    }
}

@Suite("CampaignLoader: copy rotation, templates, variants, local-time delivery")
struct CampaignFeatureLoaderTests {
    private func load(_ yaml: String) throws -> Campaign {
        try CampaignLoader.load(yaml: yaml, path: "inline.yaml")
    }

    private func expectRejected(_ bad: RejectedFeatureCase) throws {
        let position = try #require(bad.expectedPosition, "'\(bad.at)' does not occur in the YAML")
        let error = try #require(configurationError { try load(bad.yaml) })
        #expect(error.file == "inline.yaml")
        #expect(error.line == position.line && error.column == position.column, "\(error)")
        #expect(error.keyPath == bad.keyPath, "\(error)")
        #expect(error.message.contains(bad.message), "\(error)")
    }

    // MARK: - Copy rotation

    @Test("a locale may list several copies, in order")
    func rotationList() throws {
        let yaml = campaignYAML(
            message: """
                  default_locale: en
                  locales:
                    en:
                      - { title: "One", body: "First" }
                      - title: "Two"
                        body: "Second"
                    de: { title: "Eins", body: "Erste" }

                """)
        let message = try load(yaml).message
        #expect(
            message.localeCopies["en"] == [
                LocalizedCopy(title: "One", body: "First"), LocalizedCopy(title: "Two", body: "Second"),
            ])
        #expect(message.locales["en"] == LocalizedCopy(title: "One", body: "First"))
        #expect(message.localeCopies["de"] == [LocalizedCopy(title: "Eins", body: "Erste")])
    }

    @Test("a single mapping is still one copy, with the new message defaults")
    func singleMapping() throws {
        let message = try load(campaignYAML()).message
        #expect(message.localeCopies == ["en": [LocalizedCopy(title: "t", body: "b")]])
        #expect(message.variableDefaults == [:])
        #expect(message.nullPolicy == .skip)
        #expect(try load(campaignYAML()).variants == [])
    }

    @Test("a rotation of 20 copies is accepted")
    func twentyCopies() throws {
        let items = (1...20).map { "      - { title: \"T\($0)\", body: b }\n" }.joined()
        let message = try load(campaignYAML(message: "  default_locale: en\n  locales:\n    en:\n" + items)).message
        #expect(message.localeCopies["en"]?.count == 20)
        #expect(message.localeCopies["en"]?.last == LocalizedCopy(title: "T20", body: "b"))
    }

    static let rotationCases: [RejectedFeatureCase] = [
        .init(
            name: "empty rotation",
            yaml: campaignYAML(message: "  default_locale: en\n  locales: { en: [] }\n"),
            at: "[]", keyPath: "message.locales.en", message: "expected 1 to 20 copies, got 0"),
        .init(
            name: "21 copies",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en:\n"
                    + (1...21).map { "      - { title: \"T\($0)\", body: b }\n" }.joined()),
            at: "- { title: \"T1\"", keyPath: "message.locales.en", message: "expected 1 to 20 copies, got 21"),
        .init(
            name: "a copy repeated in the rotation",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en:\n      - { title: a, body: b }\n"
                    + "      - { title: c, body: d }\n      - { title: a, body: b }\n"),
            at: "{ title: a, body: b }", occurrence: 2, keyPath: "message.locales.en[2]",
            message: "repeats copy [0]"),
        .init(
            name: "a rotation item that is not a mapping",
            yaml: campaignYAML(message: "  default_locale: en\n  locales:\n    en: [hello]\n"),
            at: "hello", keyPath: "message.locales.en[0]", message: "expected a mapping, got \"hello\""),
        .init(
            name: "a locale that is a string",
            yaml: campaignYAML(message: "  default_locale: en\n  locales:\n    en: hello\n"),
            at: "hello", keyPath: "message.locales.en",
            message: "expected a mapping { title, body } or a list of 1 to 20 such mappings, got \"hello\""),
        .init(
            name: "an empty title inside a rotation",
            yaml: campaignYAML(message: "  default_locale: en\n  locales:\n    en:\n      - { title: ' ', body: b }\n"),
            at: "' '", keyPath: "message.locales.en[0].title", message: "must not be empty"),
    ]

    @Test("bad rotations are refused where they are written", arguments: rotationCases)
    func badRotation(_ bad: RejectedFeatureCase) throws {
        try expectRejected(bad)
    }

    // MARK: - Templates

    static let templateCases: [RejectedFeatureCase] = [
        .init(
            name: "unclosed tag in a title",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en: { title: \"Hi {{first_name}\", body: b }\n"),
            at: "\"Hi {{", keyPath: "message.locales.en.title",
            message: "template syntax: a tag is not closed with }}"),
        .init(
            name: "section never closed in a body",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en:\n      title: t\n"
                    + "      body: \"{{#city}}in {{city}}\"\n"),
            at: "\"{{#city}}", keyPath: "message.locales.en.body",
            message: "a section is opened but never closed"),
        .init(
            name: "section closed with another name",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en:\n      title: \"{{#a}}x{{/b}}\"\n      body: b\n"),
            at: "\"{{#a}}", keyPath: "message.locales.en.title",
            message: "a section is closed with a different name"),
        .init(
            name: "bad tag in a data value",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales: { en: { title: t, body: b } }\n"
                    + "  data: { link: \"app://item/{{id\" }\n"),
            at: "\"app://item", keyPath: "message.data.link", message: "a tag is not closed with }}"),
        .init(
            name: "unsupported partial",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en: { title: t, body: \"{{> footer}}\" }\n"),
            at: "\"{{> footer", keyPath: "message.locales.en.body",
            message: "template tag '{{> footer}}' is not supported in push copy"),
        .init(
            name: "delimiter change",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en: { title: \"{{=<% %>=}}\", body: b }\n"),
            at: "\"{{=", keyPath: "message.locales.en.title", message: "is not supported in push copy"),
        .init(
            name: "unknown transform",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en: { title: \"{{reversed(name)}}\", body: b }\n"),
            at: "\"{{reversed", keyPath: "message.locales.en.title", message: "unknown transform 'reversed'"),
        .init(
            name: "bad tag in a variant's copy",
            yaml: campaignYAML(
                "variants:\n  - { name: a, weight: 1 }\n  - name: b\n    weight: 1\n"
                    + "    locales: { en: { title: t, body: \"{{ }}\" } }\n"),
            at: "\"{{ }}\"", keyPath: "variants[1].locales.en.body", message: "does not name a segment column"),
    ]

    @Test("a template syntax error is reported at the value, with the template's message", arguments: templateCases)
    func templateSyntax(_ bad: RejectedFeatureCase) throws {
        try expectRejected(bad)
    }

    @Test("the column inside the template is part of the message")
    func templateErrorMessage() throws {
        let yaml = campaignYAML(message: "  default_locale: en\n  locales:\n    en: { title: \"ab{{#x}}\", body: b }\n")
        let error = try #require(configurationError { try load(yaml) })
        #expect(error.line == 7 && error.column == 18, "\(error)")
        #expect(error.message.hasPrefix("template syntax: a section is opened but never closed (line 1, column"))
        #expect(error.description.hasPrefix("inline.yaml:7:18: message.locales.en.title: template syntax:"))
    }

    // MARK: - Variables and on_null

    @Test("variables give defaults to the templates' variables, and on_null is read")
    func variables() throws {
        let yaml = campaignYAML(
            message: """
                  default_locale: en
                  variables: { first_name: there, points: 0, vip: true, city: "" }
                  on_null: empty
                  locales:
                    en:
                      title: "Hi {{capitalized(first_name)}}"
                      body: "You have {{points}} points{{#vip}}, VIP{{/vip}}"
                  data: { city: "{{city}}" }

                """)
        let message = try load(yaml).message
        #expect(message.variableDefaults == ["first_name": "there", "points": "0", "vip": "true", "city": ""])
        #expect(message.nullPolicy == .empty)
        #expect(message.data == ["city": "{{city}}"])
        #expect(message.locales["en"]?.title == "Hi {{capitalized(first_name)}}")
    }

    @Test("a variable used only by a variant counts as used")
    func variableUsedByVariant() throws {
        let yaml = campaignYAML(
            message: "  default_locale: en\n  variables: { code: WELCOME }\n  locales: { en: { title: t, body: b } }\n",
            "variants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 1, data: { promo: \"{{code}}\" } }\n")
        let campaign = try load(yaml)
        #expect(campaign.message.variableDefaults == ["code": "WELCOME"])
        #expect(campaign.variants.last?.data == ["promo": "{{code}}"])
    }

    static let variableCases: [RejectedFeatureCase] = [
        .init(
            name: "declared but not used",
            yaml: campaignYAML(
                message: "  default_locale: en\n  variables:\n    first_name: there\n    city: Berlin\n"
                    + "  locales: { en: { title: \"Hi {{first_name}}\", body: b } }\n"),
            at: "city:", keyPath: "message.variables.city",
            message: "variable 'city' is declared but not used by any title, body or data value"),
        .init(
            name: "not a variable name",
            yaml: campaignYAML(
                message: "  default_locale: en\n  variables: { first-name: x }\n"
                    + "  locales: { en: { title: t, body: b } }\n"),
            at: "first-name", keyPath: "message.variables.first-name", message: "is not a variable name"),
        .init(
            name: "null default",
            yaml: campaignYAML(
                message: "  default_locale: en\n  variables: { name: ~ }\n"
                    + "  locales: { en: { title: \"{{name}}\", body: b } }\n"),
            at: "~", keyPath: "message.variables.name",
            message: "variable defaults must be strings, numbers or booleans, got null"),
        .init(
            name: "list default",
            yaml: campaignYAML(
                message: "  default_locale: en\n  variables: { name: [a] }\n"
                    + "  locales: { en: { title: \"{{name}}\", body: b } }\n"),
            at: "[a]", keyPath: "message.variables.name",
            message: "variable defaults must be strings, numbers or booleans, got a list"),
        .init(
            name: "variables is not a mapping",
            yaml: campaignYAML(
                message: "  default_locale: en\n  variables: [name]\n  locales: { en: { title: t, body: b } }\n"),
            at: "[name]", keyPath: "message.variables", message: "expected a mapping, got a list"),
        .init(
            name: "reserved column declared as a variable",
            yaml: campaignYAML(
                message: "  default_locale: en\n  variables: { platform: phone }\n"
                    + "  locales: { en: { title: \"{{platform}}\", body: b } }\n"),
            at: "platform:", keyPath: "message.variables.platform",
            message: "'platform' cannot be a template variable"),
        .init(
            name: "reserved column used in a title",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales: { en: { title: \"Hi {{user_id}}\", body: b } }\n"),
            at: "\"Hi {{user_id", keyPath: "message.locales.en.title",
            message:
                "'user_id' cannot be a template variable: device_id, user_id, token, platform, locale and timezone"),
        .init(
            name: "reserved column used with a transform in data",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales: { en: { title: t, body: b } }\n"
                    + "  data: { t: \"{{uppercased(token)}}\" }\n"),
            at: "\"{{uppercased", keyPath: "message.data.t", message: "'token' cannot be a template variable"),
        .init(
            name: "reserved column used as a section in a variant",
            yaml: campaignYAML(
                "variants:\n  - { name: a, weight: 1 }\n"
                    + "  - { name: b, weight: 1, locales: { en: { title: \"{{#locale}}x{{/locale}}\", body: b } } }\n"),
            at: "\"{{#locale", keyPath: "variants[1].locales.en.title",
            message: "'locale' cannot be a template variable"),
        .init(
            name: "bad on_null",
            yaml: campaignYAML(
                message: "  default_locale: en\n  on_null: fail\n  locales: { en: { title: t, body: b } }\n"),
            at: "fail", keyPath: "message.on_null", message: "expected one of skip, empty, got \"fail\""),
    ]

    @Test("bad variables, reserved columns and on_null are refused", arguments: variableCases)
    func badVariables(_ bad: RejectedFeatureCase) throws {
        try expectRejected(bad)
    }

    // MARK: - Variants

    @Test("variants are read with weights, locales (under the message's spelling) and data")
    func variantsParsed() throws {
        let yaml = campaignYAML(
            message: """
                  default_locale: en
                  locales:
                    en: { title: "Hello", body: "Body" }
                    pt-BR: { title: "Olá", body: "Corpo" }
                  data: { deeplink: "app://a" }

                """,
            """
            variants:
              - name: control
                weight: 1
              - name: Short_Title-2
                weight: 2.5
                locales:
                  pt-br: { title: "Oi", body: "Corpo" }
                  EN:
                    - { title: "Hi", body: "Body" }
                    - { title: "Hey", body: "Body" }
                data: { deeplink: "app://b", extra: 1, flag: true }

            """)
        let campaign = try load(yaml)
        #expect(
            campaign.variants == [
                CampaignVariant(name: "control", weight: 1),
                CampaignVariant(
                    name: "Short_Title-2", weight: 2.5,
                    localeCopies: [
                        "pt-BR": [LocalizedCopy(title: "Oi", body: "Corpo")],
                        "en": [LocalizedCopy(title: "Hi", body: "Body"), LocalizedCopy(title: "Hey", body: "Body")],
                    ],
                    data: ["deeplink": "app://b", "extra": "1", "flag": "true"]),
            ])
        #expect(campaign.message.data == ["deeplink": "app://a"])
    }

    @Test("26 variants are accepted")
    func twentySixVariants() throws {
        let items = (1...26).map { "  - { name: v\($0), weight: 1 }\n" }.joined()
        #expect(try load(campaignYAML("variants:\n" + items)).variants.count == 26)
    }

    static let variantCases: [RejectedFeatureCase] = [
        .init(
            name: "a variant locale not in message.locales",
            yaml: campaignYAML(
                message: "  default_locale: en\n  locales:\n    en: { title: t, body: b }\n"
                    + "    de: { title: t, body: b }\n",
                "variants:\n  - { name: a, weight: 1 }\n  - name: b\n    weight: 1\n    locales:\n"
                    + "      fr: { title: t, body: b }\n"),
            at: "fr:", keyPath: "variants[1].locales.fr",
            message: "locale 'fr' is not in message.locales (defined: de, en)"),
        .init(
            name: "a variant locale given twice",
            yaml: campaignYAML(
                "variants:\n  - { name: a, weight: 1 }\n"
                    + "  - { name: b, weight: 1, locales: { en: { title: x, body: y },\n"
                    + "      EN: { title: z, body: w } } }\n"),
            at: "EN:", keyPath: "variants[1].locales.EN", message: "locale 'EN' is given twice"),
        .init(
            name: "duplicate variant name",
            yaml: campaignYAML("variants:\n  - { name: Blue, weight: 1 }\n  - { name: blue, weight: 1 }\n"),
            at: "blue,", keyPath: "variants[1].name",
            message: "variant name 'blue' repeats 'Blue' (variant names are case-insensitive)"),
        .init(
            name: "one single variant",
            yaml: campaignYAML("variants:\n  - { name: only, weight: 1 }\n"),
            at: "- { name: only", keyPath: "variants",
            message: "expected 2 to 26 variants, got 1 (a split needs at least two"),
        .init(
            name: "no variants",
            yaml: campaignYAML("variants: []\n"),
            at: "[]", keyPath: "variants", message: "expected 2 to 26 variants, got 0"),
        .init(
            name: "27 variants",
            yaml: campaignYAML("variants:\n" + (1...27).map { "  - { name: v\($0), weight: 1 }\n" }.joined()),
            at: "- { name: v1,", keyPath: "variants", message: "expected 2 to 26 variants, got 27"),
        .init(
            name: "variants as a mapping",
            yaml: campaignYAML("variants:\n  a: { weight: 1 }\n"),
            at: "a: {", keyPath: "variants", message: "expected a list, got a mapping"),
        .init(
            name: "a name with a space",
            yaml: campaignYAML("variants:\n  - { name: \"big title\", weight: 1 }\n  - { name: b, weight: 1 }\n"),
            at: "\"big title\"", keyPath: "variants[0].name",
            message: "expected a variant name of letters, digits, _ and -"),
        .init(
            name: "a name of 65 characters",
            yaml: campaignYAML(
                "variants:\n  - { name: \(String(repeating: "a", count: 65)), weight: 1 }\n"
                    + "  - { name: b, weight: 1 }\n"),
            at: "aaaa", keyPath: "variants[0].name", message: "must be at most 64 characters, got 65"),
        .init(
            name: "weight 0",
            yaml: campaignYAML("variants:\n  - { name: a, weight: 0 }\n  - { name: b, weight: 1 }\n"),
            at: "0 }", keyPath: "variants[0].weight",
            message: "must be a number above 0 and at most 1000000, got \"0\""),
        .init(
            name: "weight above 1,000,000",
            yaml: campaignYAML("variants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 1000001 }\n"),
            at: "1000001", keyPath: "variants[1].weight", message: "must be a number above 0 and at most 1000000"),
        .init(
            name: "weight as a string",
            yaml: campaignYAML("variants:\n  - { name: a, weight: \"50%\" }\n  - { name: b, weight: 1 }\n"),
            at: "\"50%\"", keyPath: "variants[0].weight", message: "expected a number"),
        .init(
            name: "missing weight",
            yaml: campaignYAML("variants:\n  - name: a\n  - { name: b, weight: 1 }\n"),
            at: "name: a", keyPath: "variants[0].weight", message: "missing required key 'weight'"),
        .init(
            name: "misspelt key",
            yaml: campaignYAML("variants:\n  - { name: a, weigth: 1 }\n  - { name: b, weight: 1 }\n"),
            at: "weigth", keyPath: "variants[0].weigth",
            message: "unknown key 'weigth' (did you mean 'weight'?); allowed keys: name, weight, locales, data"),
        .init(
            name: "reserved data key in a variant",
            yaml: campaignYAML("variants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 1, data: { aps: x } }\n"),
            at: "aps", keyPath: "variants[1].data.aps", message: "'aps' is reserved by APNs or FCM"),
    ]

    @Test("bad variants are refused where they are written", arguments: variantCases)
    func badVariants(_ bad: RejectedFeatureCase) throws {
        try expectRejected(bad)
    }

    /// `message.image` and a data key `image` both went to the APNs payload's top level: the key was written twice.
    @Test("a data key image is refused when message.image is set, in the message and in a variant, in any letter case")
    func imageDataKeyWithImage() throws {
        let message = "  default_locale: en\n  locales: { en: { title: t, body: b } }\n"
        let image = "  image: https://cdn.example.com/a.png\n"
        try expectRejected(
            .init(
                name: "message.data.image", yaml: campaignYAML(message: message + "  data: { image: x }\n" + image),
                at: "image: x", keyPath: "message.data.image", message: "data key 'image' clashes with message.image"))
        try expectRejected(
            .init(
                name: "message.data.Image", yaml: campaignYAML(message: message + image + "  data: { Image: x }\n"),
                at: "Image", keyPath: "message.data.Image", message: "data key 'Image' clashes with message.image"))
        try expectRejected(
            .init(
                name: "variants[1].data.image",
                yaml: campaignYAML(
                    message: message + image,
                    "variants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 1, data: { image: y } }\n"),
                at: "image: y", keyPath: "variants[1].data.image", message: "data key 'image' clashes with message.image"))
        // Without message.image the key is the campaign's own.
        let campaign = try load(
            campaignYAML(
                message: message + "  data: { image: x }\n",
                "variants:\n  - { name: a, weight: 1 }\n  - { name: b, weight: 1, data: { image: y } }\n"))
        #expect(campaign.message.data == ["image": "x"])
        #expect(campaign.variants.last?.data == ["image": "y"])
    }

    // MARK: - Delivery

    @Test("every new delivery key is read")
    func deliveryKeys() throws {
        let yaml = deliveryYAML(
            """
              send_at: 2026-11-22T09:00:00Z
              not_after: 2026-11-22T18:00:00Z
              deliver_at_local: "20:00"
              fallback_timezone: Europe/Berlin
              quiet_hours: 22:00-08:00
              quiet_hours_action: skip
              max_per_user: { count: 3, per: 7d }

            """)
        let options = try load(yaml).delivery
        #expect(
            options
                == DeliveryOptions(
                    notAfter: Instant(secondsSince1970: 1_795_370_400),
                    sendAt: Instant(secondsSince1970: 1_795_338_000),
                    localTime: LocalTimeDelivery(
                        deliverAt: LocalTime(hour: 20, minute: 0), fallbackTimeZone: "Europe/Berlin",
                        quietHours: QuietHours(
                            start: LocalTime(hour: 22, minute: 0), end: LocalTime(hour: 8, minute: 0)),
                        quietHoursAction: .skip),
                    frequencyCap: FrequencyCap(count: 3, perSeconds: 604_800)))
    }

    @Test("the new delivery keys default to: no send_at, no local time, UTC, hold, no cap")
    func deliveryDefaults() throws {
        let options = try load(deliveryYAML("  quiet_hours: \"23:30 - 07:00\"\n")).delivery
        #expect(options.sendAt == nil)
        #expect(options.frequencyCap == nil)
        #expect(options.localTime.deliverAt == nil)
        #expect(options.localTime.fallbackTimeZone == "UTC")
        #expect(options.localTime.quietHoursAction == .hold)
        #expect(
            options.localTime.quietHours
                == QuietHours(start: LocalTime(hour: 23, minute: 30), end: LocalTime(hour: 7, minute: 0)))
        #expect(try load(campaignYAML()).delivery == DeliveryOptions())
    }

    @Test(
        "frequency cap windows accept the documented extremes",
        arguments: [
            ("{ count: 1, per: 60 }", 1, 60), ("{ count: 1000, per: 366d }", 1000, 31_622_400),
            ("{ count: 2, per: 24h }", 2, 86_400),
        ])
    func frequencyCapExtremes(text: String, count: Int, seconds: Int) throws {
        let cap = try load(deliveryYAML("  max_per_user: \(text)\n")).delivery.frequencyCap
        #expect(cap == FrequencyCap(count: count, perSeconds: seconds))
    }

    static let deliveryCases: [RejectedFeatureCase] = [
        .init(
            name: "deliver_at_local without a leading zero",
            yaml: deliveryYAML("  deliver_at_local: \"8:00\"\n"),
            at: "\"8:00\"", keyPath: "delivery.deliver_at_local",
            message: "expected a local time as HH:MM (24-hour, 00:00 to 23:59, like 20:00), got \"8:00\""),
        .init(
            name: "deliver_at_local 24:00",
            yaml: deliveryYAML("  deliver_at_local: \"24:00\"\n"),
            at: "\"24:00\"", keyPath: "delivery.deliver_at_local", message: "expected a local time as HH:MM"),
        .init(
            name: "deliver_at_local with seconds",
            yaml: deliveryYAML("  deliver_at_local: 20:00:00\n"),
            at: "20:00:00", keyPath: "delivery.deliver_at_local", message: "expected a local time as HH:MM"),
        .init(
            name: "unknown time zone",
            yaml: deliveryYAML("  fallback_timezone: Mars/Olympus_Mons\n"),
            at: "Mars", keyPath: "delivery.fallback_timezone",
            message: "unknown time zone \"Mars/Olympus_Mons\"; expected an IANA identifier"),
        .init(
            name: "quiet hours starting and ending at the same time",
            yaml: deliveryYAML("  quiet_hours: \"22:00-22:00\"\n"),
            at: "\"22:00-22:00\"", keyPath: "delivery.quiet_hours",
            message: "quiet hours must start and end at different times"),
        .init(
            name: "quiet hours without an end",
            yaml: deliveryYAML("  quiet_hours: \"22:00\"\n"),
            at: "\"22:00\"", keyPath: "delivery.quiet_hours",
            message: "expected quiet hours as HH:MM-HH:MM (24-hour local times, like 22:00-08:00)"),
        .init(
            name: "quiet hours with a bad time",
            yaml: deliveryYAML("  quiet_hours: 22:00-8:00\n"),
            at: "22:00-8:00", keyPath: "delivery.quiet_hours", message: "expected quiet hours as HH:MM-HH:MM"),
        .init(
            name: "bad quiet_hours_action",
            yaml: deliveryYAML("  quiet_hours: 22:00-08:00\n  quiet_hours_action: wait\n"),
            at: "wait", keyPath: "delivery.quiet_hours_action", message: "expected one of hold, skip, got \"wait\""),
        .init(
            name: "deliver_at_local inside quiet hours that skip",
            yaml: deliveryYAML("  deliver_at_local: \"23:30\"\n  quiet_hours: 22:00-08:00\n  quiet_hours_action: skip\n"),
            at: "\"23:30\"", keyPath: "delivery.deliver_at_local",
            message: "falls inside quiet_hours (22:00-08:00) with quiet_hours_action: skip, so every device would be skipped"),
        .init(
            name: "quiet_hours_action without quiet_hours",
            yaml: deliveryYAML("  quiet_hours_action: skip\n"),
            at: "quiet_hours_action", keyPath: "delivery.quiet_hours_action",
            message: "quiet_hours_action needs quiet_hours"),
        .init(
            name: "cap count 0",
            yaml: deliveryYAML("  max_per_user: { count: 0, per: 7d }\n"),
            at: "0,", keyPath: "delivery.max_per_user.count", message: "must be between 1 and 1000, got 0"),
        .init(
            name: "cap count 1001",
            yaml: deliveryYAML("  max_per_user: { count: 1001, per: 7d }\n"),
            at: "1001", keyPath: "delivery.max_per_user.count", message: "must be between 1 and 1000, got 1001"),
        .init(
            name: "cap window under a minute",
            yaml: deliveryYAML("  max_per_user: { count: 3, per: 30s }\n"),
            at: "30s", keyPath: "delivery.max_per_user.per",
            message: "must be between 1m (60 seconds) and 366d (31622400 seconds), got 30 seconds"),
        .init(
            name: "cap window over 366 days",
            yaml: deliveryYAML("  max_per_user: { count: 3, per: 367d }\n"),
            at: "367d", keyPath: "delivery.max_per_user.per", message: "got 31708800 seconds"),
        .init(
            name: "cap without a window",
            yaml: deliveryYAML("  max_per_user: { count: 3 }\n"),
            at: "max_per_user", keyPath: "delivery.max_per_user.per", message: "missing required key 'per'"),
        .init(
            name: "cap as a number",
            yaml: deliveryYAML("  max_per_user: 3\n"),
            at: "3", keyPath: "delivery.max_per_user", message: "expected a mapping, got \"3\""),
        .init(
            name: "send_at after not_after",
            yaml: deliveryYAML("  not_after: 2026-11-22T18:00:00Z\n  send_at: 2026-11-22T19:00:00Z\n"),
            at: "2026-11-22T19", keyPath: "delivery.send_at",
            message: "must be before not_after (2026-11-22T18:00:00Z), got \"2026-11-22T19:00:00Z\""),
        .init(
            name: "send_at equal to not_after",
            yaml: deliveryYAML("  send_at: 2026-11-22T18:00:00Z\n  not_after: 2026-11-22T20:00:00+02:00\n"),
            at: "2026-11-22T18", keyPath: "delivery.send_at", message: "must be before not_after"),
        .init(
            name: "send_at without a zone",
            yaml: deliveryYAML("  send_at: 2026-11-22T09:00:00\n"),
            at: "2026", keyPath: "delivery.send_at", message: "expected an ISO 8601 instant with a zone"),
        .init(
            name: "send_at on a day the month lacks",
            yaml: deliveryYAML("  send_at: 2027-02-29T09:00:00Z\n"),
            at: "2027-02-29", keyPath: "delivery.send_at", message: "2027-02-29 is not a date: that month has 28 days"),
        .init(
            name: "not_after on 31 April",
            yaml: deliveryYAML("  not_after: 2027-04-31T09:00:00+02:00\n"),
            at: "2027-04-31", keyPath: "delivery.not_after", message: "2027-04-31 is not a date: that month has 30 days"),
        .init(
            name: "send_at with a 25-hour offset",
            yaml: deliveryYAML("  send_at: 2027-01-01T09:00:00+25:00\n"),
            at: "2027-01-01", keyPath: "delivery.send_at", message: "the zone offset +25:00 is out of range (at most ±23:59)"),
        .init(
            name: "an integer with a leading zero",
            yaml: deliveryYAML("  in_flight_window: 0100\n"),
            at: "0100", keyPath: "delivery.in_flight_window", message: "has a leading zero, which some YAML readers take for octal"),
        .init(
            name: "an integer with a doubled separator",
            yaml: deliveryYAML("  in_flight_window: 1__000\n"),
            at: "1__000", keyPath: "delivery.in_flight_window", message: "expected an integer"),
        .init(
            name: "misspelt delivery key",
            yaml: deliveryYAML("  deliver_at_locl: \"20:00\"\n"),
            at: "deliver_at_locl", keyPath: "delivery.deliver_at_locl",
            message: "unknown key 'deliver_at_locl' (did you mean 'deliver_at_local'?)"),
    ]

    @Test("bad delivery values are refused where they are written", arguments: deliveryCases)
    func badDelivery(_ bad: RejectedFeatureCase) throws {
        try expectRejected(bad)
    }

    // MARK: - Examples

    @Test("campaigns/welcome-back-ab.yaml loads with its templates, rotation and variants")
    func welcomeBackExample() throws {
        let campaign = try CampaignLoader.load(path: Paths.campaign("welcome-back-ab.yaml"))
        #expect(campaign.segment.sql.contains("AS first_name"))
        #expect(campaign.message.variableDefaults == ["first_name": "there"])
        #expect(campaign.message.nullPolicy == .skip)
        #expect(campaign.message.localeCopies["en"]?.count == 3)
        #expect(campaign.message.localeCopies["de"]?.count == 1)
        #expect(campaign.variants.map(\.name) == ["control", "discount"])
        #expect(campaign.variants.map(\.weight) == [50, 50])
        #expect(campaign.variants.last?.localeCopies.keys.sorted() == ["de", "en"])
        #expect(campaign.delivery.frequencyCap == FrequencyCap(count: 2, perSeconds: 604_800))
    }

    @Test("campaigns/evening-digest.yaml loads with local-time delivery, quiet hours and a cap")
    func eveningDigestExample() throws {
        let campaign = try CampaignLoader.load(path: Paths.campaign("evening-digest.yaml"))
        #expect(
            campaign.delivery.localTime
                == LocalTimeDelivery(
                    deliverAt: LocalTime(hour: 20, minute: 0), fallbackTimeZone: "America/New_York",
                    quietHours: QuietHours(start: LocalTime(hour: 22, minute: 0), end: LocalTime(hour: 8, minute: 0)),
                    quietHoursAction: .hold))
        #expect(campaign.delivery.frequencyCap == FrequencyCap(count: 3, perSeconds: 604_800))
        #expect(campaign.delivery.sendAt == nil)
        #expect(campaign.variants.isEmpty)
    }
}
