import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK

/// The decision logic shared by every connection of an ``APNsSimulator``: validation, JWT checks,
/// scripted outcomes, fault injection and recording. Immutable apart from the locked ledger and caches.
final class APNsSimulatorCore: Sendable {
    /// An answer to write on the stream.
    struct Response: Sendable {
        var headers: HPACKHeaders
        var body: ByteBuffer?
    }

    /// What to do with a request.
    enum Answer: Sendable {
        case respond(Response)
        case hang
    }

    let ledger: APNsSimulatorLedger
    let latency: TimeAmount?
    private let validator: APNsRequestValidator
    private let verifier: APNsJWTVerifier
    private let configuration: APNsSimulatorConfiguration
    private let jwtMaxAge: Double
    private let tokenUpdateMinInterval: Double
    /// Payload validity by SHA-256, so a campaign's identical payloads are parsed once.
    private let payloadCache = NIOLockedValueBox<[SHA256Digest: Bool]>([:])

    /// Creates the core.
    /// - Parameters:
    ///   - configuration: Simulator configuration.
    ///   - ledger: Shared records and counters.
    init(configuration: APNsSimulatorConfiguration, ledger: APNsSimulatorLedger) {
        self.configuration = configuration
        self.ledger = ledger
        self.validator = APNsRequestValidator(topic: configuration.topic, otherTopics: configuration.otherTopics)
        self.verifier = APNsJWTVerifier(teamID: configuration.teamID, keys: configuration.keys)
        self.latency = configuration.faults.latency.map { TimeAmount($0) }
        self.jwtMaxAge = Self.seconds(configuration.jwtMaxAge)
        self.tokenUpdateMinInterval = Self.seconds(configuration.tokenUpdateMinInterval)
    }

    /// Decides the answer to one complete request.
    /// - Parameters:
    ///   - headers: Request headers.
    ///   - body: Request body.
    ///   - connection: The connection's context.
    ///   - streamID: The HTTP/2 stream id.
    func handle(
        headers: HPACKHeaders,
        body: ByteBuffer?,
        connection: APNsConnectionContext,
        streamID: Int
    ) -> Answer {
        let answer = decide(headers: headers, body: body, connection: connection, streamID: streamID)
        if case .respond(let response) = answer { connection.answered(success: response.body == nil) }
        return answer
    }

    private func decide(
        headers: HPACKHeaders,
        body: ByteBuffer?,
        connection: APNsConnectionContext,
        streamID: Int
    ) -> Answer {
        let now = configuration.wallClock()
        let clientAPNsID = headers.first(name: "apns-id")
        let outcome = validator.validate(headers: headers, body: body) { authorization in
            self.authorize(authorization, connection: connection, now: now)
        }
        let accepted: APNsRequestValidator.Accepted
        switch outcome {
        case .rejected(let status, let reason):
            return reject(status: status, reason: reason, token: nil, apnsID: clientAPNsID, now: now)
        case .accepted(let value):
            accepted = value
        }
        let bodyBuffer = body ?? ByteBuffer()
        let digest = bodyBuffer.withUnsafeReadableBytes { SHA256.hash(data: $0) }
        guard isValidPayload(digest: digest, body: bodyBuffer) else {
            return reject(status: 400, reason: "BadPayload", token: accepted.token, apnsID: clientAPNsID, now: now)
        }
        if let script = APNsTokenScript.script(for: accepted.token) {
            switch script {
            case .hang:
                ledger.updateCounters { $0.hung += 1 }
                return .hang
            case .error(let status, let reason):
                return reject(status: status, reason: reason, token: accepted.token, apnsID: clientAPNsID, now: now)
            }
        }
        let faults = configuration.faults
        if faults.hangRatio > 0 || faults.serviceUnavailableRatio > 0 {
            let draw = ledger.nextUnitRandom()
            if draw < faults.hangRatio {
                ledger.updateCounters { $0.hung += 1 }
                return .hang
            }
            if draw < faults.hangRatio + faults.serviceUnavailableRatio {
                return reject(status: 503, reason: "ServiceUnavailable", token: accepted.token, apnsID: clientAPNsID, now: now)
            }
        }
        let apnsID = accepted.apnsID ?? UUID().uuidString
        let uniqueID = configuration.sandbox ? UUID().uuidString.lowercased() : nil
        ledger.recordAccepted(
            APNsRecord(
                token: String(accepted.token),
                apnsID: apnsID,
                collapseID: accepted.collapseID,
                pushType: accepted.pushType,
                payloadSHA256: digest.hexString,
                time: now,
                connectionID: connection.id,
                streamID: streamID,
                uniqueID: uniqueID
            )
        )
        var responseHeaders = HPACKHeaders()
        responseHeaders.reserveCapacity(3)
        responseHeaders.add(name: ":status", value: "200")
        responseHeaders.add(name: "apns-id", value: apnsID)
        if let uniqueID { responseHeaders.add(name: "apns-unique-id", value: uniqueID) }
        return .respond(Response(headers: responseHeaders, body: nil))
    }

    private func authorize(
        _ authorization: Substring?,
        connection: APNsConnectionContext,
        now: Double
    ) -> (status: Int, reason: String)? {
        // Certificate mode: the TLS handshake already checked the client's certificate.
        if configuration.clientCAPEM != nil { return nil }
        guard let authorization, !authorization.isEmpty else { return (403, "MissingProviderToken") }
        guard authorization.utf8.count > 7,
            authorization.prefix(7).lowercased() == "bearer "
        else {
            return (403, "InvalidProviderToken")
        }
        let jwt = authorization.dropFirst(7)
        guard case .valid(let issuedAt, _) = verifier.verify(String(jwt)) else {
            return (403, "InvalidProviderToken")
        }
        if now - Double(issuedAt) > jwtMaxAge {
            return (403, "ExpiredProviderToken")
        }
        guard connection.bindToken(jwt, now: now, minInterval: tokenUpdateMinInterval) else {
            return (429, "TooManyProviderTokenUpdates")
        }
        return nil
    }

    private func isValidPayload(digest: SHA256Digest, body: ByteBuffer) -> Bool {
        if let known = payloadCache.withLockedValue({ $0[digest] }) {
            return known
        }
        let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))
        let valid = (object as? [String: Any])?["aps"] is [String: Any]
        payloadCache.withLockedValue { cache in
            if cache.count >= 4096 { cache.removeAll(keepingCapacity: true) }
            cache[digest] = valid
        }
        return valid
    }

    private func reject(status: Int, reason: String, token: Substring?, apnsID: String?, now: Double) -> Answer {
        ledger.recordRejected(APNsRejection(time: now, token: token.map(String.init), status: status, reason: reason))
        var body = ByteBuffer()
        if status == 410 {
            body.writeString("{\"reason\":\"\(reason)\",\"timestamp\":\(Int64(now * 1000))}")
        } else {
            body.writeString("{\"reason\":\"\(reason)\"}")
        }
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: String(status))
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "apns-id", value: apnsID ?? UUID().uuidString)
        if configuration.sandbox { headers.add(name: "apns-unique-id", value: UUID().uuidString.lowercased()) }
        return .respond(Response(headers: headers, body: body))
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension SHA256Digest {
    /// Lowercase hex.
    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
