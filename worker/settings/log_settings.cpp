// The log settings' readers, and applying them at start.
#include "settings/log_settings.hpp"

namespace docsync::settings {

LogFormat parse_log_format(std::string_view text) {
    auto value = lower(trim(text));
    if (value == "text") return LogFormat::Text;
    if (value == "json") return LogFormat::Json;
    throw SettingError("unknown log format; give text or json");
}

const char* log_format_name(LogFormat format) { return format == LogFormat::Text ? "text" : "json"; }

LogLevel parse_log_level(std::string_view text) {
    auto value = lower(trim(text));
    if (value == "debug") return LogLevel::Debug;
    if (value == "info") return LogLevel::Info;
    if (value == "warning" || value == "warn") return LogLevel::Warning;
    if (value == "error") return LogLevel::Error;
    throw SettingError("unknown log level; give debug, info, warning or error");
}

std::string apply_log_settings(const Program& program, LogFormat format, const std::string& file, LogLevel level) {
    if (auto reason = set_log_file(file); !reason.empty())
        return std::string(program.name) + ": --log-file " + quote_text(file) + ": cannot open (" + reason +
               "); give a writable path, e.g. " + std::string(program.log_file_example);
    set_log_level(level);
    set_log_format(format);
    return {};
}

}  // namespace docsync::settings
