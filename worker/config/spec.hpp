#pragma once
// The settings table the files of this directory share (not part of the worker's interface): one
// entry per setting drives the command line (settings.cpp), the config file (config_file.cpp), the
// DOCSYNC_* environment variables and --help (settings_table.cpp), so the four cannot disagree.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"

namespace docsync::config {

inline constexpr std::uint64_t kB = 1024;
inline constexpr std::uint64_t MB = kB * 1024;
inline constexpr std::uint64_t GB = MB * 1024;
inline constexpr std::uint64_t TB = GB * 1024;

// How a setting's text is read; decides the JSON types its config key accepts. A List setting may be
// given several times; its values travel as one text, one value per line.
enum class Kind { Text, Flag, Size, Duration, Count, Choice, List };

struct Spec {
    const char* name;        // long flag name without dashes; also the config key
    Kind kind;
    const char* value_name;  // shown in --help: SIZE, DURATION, N, …
    const char* help;        // one sentence
    std::string (*show_default)(const Settings&);
    void (*apply)(Settings&, std::string_view);  // a List setting's apply adds one value
};

// The settings, in --help order.
const std::vector<Spec>& specs();
// The setting named `name` (a long flag name without dashes), or nullptr.
const Spec* find_spec(std::string_view name);
// The setting whose name is closest to `key` (a typo, underscores for dashes), or nullptr.
const Spec* closest_spec(std::string_view key);
// "; did you mean "max-retained-wal"?" when a known setting is close, else the pointer to --help.
std::string suggestion(std::string_view key);
// A setting's environment variable: "max-retained-wal" is DOCSYNC_MAX_RETAINED_WAL.
std::string env_name(std::string_view name);

// The config file's text; throws SettingError naming the file when it cannot be read or is larger
// than 1MB.
std::string read_config_file(const std::string& path);

// Text helpers for the readers and their messages.
std::string lower(std::string_view text);
std::string_view trim(std::string_view text);
// The text in double quotes, with quotes, backslashes and control bytes escaped, so a message that
// quotes a value stays one line.
std::string quote_text(std::string_view text);

}  // namespace docsync::config
