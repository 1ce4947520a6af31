#pragma once
// The values every settings table reads: sizes, durations, counts and booleans with the units users
// type, the error their readers throw, and the text helpers the readers' messages share.

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace docsync {

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

}  // namespace docsync

namespace docsync::settings {

inline constexpr std::uint64_t kB = 1024;
inline constexpr std::uint64_t MB = kB * 1024;
inline constexpr std::uint64_t GB = MB * 1024;
inline constexpr std::uint64_t TB = GB * 1024;

// Readers for a table's apply functions: the unit parsers above with a range, each throwing
// SettingError "out of range; give a value from MIN to MAX" (ranges shown in the value's units).
std::uint64_t size_in(std::string_view text, std::uint64_t min, std::uint64_t max);
std::chrono::milliseconds duration_in(std::string_view text, std::chrono::milliseconds min,
                                      std::chrono::milliseconds max);
std::uint64_t count_in(std::string_view text, std::uint64_t min, std::uint64_t max);
// The text as given, refused when blank: "must not be empty; give e.g. <example>".
std::string non_empty(std::string_view text, const char* example);

// Text helpers for the readers and their messages.
std::string lower(std::string_view text);
std::string_view trim(std::string_view text);
// The text in double quotes, with quotes, backslashes and control bytes escaped, so a message that
// quotes a value stays one line.
std::string quote_text(std::string_view text);

}  // namespace docsync::settings
