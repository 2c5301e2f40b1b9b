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
}
