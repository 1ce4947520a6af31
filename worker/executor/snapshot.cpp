// Parsing pg_current_snapshot() and the committed-xid visibility test.
#include "executor/snapshot.hpp"

#include <algorithm>
#include <charconv>

namespace docsync {

bool Snapshot::sees_committed(std::uint64_t xid) const {
    if (xid >= xmax) return false;
    if (xid < xmin) return true;
    return !std::binary_search(xip.begin(), xip.end(), xid);
}

std::optional<Snapshot> parse_snapshot(std::string_view text) {
    auto number = [](std::string_view part, std::uint64_t& out) {
        if (part.empty()) return false;
        auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
        return ec == std::errc() && ptr == part.data() + part.size();
    };
    auto c1 = text.find(':');
    if (c1 == std::string_view::npos) return std::nullopt;
    auto c2 = text.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return std::nullopt;
    Snapshot s;
    if (!number(text.substr(0, c1), s.xmin) || !number(text.substr(c1 + 1, c2 - c1 - 1), s.xmax)) return std::nullopt;
    if (s.xmin > s.xmax) return std::nullopt;
    std::string_view rest = text.substr(c2 + 1);
    while (!rest.empty()) {
        auto comma = rest.find(',');
        std::uint64_t xid = 0;
        if (!number(rest.substr(0, comma), xid)) return std::nullopt;
        s.xip.push_back(xid);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
        if (rest.empty()) return std::nullopt;
    }
    std::sort(s.xip.begin(), s.xip.end());
    return s;
}

}  // namespace docsync
