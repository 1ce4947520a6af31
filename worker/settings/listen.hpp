#pragma once
// ADDR:PORT settings: where a program listens (the worker's --metrics-listen, the gateway's --listen).

#include <cstdint>
#include <string>
#include <string_view>

namespace docsync::settings {

// What one program's setting accepts besides a literal IP address and a port from 1 to 65535.
struct ListenRules {
    bool host_names = false;  // a host name (localhost), resolved when the program starts listening
    bool any_port = false;    // port 0: any free port
    const char* examples;     // for the fix: "127.0.0.1:9464 or [::]:9464"
};

struct ListenAddress {
    std::string address;  // an IPv6 address without its brackets
    std::uint16_t port = 0;
};

// "127.0.0.1:9464", "[::1]:9464" (IPv6 in brackets), or with rules.host_names "localhost:8080".
// Throws SettingError saying what is wrong and the form to write.
ListenAddress parse_listen_address(std::string_view text, const ListenRules& rules);
// Whether `name` is a host name: dot-separated labels of letters, digits and inner dashes, 1 to 63
// bytes each, 253 in all; not all digits and dots (that is an IPv4 address, or a mistyped one).
bool is_host_name(std::string_view name);
// The address as parse_listen_address reads it back: "[::1]:9464".
std::string format_listen_address(const std::string& address, std::uint16_t port);

}  // namespace docsync::settings
