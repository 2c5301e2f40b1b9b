import BugleCore

extension ProviderKind {
    /// How many lanes there are: per-lane state in the breakers is a fixed array indexed by ``laneSlot`` (a counter
    /// update on every answer, no hashing).
    static let laneSlots = 4

    /// This lane's index in per-lane arrays.
    var laneSlot: Int {
        switch self {
        case .apns: 0
        case .fcm: 1
        case .legacyAPNs: 2
        case .none: 3
        }
    }

    /// The lane's name in messages.
    var laneName: String {
        switch self {
        case .apns: "APNs"
        case .fcm: "FCM"
        case .legacyAPNs: "legacy APNs"
        case .none: "test"
        }
    }
}
