#pragma once
// Keys lookups: the hot-row guarantee for reverse indexes. At most one lookup is queued and one
// runs per (definitions, watch, key values); changes that arrive meanwhile merge into the queued
// one, or into one more round after the running one, so a storm of N changes to one row costs a
// few lookups, not N. Not thread-safe: the engine calls it under its mutex.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "engine/definitions.hpp"
#include "engine/doc.hpp"
#include "engine/seams.hpp"

namespace docsync {

// A keys lookup queued by a reverse-index watch, on behalf of every transaction that asked for it
// meanwhile.
struct Lookup {
    std::shared_ptr<const Definitions> defs;
    std::uint16_t watch = 0;
    SqlArgs args;
    std::vector<std::uint64_t> seqs;  // the transactions waiting on it (their stream sequences)
    std::uint64_t epoch = 0;
    std::vector<std::uint64_t> xids;  // the transactions it must see (invariant 3 (docs/design.md))
    Lsn end_lsn = 0;
    std::uint32_t failures = 0;

    using Key = std::tuple<const Definitions*, std::uint16_t, SqlArgs>;
    Key key() const { return {defs.get(), watch, args}; }

    // Takes over what `other` waits for: its transactions, what it must see.
    void merge(Lookup&& other);
};

class LookupQueue {
public:
    explicit LookupQueue(std::condition_variable& wake) : wake_(wake) {}

    // Queues `lookup`: merged into the queued one of the same key, or, while that key runs, into
    // the round after it.
    void enqueue(Lookup lookup);
    // Takes the oldest queued lookup and, up to `max` in all, more of the same watch waiting near
    // the front (one statement runs them); false when none is queued. Their keys are busy until
    // finish.
    bool take(std::vector<Lookup>& out, std::size_t max);
    // Queues `lookup` again at `due` (a retry after a failure).
    void retry(Nanos due, Lookup lookup);
    // The lookup of `key` ended. What arrived while it ran is one more round, for all of them,
    // started no sooner than `due` (like a hot doc's); until then the key stays busy, so what
    // arrives keeps merging into that round.
    void finish(const Lookup::Key& key, Nanos due, Nanos now);

    // Queues the retries and paced rounds due by `t`.
    void promote_due(Nanos t);
    // When the next retry or paced round is due; the largest Nanos when none waits.
    Nanos next_due() const;

    // A new stream epoch: the transactions the lookups wait for are forgotten; the lookups stay.
    void forget_waiters();
    // Lookups waiting or running.
    std::uint64_t depth() const;

private:
    std::condition_variable& wake_;
    std::map<Lookup::Key, Lookup> queued_;
    std::deque<Lookup::Key> order_;            // the queued ones, first come first
    std::set<Lookup::Key> busy_;               // running, or with a paced round waiting
    std::map<Lookup::Key, Lookup> again_;      // arrived while the same lookup was busy
    std::multimap<Nanos, Lookup::Key> paced_;  // an again round waiting for min_round_interval
    std::multimap<Nanos, Lookup> delayed_;     // retries
    std::uint64_t running_ = 0;
};

}  // namespace docsync
