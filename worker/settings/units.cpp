// The unit parsers and formatters (sizes, durations, counts, booleans), their ranged readers and the
// text helpers every settings reader shares.
#include "settings/units.hpp"

#include <cctype>
#include <cstdio>
#include <limits>

namespace docsync {

using namespace settings;

namespace settings {

std::string lower(std::string_view text) {
    std::string out(text);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    return text;
}

std::string quote_text(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out.push_back(c);
        }
    }
    out.push_back('"');
    return out;
}

}  // namespace settings

namespace {

// Splits "16 MB" into its leading digits and the rest (trimmed, as written). Throws when there are no
// digits; `unit` says whether the number takes a unit, for the fix.
std::pair<std::uint64_t, std::string> split_number(std::string_view text, const char* what, const char* example,
                                                   bool unit) {
    text = trim(text);
    std::size_t i = 0;
    std::uint64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        auto digit = static_cast<std::uint64_t>(text[i] - '0');
        if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
            throw SettingError(std::string("number too large; give a smaller ") + what + ", e.g. " + example);
        value = value * 10 + digit;
        ++i;
    }
    if (i == 0) {
        if (!text.empty() && (text[0] == '-' || text[0] == '+'))
            throw SettingError(std::string("not a ") + what + ": no sign allowed; give e.g. " + example);
        if (!unit) throw SettingError(std::string("not a ") + what + "; give digits only, e.g. " + example);
        throw SettingError(std::string("not a ") + what + "; give a whole number with a unit, e.g. " + example);
    }
    if (i < text.size() && text[i] == '.')
        throw SettingError(std::string("not a ") + what + ": use a whole number with a smaller unit, e.g. " + example);
    return {value, std::string(trim(text.substr(i)))};
}

std::uint64_t checked_multiply(std::uint64_t value, std::uint64_t unit, const char* what, const char* example) {
    if (value != 0 && unit > std::numeric_limits<std::uint64_t>::max() / value)
        throw SettingError(std::string(what) + " too large; give a smaller one, e.g. " + example);
    return value * unit;
}

}  // namespace

std::uint64_t parse_size(std::string_view text) {
    constexpr const char* example = "1GB or 512kB";
    auto [value, written] = split_number(text, "size", example, true);
    std::string unit = lower(written);
    std::uint64_t multiplier = 0;
    if (unit.empty() || unit == "b") multiplier = 1;
    else if (unit == "kb" || unit == "kib") multiplier = kB;
    else if (unit == "mb" || unit == "mib") multiplier = MB;
    else if (unit == "gb" || unit == "gib") multiplier = GB;
    else if (unit == "tb" || unit == "tib") multiplier = TB;
    else {
        // Other spellings of the units are refused, naming the one to write.
        static const std::pair<const char*, const char*> spellings[] = {
            {"byte", "B"},      {"bytes", "B"},      {"k", "kB"},        {"kilobyte", "kB"}, {"kilobytes", "kB"},
            {"m", "MB"},        {"megabyte", "MB"},  {"megabytes", "MB"}, {"g", "GB"},        {"gigabyte", "GB"},
            {"gigabytes", "GB"}, {"t", "TB"},        {"terabyte", "TB"}, {"terabytes", "TB"}};
        for (const auto& [spelled, canonical] : spellings)
            if (unit == spelled)
                throw SettingError("unknown size unit " + quote_text(written) + "; did you mean " + std::to_string(value) +
                                   canonical + "? (units: B, kB, MB, GB, TB)");
        throw SettingError("unknown size unit " + quote_text(written) + "; use B, kB, MB, GB or TB, e.g. " + std::string(example));
    }
    return checked_multiply(value, multiplier, "size", example);
}

std::chrono::milliseconds parse_duration(std::string_view text) {
    constexpr const char* example = "5s, 250ms or 2min";
    auto [value, written] = split_number(text, "duration", example, true);
    std::string unit = lower(written);
    std::uint64_t multiplier = 0;
    if (unit == "ms") multiplier = 1;
    else if (unit == "s") multiplier = 1000;
    else if (unit == "min") multiplier = 60 * 1000;
    else if (unit == "h") multiplier = 3600 * 1000;
    else if (unit == "d") multiplier = 24 * 3600 * 1000;
    else if (unit.empty()) throw SettingError("duration without a unit; add ms, s, min, h or d, e.g. " + std::string(example));
    else if (unit == "m")
        throw SettingError("\"m\" is ambiguous; write " + std::to_string(value) + "min for minutes or " +
                           std::to_string(value) + "ms for milliseconds");
    else {
        // Other spellings of the units are refused, naming the one to write.
        static const std::pair<const char*, const char*> spellings[] = {
            {"msec", "ms"}, {"msecs", "ms"}, {"millisecond", "ms"}, {"milliseconds", "ms"}, {"sec", "s"},
            {"secs", "s"}, {"second", "s"}, {"seconds", "s"}, {"mins", "min"}, {"minute", "min"},
            {"minutes", "min"}, {"hr", "h"}, {"hrs", "h"}, {"hour", "h"}, {"hours", "h"}, {"day", "d"},
            {"days", "d"}};
        for (const auto& [spelled, canonical] : spellings)
            if (unit == spelled)
                throw SettingError("unknown duration unit " + quote_text(written) + "; did you mean " + std::to_string(value) +
                                   canonical + "? (units: ms, s, min, h, d)");
        throw SettingError("unknown duration unit " + quote_text(written) + "; use ms, s, min, h or d, e.g. " +
                           std::string(example));
    }
    auto ms = checked_multiply(value, multiplier, "duration", example);
    if (ms > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / 1000))
        throw SettingError("duration too large; give a smaller one, e.g. " + std::string(example));
    return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

std::uint64_t parse_count(std::string_view text) {
    auto [value, rest] = split_number(text, "whole number", "4", false);
    if (!rest.empty()) throw SettingError("not a whole number; give digits only, e.g. 4");
    return value;
}

bool parse_bool(std::string_view text) {
    auto value = lower(trim(text));
    if (value == "true" || value == "yes" || value == "on" || value == "1") return true;
    if (value == "false" || value == "no" || value == "off" || value == "0") return false;
    throw SettingError("not a boolean; give true or false");
}

std::string format_size(std::uint64_t bytes) {
    static const std::pair<std::uint64_t, const char*> units[] = {{TB, "TB"}, {GB, "GB"}, {MB, "MB"}, {kB, "kB"}};
    for (const auto& [size, name] : units)
        if (bytes != 0 && bytes % size == 0) return std::to_string(bytes / size) + name;
    return std::to_string(bytes) + "B";
}

std::string format_duration(std::chrono::milliseconds duration) {
    auto ms = duration.count();
    static const std::pair<std::int64_t, const char*> units[] = {
        {24 * 3600 * 1000LL, "d"}, {3600 * 1000LL, "h"}, {60 * 1000LL, "min"}, {1000LL, "s"}};
    for (const auto& [size, name] : units)
        if (ms != 0 && ms % size == 0) return std::to_string(ms / size) + name;
    return std::to_string(ms) + "ms";
}

namespace settings {

namespace {

void require_range(std::uint64_t value, std::uint64_t min, std::uint64_t max, const std::string& shown_min,
                   const std::string& shown_max) {
    if (value < min || value > max)
        throw SettingError("out of range; give a value from " + shown_min + " to " + shown_max);
}

}  // namespace

std::uint64_t size_in(std::string_view text, std::uint64_t min, std::uint64_t max) {
    auto value = parse_size(text);
    require_range(value, min, max, format_size(min), format_size(max));
    return value;
}

std::chrono::milliseconds duration_in(std::string_view text, std::chrono::milliseconds min,
                                      std::chrono::milliseconds max) {
    auto value = parse_duration(text);
    if (value < min || value > max)
        throw SettingError("out of range; give a duration from " + format_duration(min) + " to " + format_duration(max));
    return value;
}

std::uint64_t count_in(std::string_view text, std::uint64_t min, std::uint64_t max) {
    auto value = parse_count(text);
    require_range(value, min, max, std::to_string(min), std::to_string(max));
    return value;
}

std::string non_empty(std::string_view text, const char* example) {
    if (trim(text).empty()) throw SettingError(std::string("must not be empty; give e.g. ") + example);
    return std::string(text);
}

}  // namespace settings

}  // namespace docsync
