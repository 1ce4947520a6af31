#pragma once
// What the patch benchmarks (patch_fanout_bench.cpp, patch_worker_bench.cpp) share: reading the
// version, the base and the payload out of an envelope (docs/patches.md) without parsing the doc,
// the clock, and ranges of figures over repeated runs.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/lsn.hpp"

namespace docsync::bench {

inline std::int64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The version after `"KEY":G,"KEY_lsn":"X/Y"` — `key` is "generation" or "base_generation" — found
// from the end of the envelope (the envelope's own version is its last field, its base just before).
inline std::optional<DocVersion> envelope_version(std::string_view text, std::string_view generation_key,
                                                  std::string_view lsn_key) {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) at -O2 on "…" + std::string + "…".
    std::string g;
    g.append("\"").append(generation_key).append("\":");
    auto at = text.rfind(g);
    if (at == std::string_view::npos) return std::nullopt;
    DocVersion v;
    std::size_t i = at + g.size();
    if (i >= text.size() || text[i] < '0' || text[i] > '9') return std::nullopt;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) v.generation = v.generation * 10 + static_cast<std::uint64_t>(text[i] - '0');
    std::string l;
    l.append(",\"").append(lsn_key).append("\":\"");
    if (text.compare(i, l.size(), l) != 0) return std::nullopt;
    i += l.size();
    auto quote = text.find('"', i);
    if (quote == std::string_view::npos) return std::nullopt;
    auto lsn = parse_lsn(text.substr(i, quote - i));
    if (!lsn) return std::nullopt;
    v.lsn = *lsn;
    return v;
}

inline std::optional<DocVersion> version_of(std::string_view envelope) {
    // The last "generation": is the envelope's own; "base_generation": ends in the same text, so the
    // search is for the one preceded by a comma and a quote that is not "base_".
    auto at = envelope.rfind(",\"generation\":");
    if (at == std::string_view::npos) return std::nullopt;
    return envelope_version(envelope.substr(at), "generation", "lsn");
}

inline std::optional<DocVersion> base_of(std::string_view envelope) {
    return envelope_version(envelope, "base_generation", "base_lsn");
}

// The JSON text of the envelope's member `name` ("doc", "patch" or "merge"): from after `"name":` to
// the `,"X"` of the field that follows it (`end_key`, searched from the end).
inline std::optional<std::string_view> member_text(std::string_view envelope, std::string_view name,
                                                   std::string_view end_key) {
    std::string key, end;
    key.append(",\"").append(name).append("\":");
    end.append(",\"").append(end_key).append("\":");
    auto at = envelope.find(key);
    auto stop = envelope.rfind(end);
    if (at == std::string_view::npos || stop == std::string_view::npos || stop < at + key.size()) return std::nullopt;
    return envelope.substr(at + key.size(), stop - at - key.size());
}

// "low–high" of repeated figures (one value when they are equal at the printed precision).
inline std::string range(std::vector<double> v, const char* format = "%.2f") {
    if (v.empty()) return "-";
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    char a[64], b[64];
    std::snprintf(a, sizeof a, format, *lo);
    std::snprintf(b, sizeof b, format, *hi);
    return std::string(a) == b ? std::string(a) : std::string(a) + "–" + b;
}

}  // namespace docsync::bench
