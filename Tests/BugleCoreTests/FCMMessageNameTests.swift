import Foundation
import NIOCore
import Testing

@testable import BugleFCM

/// FCM's success answer is read directly when it has the exact `{"name": "..."}` shape, and by `JSONSerialization`
/// otherwise: both must give the answer a general JSON parse gives.
@Suite struct FCMMessageNameTests {
    /// What a general JSON parse reads as the name.
    private static func reference(_ text: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return nil }
        return object["name"] as? String
    }

    static let bodies: [String] = [
        #"{"name":"projects/bugle-demo/messages/0:1732400000000000%31bd1c9631bd1c96"}"#,
        #"{ "name" : "projects/p/messages/2" }"# + "\n",
        "\t{\r\n\"name\":\"projects/p/messages/3\"\n}\n",
        #"{"name":"projects\/p\/messages\/4"}"#,
        #"{"name":"caf\u00e9"}"#,
        #"{"name":"café ✓"}"#,
        #"{"other":1,"name":"projects/p/messages/5"}"#,
        #"{"name":"projects/p/messages/6","other":true}"#,
        #"{"name":5}"#,
        #"{"name":null}"#,
        #"{"name":""}"#,
        #"{"Name":"x"}"#,
        #"{"name":"abc"#,
        #"{"name":"abc"} x"#,
        #"{"name":"a"b"}"#,
        "{\"name\":\"tab\there\"}",
        #"["name"]"#,
        "oops",
        " ",
    ]

    @Test("reads what a general JSON parse reads", arguments: bodies)
    func agreesWithJSONSerialization(_ text: String) {
        #expect(FCMMessageName.read(ByteBuffer(string: text)) == Self.reference(text))
    }

    @Test func readsTheUsualAnswer() {
        let body = ByteBuffer(string: #"{"name": "projects/bugle-demo/messages/42"}"#)
        #expect(FCMMessageName.read(body) == "projects/bugle-demo/messages/42")
    }

    @Test func noBodyHasNoName() {
        #expect(FCMMessageName.read(nil) == nil)
        #expect(FCMMessageName.read(ByteBuffer()) == nil)
    }

    @Test func invalidUTF8HasNoName() {
        var body = ByteBuffer(string: #"{"name":""#)
        body.writeBytes([0xC3, 0x28])
        body.writeString(#""}"#)
        #expect(FCMMessageName.read(body) == nil)
    }
}
