#pragma once
// Logging: one line per event, with time and level, to stderr (or the log file). Thread-safe.
//   log_info("stream", "connected to " + host);
// Text lines: `2026-11-29T18:01:13.123Z INFO [component] message`.
// JSON lines (set_log_format(LogFormat::Json)): {"time":"2026-11-29T18:01:13.123Z","level":"info",
// "component":"stream","message":"connected to …"}; invalid UTF-8 in a message becomes U+FFFD.

#include <string>
#include <string_view>

namespace docsync {

enum class LogLevel { Debug, Info, Warning, Error };
enum class LogFormat { Text, Json };

// "debug", "info", "warning", "error": the level as settings and JSON lines spell it.
const char* log_level_name(LogLevel level);

// The minimum level written (default Info).
void set_log_level(LogLevel level);
// Text (default) or one JSON object per line.
void set_log_format(LogFormat format);
// Appends the log to `path` (created with mode 0640) instead of stderr; an empty path means stderr.
// Call at startup, before other threads log. Returns an empty string on success, else the reason
// the file cannot be opened.
std::string set_log_file(const std::string& path);
// Reopens the log file at the same path (after logrotate moved it); a no-op when logging to stderr.
// Async-signal-safe: a SIGHUP handler may call it. A failure keeps the old file and is logged by the
// next log() call.
void reopen_log();
// Whether a line at `level` would be written (to skip building costly debug messages).
bool log_enabled(LogLevel level);
// One line for one event.
void log(LogLevel level, std::string_view component, std::string_view message);

inline void log_debug(std::string_view component, std::string_view message) { log(LogLevel::Debug, component, message); }
inline void log_info(std::string_view component, std::string_view message) { log(LogLevel::Info, component, message); }
inline void log_warning(std::string_view component, std::string_view message) { log(LogLevel::Warning, component, message); }
inline void log_error(std::string_view component, std::string_view message) { log(LogLevel::Error, component, message); }

// The line log() writes for an event at `stamp` (no trailing newline), exposed for tests.
std::string format_log_line(LogFormat format, LogLevel level, std::string_view stamp, std::string_view component,
                            std::string_view message);

}  // namespace docsync
