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

}  // namespace docsync
