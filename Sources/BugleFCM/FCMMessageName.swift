import Foundation
import NIOCore

/// Reads the message name from FCM's success answer, `{"name": "projects/<id>/messages/<id>"}`.
///
/// Every delivered Android or web notification has such an answer, and a general JSON parse of it was about 3% of
/// Bugle's CPU in an FCM run. The exact shape (one `name` member whose string has no escapes) is read directly; any
/// other body is handed to `JSONSerialization`, so the result is the same for every input.
enum FCMMessageName {
    /// The `name` member of a success body, or nil when the body is not a JSON object with a string `name`.
    static func read(_ body: ByteBuffer?) -> String? {
        guard let body, body.readableBytes > 0 else { return nil }
        // A ByteBuffer's bytes are always contiguous; without them the general path still answers.
        if let name = body.readableBytesView.withContiguousStorageIfAvailable(readExactShape) ?? nil {
            return name
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] else {
            return nil
        }
        return object["name"] as? String
    }

    /// `{ "name" : "<bytes without quote, backslash or control characters>" }` with optional JSON whitespace, or nil.
    private static func readExactShape(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var index = 0
        func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }
        func expect(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] {
                return false
            }
            index += count
            return true
        }
        skipSpace()
        guard expect("{") else { return nil }
        skipSpace()
        guard expect("\"name\"") else { return nil }
        skipSpace()
        guard expect(":") else { return nil }
        skipSpace()
        guard expect("\"") else { return nil }
        let start = index
        while index < bytes.count, bytes[index] != 0x22 {
            // Escapes and control characters take the general path.
            guard bytes[index] != 0x5C, bytes[index] >= 0x20 else { return nil }
            index += 1
        }
        guard index < bytes.count else { return nil }
        let end = index
        index += 1
        skipSpace()
        guard expect("}") else { return nil }
        skipSpace()
        guard index == bytes.count else { return nil }
        // Invalid UTF-8 takes the general path too (which rejects it).
        return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }
}
