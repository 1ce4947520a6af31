#pragma once
// The docs the engine knows and where the work on each stands: live or not, waiting in the ready
// queue or for a retry time, computing; and the progress of the recompute of every live doc (the
// "walk"). Not thread-safe: the engine calls it under its mutex.
//
// Coalescing (invariant 4 (docs/design.md)) happens here: a doc is queued at most once and
// computed by one thread at a time; a change that arrives while it computes marks it dirty again,
// which schedules exactly one more round, and rounds of one doc start at least min_round_interval
// apart.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/clock.hpp"
#include "engine/catalog.hpp"
#include "engine/doc.hpp"
#include "engine/refused_names.hpp"
#include "engine/engine.hpp"
#include "engine/ticket_ledger.hpp"

namespace docsync {

// A doc compute taken from the ready queue.
struct DocJob {
    Entry* entry = nullptr;
    std::string channel;
    std::uint16_t query = kNoQuery;
    std::vector<std::uint64_t> xids;  // what the compute must see
    Lsn lsn = 0;                      // the doc's highest COMMIT end LSN handled (0: none yet)
    Nanos previous_start = 0;         // when the compute before this one started
    std::uint64_t walk_id = 0;        // the walk this compute counts for, 0: none
};

class DocSet {
public:
    DocSet(const Clock& clock, const EngineOptions& options, const Catalog& catalog, TicketLedger& ledger,
           std::condition_variable& wake)
        : clock_(clock), options_(options), catalog_(catalog), ledger_(ledger), wake_(wake) {}

    // The doc for `channel`, creating it when `create`. nullptr when unknown (or the channel names
    // no defined query with that many params, or spells a key otherwise than PostgreSQL prints it:
    // refused, see refused_channels).
    // A channel longer than kMaxChannelBytes is refused unread. `polled`: only a liveness poll names
    // it, so a new doc whose key the server must check takes one of EngineOptions::key_check_rate's
    // checks this second; past them it is not created (nullptr, not refused): a later poll lists it
    // again.
    Entry* find_or_create(const std::string& channel, bool create, bool polled = false);
    // Channels refused since start because a key was not in its canonical text (or not of its type).
    std::uint64_t refused_channels() const { return refused_channels_; }
    // While true, docs created are not named to the journal (EngineOptions::journal): they come
    // from it.
    void set_journal_quiet(bool quiet) { journal_quiet_ = quiet; }

    // Calls f(entry) for every live doc of query `query`.
    template <class F>
    void for_each_live(std::uint16_t query, F f) {
        for (auto& entry : docs_)
            if (entry.second.query == query && entry.second.has(DocFlags::Live)) f(entry);
    }

    // Marks the doc dirty and puts it where a worker finds it (unless it already is, or runs, or
    // waits for the open transaction's COMMIT).
    void schedule(Entry& entry);
    // Makes the doc live; a doc that was not is scheduled: it may have missed changes meanwhile.
    void make_live(Entry& entry);
    // A subscriber asked for the doc (touch, warm): renew its lease and protect it from a poll that
    // may predate the subscriber.
    void protect(Doc& doc);
    // Nobody waits for the doc any more (it stopped being live): its waiters are released, what
    // its next compute had to do is forgotten, and the walk counts it as done.
    void abandon(Doc& doc);

    // A liveness poll (Engine::sync_live).
    void sync_live(const std::vector<std::string>& channels, bool complete);
    // Docs whose lease and grace both ended by `t` stop being live (never with --live all).
    void drop_expired(Nanos t);
    // Erases docs that are neither live nor busy.
    void sweep();
    // The definitions changed: every doc is pointed at its query again (a doc whose query is gone
    // stops being live), and the live docs of the `changed` queries are scheduled, `seq` waiting.
    void reindex(const std::vector<std::string>& changed, std::uint64_t seq);
    // A new stream epoch: no doc has waiters any more.
    void forget_waiters();

    // Schedules the delayed docs due by `t`.
    void promote_due(Nanos t);
    // When the next delayed doc is due; the largest Nanos when none waits.
    Nanos next_due() const;
    bool has_ready() const { return !ready_.empty(); }
    // Takes the next dirty live doc from the ready queue and, up to `max` in all, more docs of the
    // same query waiting near the front (one statement computes them); each is marked in flight.
    // false when no doc is ready.
    bool take(std::vector<DocJob>& jobs, std::size_t max);

    // The compute `job` ran ended; returns whether it counts for the running walk. Then exactly one
    // of published, retry or failed records its outcome.
    bool end_compute(const DocJob& job);
    // Published: its waiters are done; a change that arrived meanwhile is one more round.
    void published(Entry& entry, bool walk_job);
    // Not done (not visible yet, or a transient failure): the compute's waiters and what it had to
    // see wait for the next one, after `wait`. `round`: false when the compute was no round of the
    // doc (it could not see what it completes), so pacing counts from the round before it.
    void retry(Entry& entry, const DocJob& job, std::chrono::milliseconds wait, bool walk_job, bool round);
    // Failed for good: a recorded outcome, so its waiters are done; the doc is retried after `wait`
    // off the ack path, and sooner when new waiters came meanwhile.
    void failed(Entry& entry, std::chrono::milliseconds wait, bool walk_job);
    // PostgreSQL refused the doc's key as invalid input for its type: a refused channel, not a
    // failed doc. Its waiters are done, it stops being live, and asking for it again is refused
    // at once (logged like every refusal).
    // A channel the sink retained at start (DocFlags::Retained) and no publish replaced is kept
    // for take_refused_retained.
    // `key_checked`: the server key check refused it (Runner::print_keys), not the compute.
    void refuse_computed(Entry& entry, const std::string& problem, bool walk_job, bool key_checked = false);
    // The retained channels refuse_computed refused since the last call, for the sink to expire
    // their copies (once: the flag is cleared).
    std::vector<std::string> take_refused_retained() { return std::exchange(refused_retained_, {}); }
    // A change named the channel (its key comes from a row): it is no longer refused at once.
    void forgive(const std::string& channel) {
        if (!server_refused_.empty()) server_refused_.erase(channel);
    }
    // The key types changed (Engine::load_definitions): every doc whose channel is no longer
    // canonical for its query's key types stops being live and is returned with its LSN, for the
    // sink to replace what it retains with a tombstone.
    std::vector<std::pair<std::string, Lsn>> drop_non_canonical();
    // Whether drop_non_canonical dropped the channel (since its last call) and no tombstone
    // followed a publish that raced it: a compute running at the drop may publish after the
    // tombstone. Forgets the channel.
    bool take_dropped(const std::string& channel) { return key_dropped_.erase(channel) > 0; }

    // The recompute of every live doc: each is scheduled, and counts as done once it has an
    // outcome or stops being live. A new walk restarts the count.
    void start_walk(RecomputeReason reason, bool gap);
    RecomputeProgress walk_progress() const;

    // A live doc of a defined query drawn with `random`, probing random hash buckets and one doc of
    // each (so a draw is nearly uniform and never walks a large set); nullptr when none was found.
    // `accept` may refuse a doc (its query is refused), and the probes go on.
    template <class Accept>
    const Entry* draw(std::uint64_t random, Accept accept) const;
    // Whether the engine has work pending for the doc: its next publish is coming.
    static bool busy(const Doc& doc) {
        return doc.has_any(DocFlags::Dirty | DocFlags::Queued | DocFlags::InFlight | DocFlags::Txn | DocFlags::Delayed);
    }
    const Doc* find(const std::string& channel) const {
        auto it = docs_.find(channel);
        return it == docs_.end() ? nullptr : &it->second;
    }

    // Gauges for stats: live docs, the dirty ones among them, computes running.
    void count(std::uint64_t& live, std::uint64_t& dirty) const;
    std::uint64_t running() const { return in_flight_; }

private:
    Nanos now() const { return to_nanos(clock_.now()); }
    // Starts the compute of a doc taken off the ready queue into `job`; false when it needs none
    // (not dirty, waiting for COMMIT, or no longer live).
    bool start(Entry& entry, DocJob& job);
    void delay(const std::string& channel, Doc& doc, std::chrono::milliseconds wait, bool off_ack);
    // A doc the walk counts needs it no more (an outcome, or it stopped being live).
    void walk_unflag(Doc& doc);
    void walk_settle();
    // Counts and logs (once while remembered) a channel refused for its key.
    void refuse_channel(const std::string& channel, const std::string& problem);
    // Takes one server key check from this second's budget (EngineOptions::key_check_rate); false
    // when it is spent (logged once a minute at most).
    bool take_key_check();

    const Clock& clock_;
    const EngineOptions& options_;
    const Catalog& catalog_;
    TicketLedger& ledger_;
    std::condition_variable& wake_;

    DocMap docs_;
    std::deque<Entry*> ready_;
    std::multimap<Nanos, std::string> delayed_;  // retry time → channel
    std::uint64_t in_flight_ = 0;
    std::uint64_t refused_channels_ = 0;
    bool journal_quiet_ = false;  // set_journal_quiet
    // The refusal log: each of the first kRefusedRemembered distinct refused channels is logged
    // once; past them, refusals are counted and summed up in one line per kRefusedSummaryEvery
    // (docsync_refused_channels_total counts them all). Never cleared: a client subscribing to
    // many non-canonical channels cannot make the worker log them again at every poll.
    // A channel longer than kMaxChannelBytes is remembered by its length and hash, never whole.
    static constexpr std::size_t kRefusedRemembered = 4096;             // bounds refused_seen_ ...
    static constexpr std::size_t kRefusedRememberedBytes = 1u << 20;    // ... and its bytes
    static constexpr std::chrono::seconds kRefusedSummaryEvery{60};
    RefusedNames refused_seen_{kRefusedRemembered, kRefusedRememberedBytes};
    std::uint64_t refused_unlogged_ = 0;  // refusals not logged one by one since the last summary
    Nanos refused_summary_at_ = 0;        // when the last summary was logged
    // Channels refused after their doc was made: PostgreSQL refused the key as input for its type
    // (SQLSTATE 22xxx, refuse_computed), or the key type changed (drop_non_canonical). Refused at
    // once when asked for again, even while the entry waits for the sweep. Bounded in count and
    // bytes, the oldest forgotten first (one evicted is checked again, within key_check_rate), and
    // forgotten at each definitions load, which checks anew.
    static constexpr std::size_t kServerRefusedRemembered = 65536;
    static constexpr std::size_t kServerRefusedBytes = 4u << 20;
    RefusedNames server_refused_{kServerRefusedRemembered, kServerRefusedBytes};
    std::vector<std::string> refused_retained_;  // take_refused_retained
    // The server key checks' budget (take_key_check): checks left this second, and when it began.
    std::size_t key_checks_left_ = 0;
    Nanos key_check_second_ = 0;
    std::uint64_t key_checks_deferred_ = 0;  // channels deferred since the last log line
    Nanos key_check_logged_at_ = 0;
    std::unordered_set<std::string> key_dropped_;  // drop_non_canonical's last channels (take_dropped)

    // The walk: docs flagged DocFlags::Walk wait for it, walk_running_ of its docs compute now;
    // done = total - flagged - running. walk_.id tells its jobs from an earlier walk's.
    RecomputeProgress walk_;
    std::uint64_t walk_flagged_ = 0;
    std::uint64_t walk_running_ = 0;
};

template <class Accept>
const Entry* DocSet::draw(std::uint64_t random, Accept accept) const {
    // splitmix64 steps: one random number gives every probe its own bucket and slot.
    auto next = [&random] {
        std::uint64_t z = (random += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    auto eligible = [&accept](const Entry& entry) {
        return entry.second.has(DocFlags::Live) && entry.second.query != kNoQuery && accept(entry);
    };
    if (docs_.empty()) return nullptr;
    for (int probe = 0; probe < 64; ++probe) {
        std::size_t bucket = next() % docs_.bucket_count();
        std::size_t size = docs_.bucket_size(bucket);
        if (size == 0) continue;
        auto it = docs_.begin(bucket);
        for (std::size_t skip = next() % size; skip > 0; --skip) ++it;
        if (eligible(*it)) return &*it;
    }
    // Few docs spread over many buckets (or few of them eligible): a small set is looked at whole.
    if (docs_.size() > 1024) return nullptr;
    std::vector<const Entry*> all;
    for (const auto& entry : docs_)
        if (eligible(entry)) all.push_back(&entry);
    return all.empty() ? nullptr : all[next() % all.size()];
}

}  // namespace docsync
