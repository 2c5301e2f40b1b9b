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

    /// Refuses a `--metrics-port` already in use by opening it once and closing it again: called before a command writes
    /// its run, so a port in use leaves nothing behind (it used to leave a `ready` run).
    func checkMetricsPort(logger: Logger) async throws {
        if let port = metricsPort, port != 0 { await (try await MetricsExporter.start(port: port, logger: logger)).stop() }
    }

    func validate() throws {
        if let metricsPort, !(1...65_535).contains(metricsPort) {
            throw ValidationError("--metrics-port must be within 1...65535")
        }
        if let progressInterval, !(0.05...3600).contains(progressInterval) {
            throw ValidationError("--progress-interval must be within 0.05...3600 seconds")
        }
    }
}
