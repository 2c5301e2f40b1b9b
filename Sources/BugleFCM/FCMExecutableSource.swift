import Foundation

/// An `executable` `credential_source` of an `external_account` configuration: a program that prints the subject token
/// (an OIDC ID token or a SAML response) from an identity provider Bugle does not speak to itself (Vault, Okta, a
/// company's own). Google's libraries run such a program only when `GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1`, and so
/// does Bugle (checked at start).
///
/// The program is run without a shell: `command` is split at spaces, and its first word must be an absolute path. It
/// gets `GOOGLE_EXTERNAL_ACCOUNT_AUDIENCE`, `GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE`, `GOOGLE_EXTERNAL_ACCOUNT_INTERACTIVE=0`,
/// and, when they apply, `GOOGLE_EXTERNAL_ACCOUNT_IMPERSONATED_EMAIL` and `GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE`, and must
/// print, within `timeout_millis` (default 30,000; 5,000 to 120,000), one JSON response:
/// `{"version": 1, "success": true, "token_type": …, "id_token" | "saml_response": …, "expiration_time": …}`, or
/// `{"version": 1, "success": false, "code": …, "message": …}`. With `output_file`, a still-valid response the program
/// left there is used without running it again.
public struct FCMExecutableSource: Sendable, Equatable {
    /// The program and its arguments.
    public var command: [String]
    /// How long the program may run.
    public var timeout: Duration
    /// Where the program caches its response (`output_file`), if anywhere.
    public var outputFile: String?

    /// The subject token types a program may print.
    static let subjectTokenTypes: Set<String> = [
        "urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token", "urn:ietf:params:oauth:token-type:saml2",
    ]

    /// The variable that must be `1` for Bugle to run the program.
    public static let allowVariable = "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES"

    /// A source running `command`.
    public init(command: [String], timeout: Duration, outputFile: String?) {
        self.command = command
        self.timeout = timeout
        self.outputFile = outputFile
    }

    /// Parses the `credential_source.executable` object of `path`.
    static func parse(_ object: [String: Any], path: String) throws(FCMConfigurationError) -> FCMExecutableSource {
        guard let text = object["command"] as? String else {
            throw .malformedExternalAccount(path: path, detail: "missing or empty \"credential_source.executable.command\"")
        }
        let command = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard let program = command.first, program.hasPrefix("/") else {
            throw .malformedExternalAccount(path: path, detail: "\"credential_source.executable.command\" must start with the program's absolute path")
        }
        var milliseconds = 30_000
        if let value = object["timeout_millis"] {
            guard let number = value as? Int, (5_000...120_000).contains(number) else {
                throw .malformedExternalAccount(path: path, detail: "\"credential_source.executable.timeout_millis\" must be 5000 to 120000")
            }
            milliseconds = number
        }
        var outputFile: String?
        if let value = object["output_file"] {
            guard let file = value as? String, file.hasPrefix("/") else {
                throw .malformedExternalAccount(path: path, detail: "\"credential_source.executable.output_file\" must be an absolute path")
            }
            outputFile = file
        }
        return FCMExecutableSource(command: command, timeout: .milliseconds(milliseconds), outputFile: outputFile)
    }
}
