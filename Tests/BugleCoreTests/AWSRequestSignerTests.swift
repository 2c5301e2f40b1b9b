import Foundation
import Testing

@testable import BugleFCM

/// Signature Version 4 against known answers: AWS's own test-suite request (`get-vanilla`), and two
/// `GetCallerIdentity` requests as workload identity federation signs them, whose signatures botocore (AWS's Python
/// SDK) computed for the same keys, times and headers.
@Suite("AWS Signature Version 4")
struct AWSRequestSignerTests {
    static let audience = "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/bugle/providers/aws"

    static func date(_ stamp: String) throws -> Date {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return try #require(formatter.date(from: stamp))
    }

    @Test("AWS's get-vanilla test request")
    func vanilla() throws {
        let signer = AWSRequestSigner(
            credentials: .init(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            region: "us-east-1", service: "service")
        let url = try #require(URL(string: "https://example.amazonaws.com/"))
        let signed = signer.sign(method: "GET", url: url, headers: [:], date: try Self.date("20150830T123600Z"))
        #expect(
            signed.headers["Authorization"]
                == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    }

    @Test("GetCallerIdentity with the pool provider signed in, with and without a session token (botocore's signatures)")
    func getCallerIdentity() throws {
        let longLived = AWSRequestSigner(
            credentials: .init(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            region: "us-east-2", service: "sts")
        let east = try #require(URL(string: "https://sts.us-east-2.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"))
        let first = longLived.sign(method: "POST", url: east, headers: ["x-goog-cloud-target-resource": Self.audience], date: try Self.date("20261127T103000Z"))
        #expect(first.headers["host"] == "sts.us-east-2.amazonaws.com" && first.headers["x-amz-date"] == "20261127T103000Z")
        #expect(first.headers["x-amz-security-token"] == nil)
        #expect(
            first.headers["Authorization"]
                == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261127/us-east-2/sts/aws4_request, SignedHeaders=host;x-amz-date;x-goog-cloud-target-resource, Signature=77323109512af9124a043c273a22b519166212d1b0fb54452803ccd082ce122f")

        let temporary = AWSRequestSigner(
            credentials: .init(accessKeyID: "ASIAEXAMPLE", secretAccessKey: "secret/KEY+example", sessionToken: "IQoJb3JpZ2luX2VjE-session-token=="),
            region: "eu-west-1", service: "sts")
        let west = try #require(URL(string: "https://sts.eu-west-1.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"))
        let second = temporary.sign(method: "POST", url: west, headers: ["x-goog-cloud-target-resource": Self.audience], date: try Self.date("20261127T235959Z"))
        #expect(second.headers["x-amz-security-token"] == "IQoJb3JpZ2luX2VjE-session-token==")
        #expect(
            second.headers["Authorization"]
                == "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261127/eu-west-1/sts/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token;x-goog-cloud-target-resource, Signature=91cd000e58eef1543c61c3efaa4cee8a8dcab0706389620f17b0fe8081862920")
    }

    @Test("the subject token: URL-encoded JSON of url, method and the headers sorted by name")
    func subjectToken() throws {
        let token = FCMAWSSubjectToken.serialize(
            url: "https://sts.us-east-2.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15",
            headers: ["x-amz-date": "20261127T103000Z", "Authorization": "AWS4-HMAC-SHA256 x", "host": "sts.us-east-2.amazonaws.com"])
        #expect(!token.contains("{") && !token.contains("\"") && !token.contains(" "))
        let json = try #require(token.removingPercentEncoding)
        #expect(
            json == #"{"headers":[{"key":"Authorization","value":"AWS4-HMAC-SHA256 x"},{"key":"host","value":"sts.us-east-2.amazonaws.com"},{"key":"x-amz-date","value":"20261127T103000Z"}],"method":"POST","url":"https://sts.us-east-2.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"}"#)
        #expect(AWSRequestSigner.canonicalQuery("Version=2011-06-15&Action=GetCallerIdentity&b=a%20b") == "Action=GetCallerIdentity&Version=2011-06-15&b=a%20b")
    }
}
