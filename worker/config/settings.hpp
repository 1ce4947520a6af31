#pragma once
// The worker's settings: every flag, its JSON config file key and its DOCSYNC_* environment
// variable, merged by one precedence rule: flag > environment > config file > default.
//
//   auto parsed = docsync::parse_settings(argc, argv, environ);
//   if (!parsed.run) { print parsed.output / parsed.error; return parsed.exit_code; }
//   use parsed.settings
//
// Setting names are the long flag names without dashes: `--max-retained-wal 1GB`,
// `DOCSYNC_MAX_RETAINED_WAL=1GB`, `{"max-retained-wal": "1GB"}`. Sizes take B, kB, MB, GB, TB
// (powers of 1024, case-insensitive, KiB… too; a bare number is bytes); durations take ms, s, min,
// h, d; no other unit is accepted. `--warm` may be given several times (one channel per line in
// DOCSYNC_WARM, an array in the config file).
// Parsing touches no global state besides reading the config file: it is called once, from main.

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/defaults.hpp"
#include "common/log.hpp"

namespace docsync {

enum class LiveMode { All, Subscribers };

struct Settings {
    std::string dsn;                  // replication role: streams the slot, reads definitions
    std::string pool_dsn;             // harmless reader role: runs customer SQL (may be a standby)
    std::string slot = "docsync";     // logical replication slot name
    bool create_slot = false;         // create the slot when it does not exist
    bool standby = false;             // wait as a hot spare while another worker holds the lease
    std::string sink = "stdout";      // stdout | file:/path | redis://host:port[/db]
    LiveMode live = LiveMode::All;    // which docs are kept current
    std::chrono::milliseconds live_poll{std::chrono::seconds(5)};          // subscriber poll period
    std::vector<std::string> warm;                                         // channels computed at start
    unsigned pool = 4;                                                     // reader connections
    std::chrono::milliseconds statement_timeout{std::chrono::seconds(5)};  // per customer query
    std::chrono::milliseconds drain_timeout{std::chrono::seconds(30)};     // SIGTERM to exit, at most
    std::uint64_t max_doc_bytes = 1ull << 20;                              // doc size cap
    std::uint64_t max_keys = 10000;                                        // keys per reverse lookup
    std::uint64_t batch = defaults::kBatch;                                // docs per statement
    std::uint64_t max_retained_wal = defaults::kMaxRetainedWal;            // WAL safety valve
    // --audit-rate: percent of the live docs recomputed and compared with the sink per minute; 0: off.
    double audit_rate = 1.0;
    bool audit_rate_given = false;    // set by a flag, variable or config key rather than defaulted
    std::string status_dir = "/run/docsync";                               // status file directory
    std::chrono::milliseconds status_interval{defaults::kStatusInterval};  // standby status updates
    std::uint64_t max_pending_txns = defaults::kMaxPendingTxns;            // backpressure: txns
    std::uint64_t max_pending_bytes = defaults::kMaxPendingBytes;          // backpressure: bytes
    std::string config;                                                    // JSON config file, if any
    bool allow_unsafe_pool = false;   // skip the pool role check (throwaway setups only)
    LogFormat log_format = LogFormat::Text;
    std::string log_file;             // empty: stderr
    LogLevel log_level = LogLevel::Info;
    unsigned threads = 4;             // compute threads (default: the value of pool)
    // --metrics-listen ADDR:PORT: where GET /metrics is served; an empty address: not served.
    std::string metrics_address;
    std::uint16_t metrics_port = 0;
};

// What main does with the command line: run with `settings`, or print `output` (to stdout: --help,
// --version) or `error` (to stderr: one line naming the setting and the fix) and exit.
struct ParsedSettings {
    bool run = false;
    int exit_code = 0;   // when !run: 0 after --help/--version, 2 for invalid settings
    std::string output;  // text for stdout
    std::string error;   // one line for stderr (no trailing newline)
    Settings settings;
};

// argv[0] is the program name; envp is a null-terminated array of "NAME=value" (environ), may be null.
ParsedSettings parse_settings(int argc, const char* const* argv, const char* const* envp);

// Applies the logging settings (level, format, file). Returns an empty string, or the one error line
// for stderr (exit status 2) when the log file cannot be opened.
std::string apply_log_settings(const Settings& settings);

// The full --help text (also what the README's settings table describes).
std::string settings_help();

// An invalid value: the message says what is wrong and how to fix it, without naming the setting
// (the caller adds where the value came from).
class SettingError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Unit parsers, exposed for tests and the fuzz target. Each throws SettingError.
// Sizes: "1GB", "512kB", "4096", "16 MB" (powers of 1024; B kB MB GB TB, case-insensitive; also KiB…).
// Other units ("1G", "1PB") are refused, naming the spelling to use.
std::uint64_t parse_size(std::string_view text);
// Durations: "5s", "250ms", "2min", "1h", "1d" (a unit is required; "5sec" and "5m" are refused).
std::chrono::milliseconds parse_duration(std::string_view text);
// Unsigned decimal counts: "10000".
std::uint64_t parse_count(std::string_view text);
// Booleans for environment variables: true/false, yes/no, on/off, 1/0 (case-insensitive).
bool parse_bool(std::string_view text);
// Formats a byte count the way --help shows defaults: "1GB", "512kB", "1000B".
std::string format_size(std::uint64_t bytes);
// Formats a duration: "5s", "250ms", "2min".
std::string format_duration(std::chrono::milliseconds duration);

// Parses a JSON config file's text into (key, value-as-setting-text) pairs, validating keys against the
// known settings. `origin` names the file in messages. Throws SettingError with a complete message.
std::vector<std::pair<std::string, std::string>> parse_config_text(std::string_view json, std::string_view origin);

}  // namespace docsync
