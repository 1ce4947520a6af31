#pragma once
// WAL positions and doc versions, the vocabulary every worker component shares.

#include <compare>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace docsync {

// A PostgreSQL WAL position (XLogRecPtr). 0 means "none" (the slot's own position when starting).
using Lsn = std::uint64_t;

// "16/B374D848", as PostgreSQL prints pg_lsn.
inline std::string format_lsn(Lsn lsn) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(lsn >> 32), static_cast<unsigned>(lsn));
    return buf;
}

// Parses PostgreSQL's pg_lsn text form; nullopt when malformed.
inline std::optional<Lsn> parse_lsn(std::string_view text) {
    auto slash = text.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash > 8 || text.size() - slash - 1 == 0 ||
        text.size() - slash - 1 > 8)
        return std::nullopt;
    auto hex = [](std::string_view part, std::uint64_t& out) {
        out = 0;
        for (char c : part) {
            int d = (c >= '0' && c <= '9')   ? c - '0'
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                             : -1;
            if (d < 0) return false;
            out = out * 16 + static_cast<std::uint64_t>(d);
        }
        return true;
    };
    std::uint64_t hi = 0, lo = 0;
    if (!hex(text.substr(0, slash), hi) || !hex(text.substr(slash + 1), lo)) return std::nullopt;
    return (hi << 32) | lo;
}

// The version every published doc carries. The generation goes up whenever the slot is recreated or
// the server's system identifier or timeline changes, so a doc from a new server always wins over a
// doc with a larger LSN from an old one. Ordered by generation, then LSN.
struct DocVersion {
    std::uint64_t generation = 0;
    Lsn lsn = 0;
    auto operator<=>(const DocVersion&) const = default;
};

}  // namespace docsync
