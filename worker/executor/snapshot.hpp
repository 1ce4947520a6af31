#pragma once
// pg_current_snapshot()'s text form, "xmin:xmax:xip1,xip2,…" (full 64-bit xids), and the visibility
// test of invariant 3 (docs/design.md) for transactions known to have committed.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace docsync {

struct Snapshot {
    std::uint64_t xmin = 0;
    std::uint64_t xmax = 0;
    std::vector<std::uint64_t> xip;  // sorted

    // Whether the snapshot sees a transaction that has committed: it started before xmax and was not
    // still running when the snapshot was taken.
    bool sees_committed(std::uint64_t xid) const;
};

// nullopt when `text` is not a well-formed snapshot.
std::optional<Snapshot> parse_snapshot(std::string_view text);

}  // namespace docsync
