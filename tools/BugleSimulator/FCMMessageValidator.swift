/// The pure body checks of the FCM send route (PROTOCOLS.md §2.2, §4.2 item 4), in a stable order:
/// JSON syntax → schema (unknown fields, value types, `data` string values and reserved keys, enum values,
/// `ttl`, colours, links, analytics labels) → `message` present → exactly one target → target format →
/// size (the `message` JSON text as sent without its target member: ≤ 4096 bytes, ≤ 2048 for topic and condition
/// messages).
struct FCMMessageValidator: Sendable {
    /// One `google.rpc.BadRequest` field violation.
    struct Violation: Sendable, Equatable {
        /// The field path (`message.data[0].value`); nil for the request root.
        var field: String?
        /// What is wrong.
        var description: String
    }

    /// A 400 `INVALID_ARGUMENT` answer.
    struct Failure: Error, Sendable, Equatable {
        /// Which shape of error body to answer.
        enum Shape: Sendable, Equatable {
            /// A schema problem: details `[BadRequest, FcmError]`.
            case badRequest
            /// A bad registration token: details `[FcmError, BadRequest]`.
            case invalidToken
            /// Message too big: details `[FcmError]` only.
            case tooBig
        }

        /// The top-level `message`.
        var message: String
        /// Field violations for the BadRequest detail.
        var violations: [Violation]
        /// The body shape.
        var shape: Shape
    }

    /// A request that passed every check.
    struct Validated: Sendable, Equatable {
        var validateOnly: Bool
        /// `token`, `topic`, `condition` or `fid`.
        var targetKind: String
        var target: String
        var collapseKey: String?
        var tag: String?
        var androidPriority: String?
        var ttl: String?
        var apnsPushType: String?
        var apnsCollapseID: String?
        var title: String?
        var body: String?
        /// Bytes of the `message` value in the request body.
        var messageRange: Range<Int>
        /// Bytes of the target's value (its string literal) in the request body.
        var targetRange: Range<Int>
    }

    /// Size limit of the `message` JSON text, its target left out, for token and FID messages.
    static let maxMessageBytes = 4096
    /// Size limit of the `message` JSON text, its target left out, for topic and condition messages.
    static let maxTopicMessageBytes = 2048

    static let invalidTokenMessage = "The registration token is not a valid FCM registration token"

    /// Validates one request body.
    /// - Parameter body: The request body bytes.
    func validate(body: [UInt8]) -> Result<Validated, Failure> {
        do {
            return .success(try validateThrowing(body: body))
        } catch {
            return .failure(error)
        }
    }

    private func validateThrowing(body: [UInt8]) throws(Failure) -> Validated {
        let root: SimulatorJSON
        do {
            root = try SimulatorJSON.parse(body)
        } catch {
            let description = "Invalid JSON payload received. Unexpected token at byte \(error.offset)."
            throw Failure(message: description, violations: [Violation(field: nil, description: description)], shape: .badRequest)
        }
        guard case .object = root else {
            let description = "Invalid JSON payload received. Expected an object at the request root."
            throw Failure(message: description, violations: [Violation(field: nil, description: description)], shape: .badRequest)
        }
        try Self.checkObject(root, schema: .sendRequest, path: "")

        let validateOnly: Bool
        if case .bool(let flag)? = Self.lastMember(root, "validate_only")?.value {
            validateOnly = flag
        } else {
            validateOnly = false
        }
        guard let messageMember = Self.lastMember(root, "message"), case .object = messageMember.value else {
            throw Self.badRequest(field: "message", "The message field is required.")
        }
        let message = messageMember.value

        // Exactly one target.
        var targets: [(kind: String, member: SimulatorJSON.Member)] = []
        for kind in ["token", "topic", "condition", "fid"] {
            if let member = Self.lastMember(message, kind), member.value != .null {
                targets.append((kind, member))
            }
        }
        guard let first = targets.first else {
            throw Self.badRequest(field: "message", "Recipient of the message is not set.")
        }
        guard targets.count == 1 else {
            throw Self.badRequest(
                field: "message",
                "Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set '\(targets[1].kind)'"
            )
        }
        let targetValue = first.member.value.stringValue ?? ""
        var target = targetValue
        switch first.kind {
        case "token", "fid":
            guard Self.isPlausibleToken(targetValue) else {
                throw Failure(
                    message: Self.invalidTokenMessage,
                    violations: [Violation(field: "message.\(first.kind)", description: "Invalid registration token")],
                    shape: .invalidToken
                )
            }
        case "topic":
            if target.hasPrefix("/topics/") { target.removeFirst("/topics/".count) }
            guard Self.isValidTopic(target) else {
                throw Self.badRequest(field: "message.topic", "Invalid topic name")
            }
        default:
            guard !target.isEmpty, target.utf8.count <= 1024 else {
                throw Self.badRequest(field: "message.condition", "Invalid condition expression")
            }
        }

        let limit = first.kind == "topic" || first.kind == "condition" ? Self.maxTopicMessageBytes : Self.maxMessageBytes
        // The payload, not the request: the `message` JSON text without its target member (`"token":"…"` and the comma
        // after or before it). PROTOCOLS.md §2.2 counts the payload's keys and values; a registration token's length
        // is not the sender's to choose, and Bugle's limit excludes it too.
        let targetBytes = first.member.valueRange.upperBound - first.member.keyStart
        let members = if case .object(let all) = message { all.count } else { 1 }
        let size = messageMember.valueRange.count - targetBytes - (members > 1 ? 1 : 0)
        guard size <= limit else {
            throw Failure(
                message: "Message is too big: \(size) bytes, the limit is \(limit) bytes.",
                violations: [],
                shape: .tooBig
            )
        }

        let android = Self.lastMember(message, "android")?.value
        let androidNotification = android.flatMap { Self.lastMember($0, "notification")?.value }
        let notification = Self.lastMember(message, "notification")?.value
        let apnsHeaders = (Self.lastMember(message, "apns")?.value).flatMap { Self.lastMember($0, "headers")?.value }
        return Validated(
            validateOnly: validateOnly,
            targetKind: first.kind,
            target: target,
            collapseKey: android.flatMap { Self.lastMember($0, "collapse_key")?.value.stringValue },
            tag: androidNotification.flatMap { Self.lastMember($0, "tag")?.value.stringValue },
            androidPriority: android.flatMap { Self.lastMember($0, "priority")?.value.stringValue },
            ttl: android.flatMap { Self.lastMember($0, "ttl")?.value.stringValue },
            apnsPushType: apnsHeaders.flatMap { Self.lastMember($0, "apns-push-type")?.value.stringValue },
            apnsCollapseID: apnsHeaders.flatMap { Self.lastMember($0, "apns-collapse-id")?.value.stringValue },
            title: notification.flatMap { Self.lastMember($0, "title")?.value.stringValue },
            body: notification.flatMap { Self.lastMember($0, "body")?.value.stringValue },
            messageRange: messageMember.valueRange,
            targetRange: first.member.valueRange
        )
    }

    // MARK: - Schema walk

    private static func checkObject(_ value: SimulatorJSON, schema: FCMMessageSchema, path: String) throws(Failure) {
        guard case .object(let members) = value else {
            throw typeError(path: path, kind: .object(schema), value: value)
        }
        for member in members {
            guard let field = schema.fields[member.key] else {
                let location = path.isEmpty ? "" : " at '\(path)'"
                let description =
                    "Invalid JSON payload received. Unknown name \(SimulatorJSON.quoted(member.key))\(location): Cannot find field."
                throw Failure(
                    message: description,
                    violations: [Violation(field: path.isEmpty ? nil : path, description: description)],
                    shape: .badRequest
                )
            }
            if member.value == .null { continue }
            let fieldPath = path.isEmpty ? field.canonical : path + "." + field.canonical
            try check(member.value, kind: field.kind, path: fieldPath)
        }
    }

    private static func check(_ value: SimulatorJSON, kind: FCMMessageSchema.Kind, path: String) throws(Failure) {
        switch kind {
        case .string:
            guard case .string = value else { throw typeError(path: path, kind: kind, value: value) }
        case .bool:
            guard case .bool = value else { throw typeError(path: path, kind: kind, value: value) }
        case .int32:
            switch value {
            case .number(let number):
                guard number == number.rounded(), abs(number) <= Double(Int32.max) else {
                    throw typeError(path: path, kind: kind, value: value)
                }
            case .string(let text):
                guard Int32(text) != nil else { throw typeError(path: path, kind: kind, value: value) }
            default:
                throw typeError(path: path, kind: kind, value: value)
            }
        case .number:
            switch value {
            case .number: break
            case .string(let text) where Double(text) != nil: break
            default: throw typeError(path: path, kind: kind, value: value)
            }
        case .stringMap(let dataPayload):
            guard case .object(let members) = value else { throw typeError(path: path, kind: kind, value: value) }
            for (index, member) in members.enumerated() {
                guard case .string = member.value else {
                    throw typeError(path: "\(path)[\(index)].value", kind: .string, value: member.value)
                }
                if dataPayload, isReservedDataKey(member.key) {
                    throw badRequest(field: path, "Invalid data payload key: \(member.key)")
                }
            }
        case .stringArray:
            guard case .array(let elements) = value else { throw typeError(path: path, kind: kind, value: value) }
            for (index, element) in elements.enumerated() {
                guard case .string = element else {
                    throw typeError(path: "\(path)[\(index)]", kind: .string, value: element)
                }
            }
        case .duration(let maxSeconds):
            guard case .string(let text) = value, let seconds = durationSeconds(text) else {
                throw typeError(path: path, kind: kind, value: value)
            }
            if let maxSeconds, seconds < 0 || seconds > maxSeconds {
                throw badRequest(field: path, "The value must be between 0s and \(Int(maxSeconds))s.")
            }
        case .durationArray:
            guard case .array(let elements) = value else { throw typeError(path: path, kind: kind, value: value) }
            for (index, element) in elements.enumerated() {
                guard case .string(let text) = element, durationSeconds(text) != nil else {
                    throw typeError(path: "\(path)[\(index)]", kind: .duration(maxSeconds: nil), value: element)
                }
            }
        case .timestamp:
            guard case .string(let text) = value, isRFC3339(text) else {
                throw typeError(path: path, kind: kind, value: value)
            }
        case .enumeration(_, let names):
            switch value {
            case .string(let text):
                let upper = text.uppercased()
                guard names.contains(upper) else { throw typeError(path: path, kind: kind, value: value) }
            case .number(let number):
                guard number == number.rounded(), number >= 0, number < Double(names.count) else {
                    throw typeError(path: path, kind: kind, value: value)
                }
            default:
                throw typeError(path: path, kind: kind, value: value)
            }
        case .color:
            guard case .string(let text) = value else { throw typeError(path: path, kind: kind, value: value) }
            let utf8 = Array(text.utf8)
            guard utf8.count == 7, utf8[0] == UInt8(ascii: "#"), utf8.dropFirst().allSatisfy(isHex) else {
                throw badRequest(field: path, "Color must be in the form #rrggbb.")
            }
        case .httpsURL:
            guard case .string(let text) = value else { throw typeError(path: path, kind: kind, value: value) }
            guard text.lowercased().hasPrefix("https://"), text.utf8.count > "https://".utf8.count else {
                throw badRequest(field: path, "The link must be an HTTPS URL.")
            }
        case .analyticsLabel:
            guard case .string(let text) = value else { throw typeError(path: path, kind: kind, value: value) }
            guard (1...50).contains(text.utf8.count), text.utf8.allSatisfy(isLabelByte) else {
                throw badRequest(field: path, "Analytics label must match ^[a-zA-Z0-9-_.~%]{1,50}$.")
            }
        case .object(let schema):
            try checkObject(value, schema: schema, path: path)
        case .freeObject:
            guard case .object = value else { throw typeError(path: path, kind: kind, value: value) }
        case .apnsPayload:
            guard case .object = value else { throw typeError(path: path, kind: kind, value: value) }
            if let aps = value["aps"] {
                guard case .object = aps else {
                    throw badRequest(field: path + ".aps", "The aps dictionary must be an object.")
                }
            }
        }
    }

    // MARK: - Helpers

    /// The last member named by the canonical name or its lowerCamelCase spelling.
    static func lastMember(_ object: SimulatorJSON, _ canonical: String) -> SimulatorJSON.Member? {
        guard let members = object.members else { return nil }
        let camel = FCMMessageSchema.lowerCamel(canonical)
        return members.last(where: { $0.key == canonical || $0.key == camel })
    }

    private static func badRequest(field: String, _ description: String) -> Failure {
        Failure(message: description, violations: [Violation(field: field, description: description)], shape: .badRequest)
    }

    private static func typeError(path: String, kind: FCMMessageSchema.Kind, value: SimulatorJSON) -> Failure {
        let description = "Invalid value at '\(path)' (\(FCMMessageSchema.protoTypeName(of: kind))), \(render(value))"
        return Failure(
            message: "Invalid JSON payload received. " + description,
            violations: [Violation(field: path, description: description)],
            shape: .badRequest
        )
    }

    /// A short rendering of a wrong value (strings truncated, containers elided).
    private static func render(_ value: SimulatorJSON) -> String {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let number):
            if number == number.rounded(), abs(number) < 1e15 { return String(Int64(number)) }
            return String(number)
        case .string(let text): return SimulatorJSON.quoted(String(text.prefix(64)))
        case .array: return "[...]"
        case .object: return "{...}"
        }
    }

    /// `from`, `message_type` and keys starting with `google` or `gcm` are reserved.
    static func isReservedDataKey(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    /// A proto `Duration` string: `-?digits(.1-9 digits)?s`; returns seconds.
    static func durationSeconds(_ text: String) -> Double? {
        var utf8 = Array(text.utf8)
        guard utf8.last == UInt8(ascii: "s") else { return nil }
        utf8.removeLast()
        var index = 0
        if utf8.first == UInt8(ascii: "-") { index = 1 }
        let integerStart = index
        while index < utf8.count, isDigit(utf8[index]) { index += 1 }
        guard index > integerStart, index - integerStart <= 12 else { return nil }
        if index < utf8.count {
            guard utf8[index] == UInt8(ascii: ".") else { return nil }
            index += 1
            let fractionStart = index
            while index < utf8.count, isDigit(utf8[index]) { index += 1 }
            guard index > fractionStart, index - fractionStart <= 9 else { return nil }
        }
        guard index == utf8.count else { return nil }
        return Double(String(decoding: utf8, as: UTF8.self))
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
    static func isRFC3339(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 20 else { return false }
        let digitPositions = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        guard digitPositions.allSatisfy({ isDigit(utf8[$0]) }),
            utf8[4] == UInt8(ascii: "-"), utf8[7] == UInt8(ascii: "-"),
            utf8[10] == UInt8(ascii: "T") || utf8[10] == UInt8(ascii: "t"),
            utf8[13] == UInt8(ascii: ":"), utf8[16] == UInt8(ascii: ":")
        else {
            return false
        }
        var index = 19
        if utf8[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < utf8.count, isDigit(utf8[index]) { index += 1 }
            guard index > start else { return false }
        }
        guard index < utf8.count else { return false }
        if utf8[index] == UInt8(ascii: "Z") || utf8[index] == UInt8(ascii: "z") {
            return index + 1 == utf8.count
        }
        guard utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-"), index + 6 == utf8.count else {
            return false
        }
        return isDigit(utf8[index + 1]) && isDigit(utf8[index + 2]) && utf8[index + 3] == UInt8(ascii: ":")
            && isDigit(utf8[index + 4]) && isDigit(utf8[index + 5])
    }

    /// A registration token or FID the simulator accepts as well-formed: 1...4096 bytes, no whitespace,
    /// control characters or slashes. (Scripted prefixes decide the outcome afterwards.)
    static func isPlausibleToken(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard (1...4096).contains(utf8.count) else { return false }
        return utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "/") }
    }

    /// Topic names: `[a-zA-Z0-9-_.~%]{1,900}`.
    static func isValidTopic(_ topic: String) -> Bool {
        (1...900).contains(topic.utf8.count) && topic.utf8.allSatisfy(isLabelByte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private static func isHex(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }

    private static func isLabelByte(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "~") || byte == UInt8(ascii: "%")
    }
}
