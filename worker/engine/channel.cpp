// Channel naming; the specification is in channel.hpp.
#include "engine/channel.hpp"

namespace docsync {

std::string build_channel(std::string_view query, const SqlArgs& values) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string channel = "db:";
    channel.append(query);
    for (const auto& value : values) {
        channel.push_back(':');
        if (!value) {
            channel.append("%00");
            continue;
        }
        for (unsigned char c : *value) {
            if (c == '%' || c == ':' || c < 0x20 || c == 0x7f) {
                channel.push_back('%');
                channel.push_back(kHex[c >> 4]);
                channel.push_back(kHex[c & 0xf]);
            } else {
                channel.push_back(static_cast<char>(c));
            }
        }
    }
    return channel;
}

bool parse_channel(std::string_view channel, ParsedChannel& out) {
    if (channel.substr(0, 3) != "db:") return false;
    channel.remove_prefix(3);
    auto colon = channel.find(':');
    std::string_view query = channel.substr(0, colon);
    if (query.empty()) return false;
    out.query.assign(query);
    out.values.clear();
    if (colon == std::string_view::npos) return true;
    channel.remove_prefix(colon + 1);
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    for (;;) {
        auto end = channel.find(':');
        std::string_view segment = channel.substr(0, end);
        if (segment == "%00") {
            out.values.emplace_back(std::nullopt);
        } else {
            std::string value;
            value.reserve(segment.size());
            for (std::size_t i = 0; i < segment.size(); ++i) {
                unsigned char c = static_cast<unsigned char>(segment[i]);
                if (c == '%') {
                    if (i + 2 >= segment.size()) return false;
                    int hi = hex(segment[i + 1]), lo = hex(segment[i + 2]);
                    if (hi < 0 || lo < 0) return false;
                    unsigned char decoded = static_cast<unsigned char>(hi * 16 + lo);
                    if (decoded == 0) return false;  // NUL is only the whole-segment NULL spelling
                    if (!(decoded == '%' || decoded == ':' || decoded < 0x20 || decoded == 0x7f)) return false;
                    value.push_back(static_cast<char>(decoded));
                    i += 2;
                } else if (c < 0x20 || c == 0x7f) {
                    return false;  // build_channel escapes every control byte
                } else {
                    value.push_back(static_cast<char>(c));
                }
            }
            out.values.emplace_back(std::move(value));
        }
        if (end == std::string_view::npos) break;
        channel.remove_prefix(end + 1);
    }
    return true;
}

}  // namespace docsync
