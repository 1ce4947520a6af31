// The JSON config file (RapidJSON): reading it, and its keys and values as setting text.
#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstring>
#include <fstream>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>

#include "settings/table.hpp"

namespace docsync::settings {

namespace {

constexpr std::size_t max_config_bytes = 1 << 20;

// A JSON value as setting text, checking the JSON type against the setting's kind.
std::string config_value_text(const Entry& spec, const rapidjson::Value& value) {
    switch (spec.kind) {
        case Kind::Flag:
            if (value.IsBool()) return value.GetBool() ? "true" : "false";
            throw SettingError("expected true or false");
        case Kind::Size:
        case Kind::Count:
            if (value.IsUint64()) return std::to_string(value.GetUint64());
            if (value.IsString()) return std::string(value.GetString(), value.GetStringLength());
            if (spec.kind == Kind::Size) throw SettingError("expected a size such as \"1GB\" or a number of bytes");
            throw SettingError("expected a whole number such as 4");
        case Kind::Duration:
            if (value.IsString()) return std::string(value.GetString(), value.GetStringLength());
            throw SettingError("expected a duration string with a unit, such as \"5s\" or \"250ms\"");
        case Kind::List:
            // An array of strings, one value per line of the setting's text; or one string.
            if (value.IsArray()) {
                std::string text;
                for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
                    if (!value[i].IsString()) throw SettingError("expected an array of strings");
                    std::string item(value[i].GetString(), value[i].GetStringLength());
                    if (item.find_first_of(std::string_view("\0\n", 2)) != std::string::npos)
                        throw SettingError("a value holds a NUL or a line break; give one value per string");
                    text += (i ? "\n" : "") + item;
                }
                return text;
            }
            [[fallthrough]];
        case Kind::Text:
        case Kind::Choice:
            if (value.IsString()) {
                std::string text(value.GetString(), value.GetStringLength());
                if (text.find('\0') != std::string::npos) throw SettingError("contains a NUL character; remove it");
                return text;
            }
            throw SettingError(spec.kind == Kind::List ? "expected an array of strings" : "expected a string");
    }
    throw SettingError("expected a string");
}

}  // namespace

std::string read_config_file(const Program& program, const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        int err = errno;
        throw SettingError("config file " + quote_text(path) + ": cannot open (" + std::strerror(err) +
                           "); give a readable file with --config or " + env_name(program, "config"));
    }
    std::string text;
    char buf[8192];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        text.append(buf, static_cast<std::size_t>(in.gcount()));
        if (text.size() > max_config_bytes)
            throw SettingError("config file " + quote_text(path) + ": larger than 1MB; a config file holds only settings");
    }
    if (in.bad()) throw SettingError("config file " + quote_text(path) + ": read error; check the file");
    return text;
}

std::vector<std::pair<std::string, std::string>> parse_config_text(const Program& program, const Table& table,
                                                                   std::string_view json, std::string_view origin) {
    std::string where = "config file " + quote_text(origin);
    // RapidJSON's parser recurses per nesting level, so deep nesting is refused before parsing
    // (settings need one level) instead of overflowing the stack.
    std::size_t depth = 0;
    bool in_string = false, escaped = false;
    for (char c : json) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > 32) throw SettingError(where + ": nested deeper than 32 levels; a config file is one object of settings");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    rapidjson::Document doc;
    rapidjson::MemoryStream stream(json.data(), json.size());
    doc.ParseStream<rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseIterativeFlag>(stream);
    if (doc.HasParseError()) {
        // Line and column of the error offset, for the fix.
        std::size_t offset = std::min(doc.GetErrorOffset(), json.size());
        std::size_t line = 1, column = 1;
        for (std::size_t i = 0; i < offset; ++i) {
            if (json[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        throw SettingError(where + ": invalid JSON at line " + std::to_string(line) + " column " +
                           std::to_string(column) + " (" + rapidjson::GetParseError_En(doc.GetParseError()) +
                           "); fix the syntax");
    }
    // Anything after the value besides whitespace is an error too.
    for (std::size_t i = std::min(stream.Tell(), json.size()); i < json.size(); ++i)
        if (!std::isspace(static_cast<unsigned char>(json[i])))
            throw SettingError(where + ": text after the JSON object; remove it");
    if (!doc.IsObject())
        throw SettingError(where + ": not a JSON object; write " + std::string(program.config_object_example));
    std::vector<std::pair<std::string, std::string>> out;
    // Indexed, not iterated: comparing RapidJSON member iterators is ambiguous under C++20.
    for (rapidjson::SizeType i = 0; i < doc.MemberCount(); ++i) {
        const auto& member = doc.MemberBegin()[i];
        std::string key(member.name.GetString(), member.name.GetStringLength());
        const Entry* spec = find(table, key);
        if (!spec) throw SettingError(where + ": unknown setting " + quote_text(key) + suggestion(program, table, key));
        if (key == "config")
            throw SettingError(where + ": \"config\" cannot be set in a config file; give it with --config or " +
                               env_name(program, "config"));
        for (const auto& seen : out)
            if (seen.first == key) throw SettingError(where + ": " + quote_text(key) + " is given twice; keep one");
        try {
            out.emplace_back(key, config_value_text(*spec, member.value));
        } catch (const SettingError& e) {
            throw SettingError(where + ": " + quote_text(key) + ": " + e.what());
        }
    }
    return out;
}

}  // namespace docsync::settings
