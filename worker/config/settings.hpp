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
// DOCSYNC_WARM, an array in the config file). A DOCSYNC_ variable that names no setting is ignored;
// DOCSYNC_GATEWAY_* are the gateway's (gateway/settings.hpp) and never read here.
// Parsing touches no global state besides reading the config file: it is called once, from main.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/defaults.hpp"
#include "common/log.hpp"
#include "settings/table.hpp"
#include "settings/units.hpp"

namespace docsync {

enum class LiveMode { All, Subscribers };

struct Settings {
    std::string dsn;                  // replication role: streams the slot, reads definitions
    std::string pool_dsn;             // harmless reader role: runs customer SQL (may be a standby)
    std::string slot = "docsync";     // logical replication slot name
    bool create_slot = false;         // create the slot when it does not exist
    std::string plugin = "docsync";   // the slot's output plugin: docsync | pgoutput | auto
    // pgoutput: how often the definitions' fingerprints are read again for DDL no event trigger saw
    std::chrono::milliseconds catalog_check{std::chrono::minutes(1)};
    // pgoutput: streamed in-progress transactions (protocol version 2) when the server has them
    bool pgoutput_streaming = true;
    std::uint64_t stream_memory = defaults::kStreamMemory;  // streamed transactions held in memory
    bool standby = false;             // wait as a hot spare while another worker holds the lease
    std::string sink = "stdout";      // stdout | file:/path | redis://host:port[/db]
    LiveMode live = LiveMode::All;    // which docs are kept current
    std::chrono::milliseconds live_poll{std::chrono::seconds(5)};          // subscriber poll period
    std::vector<std::string> warm;                                         // channels computed at start
    unsigned pool = 4;                                                     // reader connections
    std::chrono::milliseconds statement_timeout{std::chrono::seconds(5)};  // per customer query
    std::chrono::milliseconds drain_timeout{std::chrono::seconds(30)};     // SIGTERM to exit, at most
    std::uint64_t max_doc_bytes = 1ull << 20;                              // doc size cap
    // --patches on: send a doc that changed as a patch from the version published before
    // (docs/patches.md). Off by default: readers of Redis and JSONL keep getting whole docs.
    bool patches = false;
    std::uint64_t patch_memory = 64ull << 20;  // bound of the cache of last-published docs
    std::uint64_t patch_min_bytes = 1024;      // smaller docs are always sent whole
    std::uint64_t max_keys = 10000;                                        // keys per reverse lookup
    std::uint64_t key_check_rate = 50;  // server key checks per second for channels only subscribers name
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
using ParsedSettings = settings::Parsed<Settings>;

// argv[0] is the program name; envp is a null-terminated array of "NAME=value" (environ), may be null.
ParsedSettings parse_settings(int argc, const char* const* argv, const char* const* envp);

// Applies the logging settings (level, format, file). Returns an empty string, or the one error line
// for stderr (exit status 2) when the log file cannot be opened.
std::string apply_log_settings(const Settings& settings);

// The full --help text (also what the settings table of docs/worker.md describes).
std::string settings_help();

// SettingError, and the unit parsers (parse_size, parse_duration, parse_count, parse_bool) with their
// formatters, are the ones every docsync program shares: settings/units.hpp.

// Parses a JSON config file's text into (key, value-as-setting-text) pairs, validating keys against the
// known settings. `origin` names the file in messages. Throws SettingError with a complete message.
std::vector<std::pair<std::string, std::string>> parse_config_text(std::string_view json, std::string_view origin);

}  // namespace docsync
