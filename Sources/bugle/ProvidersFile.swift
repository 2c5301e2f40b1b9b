import BugleCore
import Foundation

/// The providers file a command sends through: `--providers`, else the campaign's `providers:` (resolved against the
/// campaign file's folder).
enum ProvidersFile {
    /// Loads it.
    /// - Parameters:
    ///   - override: `--providers`, when given.
    ///   - campaign: The campaign (its `providers:` and the file it came from).
    ///   - missing: What to say when neither names a file.
    /// - Throws: ``UsageError`` when none is named, or when the campaign's `providers:` names a file that does not
    ///   exist (it read `providers.yaml:1:1: file not found`, naming neither the campaign nor its key); the loader's
    ///   errors otherwise.
    static func load(override: String?, campaign: Campaign, missing: String) throws -> (path: String, settings: ProviderSettings) {
        guard let path = override ?? campaign.providersPath else { throw UsageError(missing) }
        if override == nil, !FileManager.default.fileExists(atPath: path) {
            throw UsageError(
                "\(campaign.sourcePath ?? "the campaign"): providers: names \(path), which does not exist; pass --providers FILE, or write it "
                    + "(`bugle-sim certs DIR` writes one for the simulator)")
        }
        return (path, try ProviderSettingsLoader.load(path: path))
    }
}
