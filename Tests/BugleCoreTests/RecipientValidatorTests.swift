import BugleCore
import Testing

@Suite("Segment row validation")
struct RecipientValidatorTests {
    static let hex64 = String(repeating: "ab", count: 32)

    @Test(
        "rows that are never sent, by reason",
        arguments: [
            (SegmentRow(deviceID: nil, userID: "u", token: hex64, platform: "ios"), SkipReason.missingDeviceID),
            (SegmentRow(deviceID: 1, userID: nil, token: hex64, platform: "ios"), .missingUserID),
            (SegmentRow(deviceID: 1, userID: "u", token: nil, platform: "ios"), .missingToken),
            (SegmentRow(deviceID: 1, userID: "u", token: "", platform: "ios"), .missingToken),
            (SegmentRow(deviceID: 1, userID: "u", token: hex64, platform: "blackberry"), .unknownPlatform),
            (SegmentRow(deviceID: 1, userID: "u", token: hex64, platform: nil), .unknownPlatform),
            (SegmentRow(deviceID: 1, userID: "u", token: hex64, platform: "ios "), .unknownPlatform),
            (SegmentRow(deviceID: 1, userID: "u", token: hex64, platform: ""), .unknownPlatform),
            (SegmentRow(deviceID: 1, userID: "u", token: "xyz", platform: "ios"), .malformedToken),
            (SegmentRow(deviceID: 1, userID: "u", token: "abc", platform: "ios"), .malformedToken),
            (SegmentRow(deviceID: 1, userID: "u", token: "ab cd", platform: "android"), .malformedToken),
            (SegmentRow(deviceID: 1, userID: "u", token: "abc\r\nx", platform: "android"), .malformedToken),
            (SegmentRow(deviceID: 1, userID: "u", token: "a/b?c%", platform: "web"), .malformedToken),
        ]
    )
    func skipped(row: SegmentRow, reason: SkipReason) {
        #expect(RecipientValidator.validate(row) == .failure(SkipReasonError(reason)))
    }

    @Test("valid rows are normalised: iOS hex lowercased, platform case-insensitive")
    func valid() throws {
        let row = SegmentRow(deviceID: 9, userID: "u", token: Self.hex64.uppercased(), platform: "IOS", locale: "en")
        let recipient = try RecipientValidator.validate(row).get()
        #expect(recipient.token == Self.hex64)
        #expect(recipient.platform == .ios)
        let fcm = try RecipientValidator.validate(SegmentRow(deviceID: 2, userID: "u", token: "fcm:APA91b-x_y.z", platform: "android")).get()
        #expect(fcm.token == "fcm:APA91b-x_y.z")
    }

    @Test("platform names in any letter case", arguments: [("ios", Platform.ios), ("iOS", .ios), ("ANDROID", .android), ("android", .android), ("Web", .web), ("web", .web)])
    func platformCase(name: String, platform: Platform) throws {
        #expect(try RecipientValidator.validate(SegmentRow(deviceID: 1, userID: "u", token: Self.hex64, platform: name)).get().platform == platform)
    }

    @Test("an FCM token admits exactly 0-9 a-z A-Z _ - : . (every byte value checked)")
    func fcmTokenBytes() {
        let allowed = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-:.".utf8)
        for byte in UInt8(0)...UInt8(255) {
            let token = String(decoding: [UInt8(ascii: "a"), byte, UInt8(ascii: "z")], as: UTF8.self)
            #expect((RecipientValidator.fcmToken(token) != nil) == allowed.contains(byte), "byte \(byte)")
        }
    }
}
