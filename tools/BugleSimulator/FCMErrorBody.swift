/// Renders Google's RPC error model (PROTOCOLS.md §2.3):
/// `{"error":{"code":<http>,"message":...,"status":<canonical>,"details":[...]}}`, with details of types
/// `google.firebase.fcm.v1.FcmError`, `google.rpc.BadRequest`, `google.rpc.QuotaFailure` and
/// `google.rpc.ErrorInfo`, in the order given (the simulator varies it on purpose, as Google does).
enum FCMErrorBody {
    /// One entry of `details`.
    enum Detail: Sendable {
        /// `{"@type": ".../google.firebase.fcm.v1.FcmError", "errorCode": ...}`.
        case fcmError(String)
        /// `{"@type": ".../google.rpc.BadRequest", "fieldViolations": [...]}`.
        case badRequest([FCMMessageValidator.Violation])
        /// `{"@type": ".../google.rpc.QuotaFailure", "violations": [{"subject", "description"}]}`.
        case quotaFailure(subject: String, description: String)
        /// `{"@type": ".../google.rpc.ErrorInfo", "reason", "domain", "metadata"}`.
        case errorInfo(reason: String, metadata: [(String, String)])
    }

    /// The JSON text of an error answer.
    /// - Parameters:
    ///   - code: The HTTP status.
    ///   - message: Human-readable message (must never contain secrets).
    ///   - status: The canonical status (`INVALID_ARGUMENT`, ...).
    ///   - details: The details, in order.
    static func render(code: Int, message: String, status: String, details: [Detail]) -> String {
        var out = "{\"error\":{\"code\":\(code),\"message\":\(SimulatorJSON.quoted(message)),\"status\":\"\(status)\""
        out += ",\"details\":["
        for (index, detail) in details.enumerated() {
            if index > 0 { out += "," }
            out += render(detail)
        }
        out += "]}}"
        return out
    }

    private static func render(_ detail: Detail) -> String {
        switch detail {
        case .fcmError(let code):
            return "{\"@type\":\"type.googleapis.com/google.firebase.fcm.v1.FcmError\",\"errorCode\":\"\(code)\"}"
        case .badRequest(let violations):
            let items = violations.map { violation -> String in
                var item = "{"
                if let field = violation.field {
                    item += "\"field\":\(SimulatorJSON.quoted(field)),"
                }
                item += "\"description\":\(SimulatorJSON.quoted(violation.description))}"
                return item
            }
            return "{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\",\"fieldViolations\":[\(items.joined(separator: ","))]}"
        case .quotaFailure(let subject, let description):
            return "{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"subject\":"
                + SimulatorJSON.quoted(subject) + ",\"description\":" + SimulatorJSON.quoted(description) + "}]}"
        case .errorInfo(let reason, let metadata):
            let entries = metadata.map { "\(SimulatorJSON.quoted($0.0)):\(SimulatorJSON.quoted($0.1))" }
            return "{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\(SimulatorJSON.quoted(reason)),"
                + "\"domain\":\"googleapis.com\",\"metadata\":{\(entries.joined(separator: ","))}}"
        }
    }
}
