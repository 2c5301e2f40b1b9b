import BugleCore

/// Translates an FCM answer into a ``SendOutcome`` (RELIABILITY.md §3.5). Pure; tested from a table.
public enum FCMErrorClassifier {
    /// Classifies a non-200 answer.
    /// - Parameters:
    ///   - error: The parsed error.
    ///   - retryAfter: The `Retry-After` header.
    ///   - projectID: For messages.
    /// - Returns: The outcome.
    public static func classify(_ error: FCMError, retryAfter: Duration?, projectID: String) -> SendOutcome {
        switch error.reason {
        case .some(.unregistered):
            return .invalidToken(code: "UNREGISTERED", invalidSince: nil)
        case .some(.senderIDMismatch):
            return .invalidToken(code: "SENDER_ID_MISMATCH", invalidSince: nil)
        case .some(.invalidArgument):
            return invalidArgument(error)
        case .some(.quotaExceeded):
            return .retry(.provider, code: "QUOTA_EXCEEDED", after: retryAfter)
        case .some(.unavailable):
            return .retry(.provider, code: "UNAVAILABLE", after: retryAfter)
        case .some(.internalError):
            return .retry(.provider, code: "INTERNAL", after: retryAfter)
        case .some(.thirdPartyAuthError), .some(.apnsAuthError):
            return .halt(
                code: "THIRD_PARTY_AUTH_ERROR",
                message: "FCM says the project's APNs or web-push credentials are invalid or missing (Firebase console → Cloud Messaging)"
            )
        default:
            break
        }
        switch error.httpStatus {
        case 400:
            return invalidArgument(error)
        case 401:
            return .halt(code: "UNAUTHENTICATED", message: "FCM refused the access token even after a refresh")
        case 403:
            return .halt(code: "PERMISSION_DENIED", message: "the service account may not send messages for project \(projectID)")
        case 404:
            // Without the FcmError detail a 404 means the project or path is wrong: deactivating tokens on it
            // would wipe good devices.
            return .halt(code: "NOT_FOUND", message: "FCM has no project \(projectID) at this endpoint")
        case 429:
            return .retry(.provider, code: "QUOTA_EXCEEDED", after: retryAfter)
        case 500...599:
            return .retry(.provider, code: error.status ?? "HTTP_\(error.httpStatus)", after: retryAfter)
        default:
            return .rejected(code: error.reason?.rawValue ?? error.status ?? "HTTP_\(error.httpStatus)")
        }
    }

    private static func invalidArgument(_ error: FCMError) -> SendOutcome {
        if error.isAboutToken {
            return .invalidToken(code: "INVALID_TOKEN", invalidSince: nil)
        }
        return .rejected(code: "INVALID_ARGUMENT")
    }
}
