#pragma once
// Logging: one line per event, with time and level, to stderr (or the log file). Thread-safe.
//   log_info("stream", "connected to " + host);

#include <string>
#include <string_view>

namespace docsync {

enum class LogLevel { Debug, Info, Warning, Error };

// The minimum level written (default Info).
void set_log_level(LogLevel level);
// One line for one event: `2026-11-29T18:01:13.123Z INFO [component] message`.
void log(LogLevel level, std::string_view component, std::string_view message);

inline void log_debug(std::string_view component, std::string_view message) { log(LogLevel::Debug, component, message); }
inline void log_info(std::string_view component, std::string_view message) { log(LogLevel::Info, component, message); }
inline void log_warning(std::string_view component, std::string_view message) { log(LogLevel::Warning, component, message); }
inline void log_error(std::string_view component, std::string_view message) { log(LogLevel::Error, component, message); }

}  // namespace docsync
