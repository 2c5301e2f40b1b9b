import NIOCore
import NIOHPACK

/// The pure request checks of the simulator (PROTOCOLS.md §4.1 item 4), in a stable order:
/// `:method` → `:path` → device token → repeated headers → authorization (delegated) → `apns-push-type` →
/// `apns-topic` → `apns-priority` → `apns-id` → `apns-expiration` → `apns-collapse-id` → payload.
struct APNsRequestValidator: Sendable {
    /// A request that passed every check.
    struct Accepted: Sendable {
        var token: Substring
        var apnsID: String?
        var collapseID: String?
        var pushType: String
    }

    /// The outcome of validation.
    enum Outcome: Sendable {
        case accepted(Accepted)
        case rejected(status: Int, reason: String)
    }

    /// Push types the simulator knows, with the topic suffix each requires.
    static let pushTypeSuffixes: [String: String] = [
        "alert": "", "background": "", "location": ".location-query", "voip": ".voip",
        "complication": ".complication", "fileprovider": ".pushkit.fileprovider", "mdm": "",
        "liveactivity": ".push-type.liveactivity", "pushtotalk": ".voip-ptt", "widgets": ".push-type.widgets",
        "controls": ".push-type.controls",
    ]

    private static let trackedNames = [
        ":method", ":path", "authorization", "apns-id", "apns-expiration", "apns-priority", "apns-topic",
        "apns-collapse-id", "apns-push-type",
    ]

    /// Accepted bundle id.
    let topic: String
    /// The team's other bundle ids, whose requests are answered `DeviceTokenNotForTopic`.
    var otherTopics: [String] = []

    /// Validates one request.
    /// - Parameters:
    ///   - headers: The request headers (pseudo-headers included).
    ///   - body: The request body (nil or empty = empty).
    ///   - authorize: Checks the `authorization` value (nil = absent); returns an error answer or nil.
    func validate(
        headers: HPACKHeaders,
        body: ByteBuffer?,
        authorize: (Substring?) -> (status: Int, reason: String)?
    ) -> Outcome {
        var values = [Substring?](repeating: nil, count: Self.trackedNames.count)
        var duplicate = false
        for (name, value, _) in headers {
            guard let index = Self.trackedNames.firstIndex(of: name) else { continue }
            if values[index] != nil { duplicate = true }
            values[index] = Substring(value)
        }
        let method = values[0], path = values[1], authorization = values[2], apnsID = values[3]
        let expiration = values[4], priority = values[5], topicValue = values[6], collapseID = values[7]
        let pushTypeValue = values[8]

        guard method == "POST" else { return .rejected(status: 405, reason: "MethodNotAllowed") }
        guard let path, path.hasPrefix("/3/device/") else { return .rejected(status: 404, reason: "BadPath") }
        let token = path.dropFirst("/3/device/".utf8.count)
        if token.isEmpty { return .rejected(status: 400, reason: "MissingDeviceToken") }
        guard token.utf8.count % 2 == 0, token.utf8.allSatisfy(Self.isHex) else {
            return .rejected(status: 400, reason: "BadDeviceToken")
        }
        if duplicate { return .rejected(status: 400, reason: "DuplicateHeaders") }
        if let failure = authorize(authorization) {
            return .rejected(status: failure.status, reason: failure.reason)
        }

        let pushType = pushTypeValue.map(String.init) ?? "alert"
        guard let suffix = Self.pushTypeSuffixes[pushType] else {
            return .rejected(status: 400, reason: "InvalidPushType")
        }
        guard let topicValue, !topicValue.isEmpty else { return .rejected(status: 400, reason: "MissingTopic") }
        if pushType != "mdm" {
            if otherTopics.contains(where: { topicValue == $0 + suffix }) {
                return .rejected(status: 400, reason: "DeviceTokenNotForTopic")
            }
            guard topicValue.hasPrefix(topic) else { return .rejected(status: 400, reason: "TopicDisallowed") }
            guard topicValue.dropFirst(topic.utf8.count) == suffix else {
                return .rejected(status: 400, reason: "BadTopic")
            }
        }

        let priorityNumber: Int
        if let priority {
            guard let parsed = Int(priority), [1, 5, 10].contains(parsed) else {
                return .rejected(status: 400, reason: "BadPriority")
            }
            priorityNumber = parsed
        } else {
            priorityNumber = 10
        }
        if pushType == "background" && priorityNumber != 5 {
            return .rejected(status: 400, reason: "BadPriority")
        }
        if let apnsID, !Self.isCanonicalUUID(apnsID) {
            return .rejected(status: 400, reason: "BadMessageId")
        }
        if let expiration, Int64(expiration) == nil {
            return .rejected(status: 400, reason: "BadExpirationDate")
        }
        if let collapseID, collapseID.utf8.count > 64 {
            return .rejected(status: 400, reason: "BadCollapseId")
        }

        guard let body, body.readableBytes > 0 else { return .rejected(status: 400, reason: "PayloadEmpty") }
        let limit = pushType == "voip" ? 5120 : 4096
        if body.readableBytes > limit { return .rejected(status: 413, reason: "PayloadTooLarge") }
        return .accepted(
            Accepted(
                token: token,
                apnsID: apnsID.map(String.init),
                collapseID: collapseID.map(String.init),
                pushType: pushType
            )
        )
    }

    @inline(__always)
    static func isHex(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }

    /// 8-4-4-4-12 hex digits (either case).
    static func isCanonicalUUID(_ value: Substring) -> Bool {
        let utf8 = value.utf8
        guard utf8.count == 36 else { return false }
        for (offset, byte) in utf8.enumerated() {
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else if !isHex(byte) {
                return false
            }
        }
        return true
    }
}
