/// The FCM HTTP v1 request schema the simulator enforces (PROTOCOLS.md §2.2): every object type with its
/// fields, each accepted under its proto name (snake_case) and its JSON name (lowerCamelCase), as Google's
/// proto3 JSON parser does. Any other field is an error.
struct FCMMessageSchema: Sendable {
    /// What a field's value must look like.
    indirect enum Kind: Sendable {
        case string
        case bool
        case int32
        case number
        /// A map of strings; `dataPayload` adds the reserved-key rules of `data`.
        case stringMap(dataPayload: Bool)
        case stringArray
        /// A proto `Duration` string (`"3.5s"`), optionally limited to `0...maxSeconds`.
        case duration(maxSeconds: Double?)
        case durationArray
        /// An RFC 3339 timestamp string.
        case timestamp
        /// Enum names (matched case-insensitively) or their numbers.
        case enumeration(typeName: String, names: [String])
        /// `#rrggbb`.
        case color
        /// An `https://` URL.
        case httpsURL
        /// `^[a-zA-Z0-9-_.~%]{1,50}$`.
        case analyticsLabel
        case object(FCMMessageSchema)
        /// Any JSON object (`apns.payload`, `webpush.notification`).
        case freeObject
        /// The APNs payload: any JSON object whose `aps`, when present, is an object.
        case apnsPayload
    }

    /// One field: its canonical (snake_case) name and kind.
    struct Field: Sendable {
        var canonical: String
        var kind: Kind
    }

    /// The proto type name, for error messages.
    let typeName: String
    /// Fields by every accepted spelling.
    let fields: [String: Field]

    /// Creates a schema from canonical snake_case names; lowerCamelCase spellings are added.
    /// - Parameters:
    ///   - typeName: Proto type name.
    ///   - list: Canonical field names and kinds.
    init(_ typeName: String, _ list: [(String, Kind)]) {
        self.typeName = typeName
        var fields: [String: Field] = [:]
        for (name, kind) in list {
            let field = Field(canonical: name, kind: kind)
            fields[name] = field
            fields[Self.lowerCamel(name)] = field
        }
        self.fields = fields
    }

    /// `collapse_key` → `collapseKey`.
    /// - Parameter snake: A snake_case name.
    static func lowerCamel(_ snake: String) -> String {
        guard snake.utf8.contains(UInt8(ascii: "_")) else { return snake }
        var out = ""
        var upperNext = false
        for character in snake {
            if character == "_" {
                upperNext = true
            } else if upperNext {
                out += character.uppercased()
                upperNext = false
            } else {
                out.append(character)
            }
        }
        return out
    }

    private static let durationType = "type.googleapis.com/google.protobuf.Duration"

    /// `AndroidNotification`.
    static let androidNotification = FCMMessageSchema(
        "google.firebase.fcm.v1.AndroidNotification",
        [
            ("title", .string), ("body", .string), ("icon", .string), ("color", .color), ("sound", .string),
            ("tag", .string), ("click_action", .string), ("body_loc_key", .string), ("body_loc_args", .stringArray),
            ("title_loc_key", .string), ("title_loc_args", .stringArray), ("channel_id", .string),
            ("ticker", .string), ("sticky", .bool), ("event_time", .timestamp), ("local_only", .bool),
            (
                "notification_priority",
                .enumeration(
                    typeName: "google.firebase.fcm.v1.AndroidNotification.NotificationPriority",
                    names: [
                        "PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH",
                        "PRIORITY_MAX",
                    ]
                )
            ),
            ("default_sound", .bool), ("default_vibrate_timings", .bool), ("default_light_settings", .bool),
            ("vibrate_timings", .durationArray),
            (
                "visibility",
                .enumeration(
                    typeName: "google.firebase.fcm.v1.AndroidNotification.Visibility",
                    names: ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"]
                )
            ),
            ("notification_count", .int32),
            (
                "light_settings",
                .object(
                    FCMMessageSchema(
                        "google.firebase.fcm.v1.LightSettings",
                        [
                            (
                                "color",
                                .object(
                                    FCMMessageSchema(
                                        "google.type.Color",
                                        [("red", .number), ("green", .number), ("blue", .number), ("alpha", .number)]
                                    )
                                )
                            ),
                            ("light_on_duration", .duration(maxSeconds: nil)),
                            ("light_off_duration", .duration(maxSeconds: nil)),
                        ]
                    )
                )
            ),
            ("image", .string), ("bypass_proxy_notification", .bool),
            (
                "proxy",
                .enumeration(
                    typeName: "google.firebase.fcm.v1.AndroidNotification.Proxy",
                    names: ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"]
                )
            ),
        ]
    )

    /// `AndroidConfig`.
    static let androidConfig = FCMMessageSchema(
        "google.firebase.fcm.v1.AndroidConfig",
        [
            ("collapse_key", .string),
            (
                "priority",
                .enumeration(typeName: "google.firebase.fcm.v1.AndroidMessagePriority", names: ["NORMAL", "HIGH"])
            ),
            ("ttl", .duration(maxSeconds: 2_419_200)),
            ("restricted_package_name", .string),
            ("data", .stringMap(dataPayload: true)),
            ("notification", .object(androidNotification)),
            ("fcm_options", .object(FCMMessageSchema("google.firebase.fcm.v1.AndroidFcmOptions", [("analytics_label", .analyticsLabel)]))),
            ("direct_boot_ok", .bool),
            ("bandwidth_constrained_ok", .bool),
            ("restricted_satellite_ok", .bool),
        ]
    )

    /// `ApnsConfig`.
    static let apnsConfig = FCMMessageSchema(
        "google.firebase.fcm.v1.ApnsConfig",
        [
            ("headers", .stringMap(dataPayload: false)),
            ("payload", .apnsPayload),
            (
                "fcm_options",
                .object(
                    FCMMessageSchema(
                        "google.firebase.fcm.v1.ApnsFcmOptions",
                        [("analytics_label", .analyticsLabel), ("image", .string)]
                    )
                )
            ),
            ("live_activity_token", .string),
        ]
    )

    /// `WebpushConfig`.
    static let webpushConfig = FCMMessageSchema(
        "google.firebase.fcm.v1.WebpushConfig",
        [
            ("headers", .stringMap(dataPayload: false)),
            ("data", .stringMap(dataPayload: false)),
            ("notification", .freeObject),
            (
                "fcm_options",
                .object(
                    FCMMessageSchema(
                        "google.firebase.fcm.v1.WebpushFcmOptions",
                        [("link", .httpsURL), ("analytics_label", .analyticsLabel)]
                    )
                )
            ),
        ]
    )

    /// `Message`.
    static let message = FCMMessageSchema(
        "google.firebase.fcm.v1.Message",
        [
            ("name", .string),
            ("data", .stringMap(dataPayload: true)),
            (
                "notification",
                .object(
                    FCMMessageSchema(
                        "google.firebase.fcm.v1.Notification",
                        [("title", .string), ("body", .string), ("image", .string)]
                    )
                )
            ),
            ("android", .object(androidConfig)),
            ("webpush", .object(webpushConfig)),
            ("apns", .object(apnsConfig)),
            ("fcm_options", .object(FCMMessageSchema("google.firebase.fcm.v1.FcmOptions", [("analytics_label", .analyticsLabel)]))),
            ("token", .string),
            ("topic", .string),
            ("condition", .string),
            ("fid", .string),
        ]
    )

    /// `SendMessageRequest` (the request body).
    static let sendRequest = FCMMessageSchema(
        "google.firebase.fcm.v1.SendMessageRequest",
        [("validate_only", .bool), ("message", .object(message))]
    )

    /// The type name used in "Invalid value" messages for a kind.
    static func protoTypeName(of kind: Kind) -> String {
        switch kind {
        case .string, .color, .httpsURL, .analyticsLabel: return "TYPE_STRING"
        case .bool: return "TYPE_BOOL"
        case .int32: return "TYPE_INT32"
        case .number: return "TYPE_FLOAT"
        case .stringMap, .stringArray, .durationArray: return "TYPE_STRING"
        case .duration: return durationType
        case .timestamp: return "type.googleapis.com/google.protobuf.Timestamp"
        case .enumeration(let typeName, _): return "type.googleapis.com/" + typeName
        case .object(let schema): return "type.googleapis.com/" + schema.typeName
        case .freeObject, .apnsPayload: return "type.googleapis.com/google.protobuf.Struct"
        }
    }
}
