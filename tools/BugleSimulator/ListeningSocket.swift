import NIOCore
import NIOPosix

/// Binds a simulator's listening socket and reads back its port (the one asked for, or the ephemeral one for 0).
enum ListeningSocket {
    /// Binds `bootstrap` to `host:port`. On any failure the socket is closed and `group` shut down, so a simulator
    /// that failed to start leaves nothing running.
    /// - Returns: The listening channel and its port.
    /// - Throws: The bind error, or ``APNsSimulator/LifecycleError`` when the bound socket has no port.
    static func bind(_ bootstrap: ServerBootstrap, host: String, port: Int, group: MultiThreadedEventLoopGroup) async throws -> (any Channel, Int) {
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        guard let bound = channel.localAddress?.port else {
            try? await channel.close()
            try? await group.shutdownGracefully()
            throw APNsSimulator.LifecycleError(description: "bound socket has no port")
        }
        return (channel, bound)
    }
}
