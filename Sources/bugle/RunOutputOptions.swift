import ArgumentParser
import Logging

/// How a sending command shows a run: progress, machine-readable summary, metrics.
struct RunOutputOptions: ParsableArguments {
    @Flag(help: "No progress display.")
    var quiet = false

    @Flag(help: "Print the final summary as JSON on stdout (everything else goes to stderr).")
    var json = false

    @Option(name: .customLong("metrics-port"), parsing: .unconditional, help: "Serve Prometheus metrics at http://127.0.0.1:PORT/metrics during the run.")
    var metricsPort: Int?

    @Option(
        name: .customLong("progress-interval"),
        parsing: .unconditional,
        help: "Seconds between progress updates (default: 0.5 on a terminal, 5 otherwise)."
    )
    var progressInterval: Double?

    /// Installs the metrics backend when `--metrics-port` is given (before lanes are built).
    func prepareMetrics() {
        if metricsPort != nil { MetricsExporter.bootstrap() }
    }

    /// Starts the process's metrics endpoint (``MetricsExporter/serve(port:logger:)``) when `--metrics-port` is given:
    /// called before a command writes its run, and held from there to the end, so a port in use leaves nothing behind.
    /// (A check that bound the port and closed it again left a `ready` run when another process took the port while
    /// the segment was read.)
    /// Says where the endpoint is once, when it starts (it was said again each time a worker came back from a database
    /// outage).
    func startMetrics(logger: Logger) async throws {
        guard let port = metricsPort else { return }
        let (exporter, started) = try await MetricsExporter.serve(port: port, logger: logger)
        if started { Console(jsonOnStdout: json).say("metrics at http://127.0.0.1:\(exporter.port)/metrics") }
    }

    func validate() throws {
        if let metricsPort, !(0...65_535).contains(metricsPort) {
            throw ValidationError("--metrics-port must be within 0...65535 (0 picks a free port)")
        }
        if let progressInterval, !(0.05...3600).contains(progressInterval) {
            throw ValidationError("--progress-interval must be within 0.05...3600 seconds")
        }
    }
}
