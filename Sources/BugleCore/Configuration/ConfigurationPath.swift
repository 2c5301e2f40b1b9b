/// Lexical path handling for file references inside configuration files (no file-system access).
enum ConfigurationPath {
    /// Resolves `path` against the folder of the configuration file that mentions it.
    ///
    /// Absolute paths are returned normalized; relative ones are joined to `file`'s folder, then `.` and
    /// `..` components are folded lexically (`campaigns/../providers.yaml` becomes `providers.yaml`).
    /// - Parameters:
    ///   - path: The path as written in the file.
    ///   - file: The configuration file's own path.
    static func resolve(_ path: String, relativeToFileAt file: String) -> String {
        if path.hasPrefix("/") { return normalize(path) }
        guard let slash = file.lastIndex(of: "/") else { return normalize(path) }
        let folder = String(file[..<slash])
        return normalize((folder.isEmpty ? "" : folder) + "/" + path)
    }

    /// Folds `.`, `..` and repeated slashes without touching the file system.
    /// - Parameter path: A relative or absolute path.
    static func normalize(_ path: String) -> String {
        let isAbsolute = path.hasPrefix("/")
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".":
                continue
            case "..":
                if let last = parts.last, last != ".." {
                    parts.removeLast()
                } else if !isAbsolute {
                    parts.append(part)
                }
            default:
                parts.append(part)
            }
        }
        let joined = parts.joined(separator: "/")
        if isAbsolute { return "/" + joined }
        return joined.isEmpty ? "." : joined
    }
}
