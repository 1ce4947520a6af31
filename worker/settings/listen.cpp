// ADDR:PORT settings. An IP address is taken literally; a host name only where the program's rules
// allow one, since it makes the start depend on name resolution.
#include "settings/listen.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include "settings/units.hpp"

namespace docsync::settings {

bool is_host_name(std::string_view name) {
    if (name.empty() || name.size() > 253) return false;
    if (std::all_of(name.begin(), name.end(), [](char c) { return c == '.' || std::isdigit(static_cast<unsigned char>(c)); }))
        return false;
    std::size_t start = 0;
    while (true) {
        auto end = std::min(name.find('.', start), name.size());
        std::string_view label = name.substr(start, end - start);
        if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
        for (char c : label)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
        if (end == name.size()) return true;
        start = end + 1;
    }
}

ListenAddress parse_listen_address(std::string_view text, const ListenRules& rules) {
    std::string value(trim(text));
    std::string fix = std::string("; give ADDR:PORT with an IP address") + (rules.host_names ? " or host name" : "") +
                      " and a port from " + (rules.any_port ? "0 (any free port)" : "1") + " to 65535, e.g. " +
                      rules.examples;
    auto colon = value.rfind(':');
    if (colon == std::string::npos || colon == 0) throw SettingError("not ADDR:PORT" + fix);
    std::string address = value.substr(0, colon);
    std::string port = value.substr(colon + 1);
    bool ipv6 = address.size() > 2 && address.front() == '[' && address.back() == ']';
    if (ipv6) address = address.substr(1, address.size() - 2);
    unsigned char probe[sizeof(in6_addr)];
    bool ip = ipv6 ? inet_pton(AF_INET6, address.c_str(), probe) == 1 : inet_pton(AF_INET, address.c_str(), probe) == 1;
    if (!ip && !(rules.host_names && !ipv6 && is_host_name(address)))
        throw SettingError("\"" + address + "\" is not an IP address" + (rules.host_names ? " or host name" : "") +
                           (ipv6 || address.find(':') == std::string::npos ? "" : " (write IPv6 in brackets)") + fix);
    std::uint64_t number = 0;
    try {
        number = parse_count(port);
    } catch (const SettingError&) {
        throw SettingError("\"" + port + "\" is not a port" + fix);
    }
    std::uint64_t lowest = rules.any_port ? 0 : 1;
    if (number < lowest || number > 65535) throw SettingError("port " + port + " is out of range" + fix);
    return {address, static_cast<std::uint16_t>(number)};
}

std::string format_listen_address(const std::string& address, std::uint16_t port) {
    bool ipv6 = address.find(':') != std::string::npos;
    return (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace docsync::settings
