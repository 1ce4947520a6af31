// Request targets, bearer tokens, SSE cursors and WebSocket client messages.
#include "gateway/request.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <cstdio>

#include "gateway/hub.hpp"

namespace docsync::gateway {

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '%') {
            if (i + 2 >= text.size()) return std::nullopt;
            int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            c = static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == '\0') return std::nullopt;
        out.push_back(c);
    }
    return out;
}

std::optional<Target> parse_target(std::string_view target) {
    Target out;
    auto question = target.find('?');
    auto path = percent_decode(target.substr(0, question), false);
    if (!path) return std::nullopt;
    out.path = std::move(*path);
    if (question == std::string_view::npos) return out;
    std::string_view query = target.substr(question + 1);
    while (!query.empty()) {
        auto amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (pair.empty()) continue;
        auto eq = pair.find('=');
        auto name = percent_decode(pair.substr(0, eq), true);
        auto value = percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
        if (!name || !value) return std::nullopt;
        out.query.emplace_back(std::move(*name), std::move(*value));
    }
    return out;
}

std::vector<std::string> Target::all(std::string_view name) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : query)
        if (k == name) out.push_back(v);
    return out;
}

std::optional<std::string> Target::first(std::string_view name) const {
    for (const auto& [k, v] : query)
        if (k == name) return v;
    return std::nullopt;
}

std::optional<std::string> bearer_token(std::string_view authorization) {
    auto space = authorization.find(' ');
    if (space != 6) return std::nullopt;
    std::string_view scheme = authorization.substr(0, 6);
    const char* bearer = "bearer";
    for (std::size_t i = 0; i < 6; ++i)
        if ((scheme[i] | 0x20) != bearer[i]) return std::nullopt;
    std::string_view token = authorization.substr(7);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    if (token.empty()) return std::nullopt;
    return std::string(token);
}

std::string format_cursor(const std::vector<std::optional<DocVersion>>& versions) {
    std::string out;
    for (std::size_t i = 0; i < versions.size(); ++i) {
        if (i) out.push_back(',');
        out += versions[i] ? format_version(*versions[i]) : "-";
    }
    return out;
}

std::optional<std::vector<std::optional<DocVersion>>> parse_cursor(std::string_view cursor, std::size_t channels) {
    std::vector<std::optional<DocVersion>> out;
    while (out.size() <= channels) {
        auto comma = cursor.find(',');
        std::string_view item = cursor.substr(0, comma);
        if (item == "-") {
            out.emplace_back();
        } else {
            auto version = parse_version(item);
            if (!version) return std::nullopt;
            out.emplace_back(*version);
        }
        if (comma == std::string_view::npos) break;
        cursor.remove_prefix(comma + 1);
    }
    if (out.size() != channels) return std::nullopt;
    return out;
}

ClientMessageResult parse_client_message(std::string_view text) {
    ClientMessageResult result;
    rapidjson::Document doc;
    // Iterative: a hostile message nested thousands deep cannot exhaust the stack.
    doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject()) {
        result.error = "a message is one JSON object, e.g. {\"type\":\"subscribe\",\"channel\":\"db:order:42\"}";
        return result;
    }
    auto string_field = [&](const char* name) -> std::optional<std::string> {
        auto it = doc.FindMember(name);
        if (it == doc.MemberEnd() || !it->value.IsString()) return std::nullopt;
        return std::string(it->value.GetString(), it->value.GetStringLength());
    };
    auto type = string_field("type");
    if (!type) {
        result.error = "the message has no \"type\": use subscribe, unsubscribe or auth";
        return result;
    }
    ClientMessage message;
    if (*type == "subscribe" || *type == "unsubscribe") {
        message.type = *type == "subscribe" ? ClientMessage::Type::Subscribe : ClientMessage::Type::Unsubscribe;
        auto channel = string_field("channel");
        if (!channel) {
            result.error = "a " + *type + " message needs \"channel\", e.g. \"db:order:42\"";
            return result;
        }
        message.channel = std::move(*channel);
        if (message.type == ClientMessage::Type::Subscribe && doc.HasMember("after") && !doc["after"].IsNull()) {
            auto after = string_field("after");
            auto version = after ? parse_version(*after) : std::nullopt;
            if (!version) {
                result.error = "\"after\" is a version as the gateway sends it, e.g. \"1/0/16B3F28\"";
                return result;
            }
            message.after = version;
        }
    } else if (*type == "auth") {
        message.type = ClientMessage::Type::Auth;
        auto token = string_field("token");
        if (!token || token->empty()) {
            result.error = "an auth message needs \"token\": the new token";
            return result;
        }
        message.token = std::move(*token);
    } else {
        result.error = "unknown message type \"" + type->substr(0, 40) + "\": use subscribe, unsubscribe or auth";
        return result;
    }
    result.message = std::move(message);
    return result;
}

namespace {

// Whether `text` is UTF-8: no overlong form, no surrogate, nothing above U+10FFFF, no sequence cut
// short. (RapidJSON's validating writer reads past the end of a sequence cut at the end of the text.)
bool valid_utf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        auto c = static_cast<unsigned char>(text[i]);
        std::size_t n;
        std::uint32_t cp;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1, cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2, cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3, cp = c & 0x07;
        } else {
            return false;
        }
        if (text.size() - i - 1 < n) return false;
        for (std::size_t k = 1; k <= n; ++k) {
            auto d = static_cast<unsigned char>(text[i + k]);
            if ((d & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        static constexpr std::uint32_t least[] = {0, 0x80, 0x800, 0x10000};
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += n + 1;
    }
    return true;
}

}  // namespace

std::string json_string(std::string_view text) {
    std::string ascii;
    if (!valid_utf8(text)) {
        // Not UTF-8 (a client's bytes quoted back): the bytes above ASCII become '?'.
        ascii.assign(text);
        for (auto& c : ascii)
            if (static_cast<unsigned char>(c) >= 0x80) c = '?';
        text = ascii;
    }
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace docsync::gateway
