import BugleCore

/// A claimed recipient's device as `bugle.devices` holds it now, read at the claim for the devices that were
/// deactivated, moved to another user or deleted since the segment was read (RELIABILITY.md §3.3).
struct CurrentDevice: Equatable {
    /// Nil when the device's row is gone.
    var token: String?
    var userID: String?
    var isActive: Bool?

    /// Why the recipient must not be sent, as its ledger `outcome_code`; nil when it may be.
    ///
    /// A deactivated row counts only while it still holds the recipient's token (a token registered again under the
    /// same row is a new registration). A row that now belongs to another user is not sent the old user's copy, even
    /// under the same token; a row deleted since the read is not sent at all.
    func skipCode(for recipient: ClaimedRecipient) -> String? {
        guard let token else { return "device_deleted" }
        if isActive == false, token == recipient.token { return "device_inactive" }
        if let userID, userID != recipient.userID { return "device_moved" }
        return nil
    }
}
