#pragma once
// The log settings every program takes (--log-format, --log-file, --log-level): their readers for a
// table's entries, and applying them at start.

#include <string>
#include <string_view>

#include "common/log.hpp"
#include "settings/table.hpp"

namespace docsync::settings {

// "text" or "json"; throws SettingError naming the two.
LogFormat parse_log_format(std::string_view text);
const char* log_format_name(LogFormat format);
// "debug", "info", "warning" (or "warn") or "error"; throws SettingError naming them.
LogLevel parse_log_level(std::string_view text);

// Applies the logging settings (level, format, file). Returns an empty string, or the one error line
// for stderr (exit status 2) when the log file cannot be opened.
std::string apply_log_settings(const Program& program, LogFormat format, const std::string& file, LogLevel level);

}  // namespace docsync::settings
