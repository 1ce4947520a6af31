#pragma once
// The gateway's settings: every flag, its JSON config file key and its DOCSYNC_GATEWAY_* environment
// variable, read by the same rules as the worker's (settings/table.hpp) and merged by the same
// precedence: flag > environment > config file > default.
//
//   auto parsed = docsync::gateway::parse_gateway_settings(argc, argv, environ);
//   if (!parsed.run) { print parsed.output / parsed.error; return parsed.exit_code; }
//   use parsed.settings
//
// Setting names are the long flag names without dashes: `--max-connections 50000`,
// `DOCSYNC_GATEWAY_MAX_CONNECTIONS=50000`, `{"max-connections": 50000}`. Durations take ms, s, min,
// h, d. `--public` and `--allow-origin` may be given several times (one value per line in their
// variables, an array in the config file). The worker's DOCSYNC_* variables are not read, and the
// worker does not read DOCSYNC_GATEWAY_*: one environment can hold both.
// Parsing reads the config file and the --jwt-secret-file, and touches no global state: it is called
// once, from main.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "settings/table.hpp"

namespace docsync::gateway {

// The cores this process may run on (at least 1): the default of --threads.
unsigned default_threads();

struct GatewaySettings {
    // The Redis the worker publishes to (its --sink): redis:// or redis-cluster://, checked at parse time.
    std::string redis = "redis://127.0.0.1:6379";
    // Where HTTP is served: an IP address (IPv6 without brackets) or a host name; port 0: any free port.
    std::string listen_address = "127.0.0.1";
    std::uint16_t listen_port = 8080;
    std::string jwt_secret_file;  // empty: no token is accepted, only public channels can be followed
    std::string jwt_secret;       // the key read from jwt_secret_file; never printed
    std::vector<std::string> public_patterns;  // channel patterns open without a token
    std::vector<std::string> allow_origins;    // CORS: origins as browsers send them, or "*"
    std::size_t max_connections = 20000;       // client connections open at once
    std::size_t max_channels = 100;            // channels one SSE stream or WebSocket may follow
    // A client whose socket has taken no bytes for this long while a doc waits for it is disconnected.
    std::chrono::milliseconds slow_client_timeout{std::chrono::seconds(30)};
    std::chrono::milliseconds heartbeat{std::chrono::seconds(15)};  // SSE comment, WebSocket ping
    // A WebSocket following no channel, or an HTTP connection sending no request, for this long is closed.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(10)};
    unsigned threads = default_threads();  // I/O threads, each serving a share of the connections
    unsigned warm_rate = 100;        // docsync:warm requests per second, at most
    // Followed channels whose doc Redis does not hold that are subscribed at once, at most (each
    // one a doc the worker computes and keeps live under --live subscribers).
    std::size_t max_missing_docs = 1000;
    // Envelopes received from Redis and not yet handed to the clients' threads, at most (one per
    // channel, the newest; a channel whose doc does not fit is read again from Redis).
    std::size_t max_queued_bytes = 64 * 1024 * 1024;
    unsigned redis_connections = 2;  // connections for reads (GET) besides the subscriber
    std::string config;              // JSON config file, if any
    LogFormat log_format = LogFormat::Text;
    std::string log_file;  // empty: stderr
    LogLevel log_level = LogLevel::Info;
};

// What main does with the command line: run with `settings`, or print `output` (to stdout: --help,
// --version) or `error` (to stderr: one line naming the setting, the value and the fix) and exit.
using ParsedGatewaySettings = settings::Parsed<GatewaySettings>;

// argv[0] is the program name; envp is a null-terminated array of "NAME=value" (environ), may be null.
ParsedGatewaySettings parse_gateway_settings(int argc, const char* const* argv, const char* const* envp);

// Applies the logging settings (level, format, file). Returns an empty string, or the one error line
// for stderr (exit status 2) when the log file cannot be opened.
std::string apply_gateway_log_settings(const GatewaySettings& settings);

// The full --help text.
std::string gateway_settings_help();

}  // namespace docsync::gateway
