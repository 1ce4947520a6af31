#pragma once
// One doc the engine knows: its flags, what its next compute waits for, and the engine's clock in
// nanoseconds. Kept small: live docs can number in the hundreds of thousands.

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.hpp"
#include "common/lsn.hpp"

namespace docsync {

// The engine's times: nanoseconds of its Clock.
using Nanos = std::int64_t;

inline Nanos to_nanos(Clock::TimePoint t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
template <class Rep, class Period>
Nanos to_nanos(std::chrono::duration<Rep, Period> d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// A doc's query index when the definitions no longer have its query.
inline constexpr std::uint16_t kNoQuery = std::numeric_limits<std::uint16_t>::max();

// Where a doc stands. Bits: a doc may be live, dirty and in flight at once.
enum class DocFlags : std::uint16_t {
    None = 0,
    Live = 1,      // followed: changes reach it
    Dirty = 2,     // needs a compute
    Queued = 4,    // in the ready queue
    InFlight = 8,  // a worker computes it
    Txn = 16,      // the open transaction dirtied it (scheduled at COMMIT)
    Delayed = 32,  // waiting for a retry time (retry_at)
    OffAck = 64,   // the delay follows a permanent failure: new waiters skip it
    Walk = 128,    // the running recompute of every live doc has yet to take it
    // Its last publish was a tombstone, so the live journal forgot it (EngineOptions::journal); a
    // doc published again is named again. (The flags share the padding after `query`: no growth.)
    Unjournaled = 256,
    // Its key, of a type engine/key_text.hpp cannot check, was found to be as PostgreSQL prints it
    // (Runner::print_keys): not asked again for this channel.
    KeyChecked = 512,
    // The sink retained a copy under the channel at start (--live all): refused by the server key
    // check, that copy is handed to Publisher::expire_orphans (DocSet::take_refused_retained).
    Retained = 1024,
};

constexpr DocFlags operator|(DocFlags a, DocFlags b) {
    return static_cast<DocFlags>(static_cast<std::uint16_t>(a) | static_cast<std::uint16_t>(b));
}
constexpr DocFlags operator&(DocFlags a, DocFlags b) {
    return static_cast<DocFlags>(static_cast<std::uint16_t>(a) & static_cast<std::uint16_t>(b));
}
constexpr DocFlags operator~(DocFlags a) {
    return static_cast<DocFlags>(static_cast<std::uint16_t>(~static_cast<std::uint16_t>(a)));
}
constexpr DocFlags& operator|=(DocFlags& a, DocFlags b) { return a = a | b; }
constexpr DocFlags& operator&=(DocFlags& a, DocFlags b) { return a = a & b; }

struct Doc {
    Nanos lease_until = 0;            // listed by a liveness poll until then
    Nanos grace_until = 0;            // warmed or touched: an incomplete picture cannot drop it
    Nanos retry_at = 0;               // with DocFlags::Delayed
    Nanos last_start = 0;             // when its last compute started (pacing)
    Lsn lsn = 0;                      // highest COMMIT end LSN among the changes handled for it
    std::uint64_t pending_seq = 0;    // oldest transaction waiting for the next compute (0: none)
    std::uint64_t flight_seq = 0;     // oldest transaction the running compute satisfies
    std::vector<std::uint64_t> xids;  // what the next compute must see (invariant 3 (docs/design.md))
    std::uint32_t failures = 0;       // consecutive failed computes
    std::uint16_t query = kNoQuery;   // index into the definitions' queries
    DocFlags flags = DocFlags::None;

    bool has(DocFlags f) const { return (flags & f) == f; }                   // every flag of f
    bool has_any(DocFlags f) const { return (flags & f) != DocFlags::None; }  // at least one
    void set(DocFlags f) { flags |= f; }
    void clear(DocFlags f) { flags &= ~f; }

    // The next compute must see transaction `xid` (0: none). Consecutive changes of one
    // transaction add it once.
    void add_xid(std::uint64_t xid) {
        if (xid && (xids.empty() || xids.back() != xid)) xids.push_back(xid);
    }
};

using DocMap = std::unordered_map<std::string, Doc>;
using Entry = DocMap::value_type;  // channel and doc; nodes never move

}  // namespace docsync
