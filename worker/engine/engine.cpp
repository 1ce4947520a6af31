// The recompute engine; the model is described in engine.hpp.
#include "engine/engine.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/channel.hpp"

namespace docsync {

namespace {

constexpr std::uint16_t kNoQuery = std::numeric_limits<std::uint16_t>::max();

// Doc flags.
constexpr std::uint8_t kLive = 1;      // followed: changes reach it
constexpr std::uint8_t kDirty = 2;     // needs a compute
constexpr std::uint8_t kQueued = 4;    // in the ready queue
constexpr std::uint8_t kInFlight = 8;  // a worker computes it
constexpr std::uint8_t kTxn = 16;      // the open transaction dirtied it (scheduled at COMMIT)
constexpr std::uint8_t kDelayed = 32;  // waiting for a retry time (retry_at)
constexpr std::uint8_t kOffAck = 64;   // the delay follows a permanent failure: new waiters skip it
constexpr std::uint8_t kWalk = 128;    // the running recompute of every live doc has yet to take it

using Nanos = std::int64_t;

Nanos to_nanos(Clock::TimePoint t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::chrono::milliseconds backoff(std::chrono::milliseconds first, std::uint32_t failures, int max_factor) {
    std::int64_t factor = 1;
    for (std::uint32_t i = 1; i < failures && factor < max_factor; ++i) factor *= 2;
    return first * std::min<std::int64_t>(factor, max_factor);
}

// One doc the engine knows. Kept small: live docs can number in the hundreds of thousands.
struct Doc {
    Nanos lease_until = 0;               // listed by a liveness poll until then
    Nanos grace_until = 0;               // warmed or touched: an incomplete picture cannot drop it
    Nanos retry_at = 0;                  // with kDelayed
    Nanos last_start = 0;                // when its last compute started (pacing)
    Lsn lsn = 0;                         // highest COMMIT end LSN among the changes handled for it
    std::uint64_t pending_seq = 0;       // oldest transaction waiting for the next compute (0: none)
    std::uint64_t flight_seq = 0;        // oldest transaction the running compute satisfies
    std::vector<std::uint64_t> xids;     // what the next compute must see (invariant 3)
    std::uint32_t failures = 0;          // consecutive failed computes
    std::uint16_t query = kNoQuery;      // index into the definitions' queries
    std::uint8_t flags = 0;
};

using DocMap = std::unordered_map<std::string, Doc>;
using Entry = DocMap::value_type;  // channel and doc; nodes never move

// A keys lookup queued by a reverse-index watch: one per (definitions, watch, key values) at a time,
// on behalf of every transaction that asked for it meanwhile.
struct Lookup {
    std::shared_ptr<const Definitions> defs;
    std::uint16_t watch = 0;
    SqlArgs args;
    std::vector<std::uint64_t> seqs;  // the transactions waiting on it (their stream sequences)
    std::uint64_t epoch = 0;
    std::vector<std::uint64_t> xids;  // the transactions it must see (invariant 3)
    Lsn end_lsn = 0;
    std::uint32_t failures = 0;
    Nanos retry_at = 0;

    using Key = std::tuple<const Definitions*, std::uint16_t, SqlArgs>;
    Key key() const { return {defs.get(), watch, args}; }

    // Takes over what `other` waits for: its transactions, what it must see.
    void merge(Lookup&& other) {
        seqs.insert(seqs.end(), other.seqs.begin(), other.seqs.end());
        for (auto xid : other.xids)
            if (std::find(xids.begin(), xids.end(), xid) == xids.end()) xids.push_back(xid);
        end_lsn = std::max(end_lsn, other.end_lsn);
        epoch = std::max(epoch, other.epoch);
    }
};

// How one watch reads a change of its table: positions of its columns in the change's values.
struct WatchPlan {
    std::uint16_t watch = 0;
    std::uint16_t query = 0;
    bool reverse = false;
    std::vector<int> positions;  // -1: the relation has no such column (values unknown)
};

struct RelPlan {
    bool definitions_table = false;
    bool described = false;  // a RELATION record was seen
    std::vector<WatchPlan> watches;
};

// A tuple's key values, resolved against the other tuple of the change.
enum class Key { Known, Unknown, SameAsNew };

}  // namespace

struct Engine::Impl {
    Impl(Runner& r, Publisher& p, const Clock& c, EngineOptions o, std::function<void(std::uint64_t)> cb)
        : runner(r), publisher(p), clock(c), options(o), complete(std::move(cb)) {
        defs = std::make_shared<const Definitions>();
    }

    Runner& runner;
    Publisher& publisher;
    const Clock& clock;
    const EngineOptions options;
    const std::function<void(std::uint64_t)> complete;

    mutable std::mutex mutex;
    std::condition_variable wake;
    std::vector<std::thread> threads;
    bool stopping = false;

    // Definitions and the plans derived from them.
    std::shared_ptr<const Definitions> defs;
    std::unordered_map<std::string, std::uint16_t> query_index;
    std::unordered_map<std::uint32_t, RelationRecord> relations;  // last RELATION per relid
    std::unordered_map<std::uint32_t, RelPlan> plans;
    std::vector<QueryStats> query_stats;

    // Docs and work.
    DocMap docs;
    std::deque<Entry*> ready;
    std::multimap<Nanos, std::string> delayed;  // retry time → channel
    // Keys lookups: the hot-row guarantee for reverse indexes. At most one queued and one running per
    // (definitions, watch, key values); changes that arrive meanwhile merge into the queued one, or
    // into one more round after the running one, so a storm of N changes to one row costs a few
    // lookups, not N.
    std::map<Lookup::Key, Lookup> lookups_queued;
    std::deque<Lookup::Key> lookup_order;          // the queued ones, first come first
    std::set<Lookup::Key> lookups_in_flight;
    std::map<Lookup::Key, Lookup> lookups_again;   // arrived while the same lookup was running (or paced)
    std::multimap<Nanos, Lookup::Key> lookups_paced;  // an again round waiting for min_round_interval
    bool docs_turn = false;                        // take() alternates lookups and docs when both wait
    std::multimap<Nanos, Lookup> delayed_lookups;
    std::uint64_t lookups_running = 0;
    std::uint64_t in_flight = 0;
    std::uint64_t generation = 0;
    Lsn handled_lsn = 0;  // highest COMMIT end LSN handled

    // Transactions.
    std::uint64_t epoch = 1;
    std::uint64_t next_seq = 1;
    std::uint64_t ticket_base = 1;           // tickets[i] belongs to sequence ticket_base + i
    std::deque<std::uint64_t> tickets;
    std::map<std::uint64_t, std::uint32_t> holds;  // sequence → how many docs/lookups/reloads wait on it
    std::uint64_t definitions_hold = 0;

    // The open transaction.
    bool in_txn = false;
    std::uint64_t txn_xid = 0;
    std::vector<Entry*> txn_docs;
    std::vector<Lookup> txn_lookups;
    std::vector<std::uint16_t> txn_broadcasts;
    bool txn_definitions = false;

    const Nanos interval =
        std::chrono::duration_cast<std::chrono::nanoseconds>(options.min_round_interval).count();
    EngineStats counters;  // the running totals (the gauges are computed in stats())

    // The recompute of every live doc: docs flagged kWalk wait for it, walk_running of its docs
    // compute now; done = total - flagged - running. walk_id (walk.id) tells its jobs from an
    // earlier one's.
    RecomputeProgress walk;
    std::uint64_t walk_id = 0;
    std::uint64_t walk_flagged = 0;
    std::uint64_t walk_running = 0;

    // ---- bookkeeping -------------------------------------------------------------------------

    Nanos now() const { return to_nanos(clock.now()); }

    void hold(std::uint64_t seq) {
        if (seq) ++holds[seq];
    }
    void release(std::uint64_t seq) {
        if (!seq) return;
        auto it = holds.find(seq);
        if (it == holds.end()) return;
        if (--it->second == 0) holds.erase(it);
    }

    // A doc the walk counts needs it no more (an outcome, or it stopped being live).
    void walk_unflag(Doc& doc) {
        if (!(doc.flags & kWalk)) return;
        doc.flags &= static_cast<std::uint8_t>(~kWalk);
        --walk_flagged;
        walk_settle();
    }
    void walk_settle() {
        if (walk.finished_ns == 0 && walk_flagged == 0 && walk_running == 0) {
            walk.done = walk.total;
            walk.finished_ns = now();
        }
    }

    // Tickets whose sequences nothing holds any more, in order.
    void collect_completed(std::vector<std::uint64_t>& out) {
        std::uint64_t watermark = holds.empty() ? next_seq : holds.begin()->first;
        while (!tickets.empty() && ticket_base < watermark) {
            out.push_back(tickets.front());
            tickets.pop_front();
            ++ticket_base;
            ++counters.txns_completed;
        }
    }

    void finish(std::vector<std::uint64_t>& done) {
        for (auto ticket : done) complete(ticket);
    }

    // `seq` waits for the doc's next compute.
    void add_waiter(Doc& doc, std::uint64_t seq) {
        if (!seq) return;
        if (doc.pending_seq == 0) {
            doc.pending_seq = seq;
            hold(seq);
        } else if (seq < doc.pending_seq) {
            hold(seq);
            release(doc.pending_seq);
            doc.pending_seq = seq;
        }
    }

    static void add_xid(Doc& doc, std::uint64_t xid) {
        if (xid && (doc.xids.empty() || doc.xids.back() != xid)) doc.xids.push_back(xid);
    }

    // Puts a dirty doc where a worker finds it (unless it already is, or runs, or waits for the
    // open transaction's COMMIT).
    void schedule(Entry& entry) {
        Doc& doc = entry.second;
        doc.flags |= kDirty;
        if (doc.flags & (kQueued | kInFlight | kTxn)) return;
        if (doc.flags & kDelayed) {
            // A doc retried after a permanent failure is not on the ack path; new waiters are.
            if (!(doc.flags & kOffAck) || doc.pending_seq == 0) return;
            doc.flags &= static_cast<std::uint8_t>(~(kDelayed | kOffAck));
        }
        if (doc.last_start && interval > 0) {
            Nanos due = doc.last_start + interval;
            if (now() < due) {  // a hot doc: its next round waits for the interval
                doc.retry_at = due;
                doc.flags |= kDelayed;
                delayed.emplace(due, entry.first);
                wake.notify_one();
                return;
            }
        }
        doc.flags |= kQueued;
        ready.push_back(&entry);
        wake.notify_one();
    }

    void delay(const std::string& channel, Doc& doc, std::chrono::milliseconds wait, bool off_ack) {
        doc.retry_at = now() + std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
        doc.flags = static_cast<std::uint8_t>((doc.flags | kDelayed | kDirty) & ~kOffAck);
        if (off_ack) doc.flags |= kOffAck;
        delayed.emplace(doc.retry_at, channel);
    }

    // The doc for `channel`, creating it when `create`. nullptr when unknown (or the channel names no
    // defined query with that many params).
    Entry* find_or_create(const std::string& channel, bool create) {
        auto it = docs.find(channel);
        if (it != docs.end()) return &*it;
        if (!create) return nullptr;
        ParsedChannel parsed;
        if (!parse_channel(channel, parsed)) {
            log_warning("engine", "ignoring channel \"" + channel + "\": not a db:<query>:<values> channel");
            return nullptr;
        }
        auto q = query_index.find(parsed.query);
        if (q == query_index.end() || defs->queries[q->second].params.size() != parsed.values.size()) {
            log_debug("engine", "ignoring channel \"" + channel + "\": no such query with that many params");
            return nullptr;
        }
        auto [created, inserted] = docs.try_emplace(channel);
        created->second.query = q->second;
        return &*created;
    }

    void make_live(Entry& entry) {
        if (!(entry.second.flags & kLive)) {
            entry.second.flags |= kLive;
            schedule(entry);  // it may have missed changes while it was not live
        }
    }

    // Erases docs that are neither live nor busy.
    void sweep() {
        for (auto it = docs.begin(); it != docs.end();) {
            if (!(it->second.flags & (kLive | kQueued | kInFlight | kTxn | kDelayed))) {
                release(it->second.pending_seq);
                walk_unflag(it->second);
                it = docs.erase(it);
            } else {
                ++it;
            }
        }
    }

    void drop_expired(Nanos t) {
        if (options.live_all) return;
        for (auto& [channel, doc] : docs) {
            if ((doc.flags & kLive) && doc.lease_until <= t && doc.grace_until <= t) doc.flags &= ~kLive;
        }
    }

    // ---- definitions -------------------------------------------------------------------------

    void rebuild_plans() {
        plans.clear();
        for (const auto& [relid, relation] : relations) {
            if (relation.schema == "docsync" &&
                (relation.name == "query_defs" || relation.name == "watch_defs" || relation.name == "def_generation"))
                plans[relid].definitions_table = true;
        }
        for (std::size_t w = 0; w < defs->watches.size(); ++w) {
            const Watch& watch = defs->watches[w];
            RelPlan& plan = plans[watch.relid];
            WatchPlan wp;
            wp.watch = static_cast<std::uint16_t>(w);
            wp.query = query_index.at(watch.query);
            wp.reverse = watch.reverse();
            const auto& columns = watch.reverse() ? watch.keys_args : watch.columns;
            auto rel = relations.find(watch.relid);
            plan.described = rel != relations.end();
            for (const auto& column : columns) {
                int position = -1;
                if (rel != relations.end()) {
                    const auto& rc = rel->second.columns;
                    for (std::size_t i = 0; i < rc.size(); ++i)
                        if (rc[i].attnum == column.attnum && !rc[i].missing) position = static_cast<int>(i);
                }
                wp.positions.push_back(position);
            }
            plan.watches.push_back(std::move(wp));
        }
    }

    // ---- the stream ----------------------------------------------------------------------------

    // The key the new tuple names. An unchanged out-of-line value (TOAST) equals the old one, which is
    // known only when the old tuple logged it.
    static Key new_key(const WatchPlan& plan, const std::vector<Value>& new_values,
                       const std::vector<Value>& old_values, SqlArgs& out) {
        out.clear();
        for (int position : plan.positions) {
            auto p = static_cast<std::size_t>(position);
            if (position < 0 || p >= new_values.size()) return Key::Unknown;
            const Value* v = &new_values[p];
            if (v->kind == ValueKind::Toast) {
                if (p >= old_values.size()) return Key::Unknown;
                v = &old_values[p];
            }
            if (v->kind == ValueKind::Text) {
                out.emplace_back(v->text);
            } else if (v->kind == ValueKind::Null) {
                out.emplace_back(std::nullopt);
            } else {
                return Key::Unknown;
            }
        }
        return Key::Known;
    }

    // The key the old tuple names. SAME means "equal to the new value"; all SAME: the key did not move.
    static Key old_key(const WatchPlan& plan, const std::vector<Value>& old_values, bool update, Key new_known,
                       const SqlArgs& key_new, SqlArgs& out) {
        out.clear();
        bool all_same = true;
        for (std::size_t j = 0; j < plan.positions.size(); ++j) {
            int position = plan.positions[j];
            auto p = static_cast<std::size_t>(position);
            if (position < 0 || p >= old_values.size()) return Key::Unknown;
            const Value& v = old_values[p];
            if (v.kind == ValueKind::Same && update) {
                if (new_known != Key::Known) {
                    out.emplace_back(std::nullopt);  // equal to an unknown new value: resolved below
                    continue;
                }
                out.push_back(key_new[j]);
                continue;
            }
            all_same = false;
            if (v.kind == ValueKind::Text) {
                out.emplace_back(v.text);
            } else if (v.kind == ValueKind::Null) {
                out.emplace_back(std::nullopt);
            } else {
                return Key::Unknown;
            }
        }
        if (all_same && update) return Key::SameAsNew;
        if (new_known != Key::Known && update) {
            // Some columns are SAME as a new value we do not know.
            for (std::size_t j = 0; j < plan.positions.size(); ++j)
                if (old_values[static_cast<std::size_t>(plan.positions[j])].kind == ValueKind::Same) return Key::Unknown;
        }
        return Key::Known;
    }

    void dirty_direct(std::uint16_t query, const SqlArgs& args) {
        std::string channel = build_channel(defs->queries[query].name, args);
        Entry* entry = find_or_create(channel, options.live_all);
        if (!entry) return;
        if (options.live_all) entry->second.flags |= kLive;
        if (!(entry->second.flags & kLive)) return;
        txn_touch(*entry);
    }

    // The open transaction dirtied `doc`: it waits for the compute scheduled at COMMIT.
    void txn_touch(Entry& entry) {
        Doc& doc = entry.second;
        if (doc.flags & kTxn) return;
        doc.flags |= kTxn;
        add_xid(doc, txn_xid);
        txn_docs.push_back(&entry);
    }

    void broadcast(std::uint16_t query) {
        if (std::find(txn_broadcasts.begin(), txn_broadcasts.end(), query) == txn_broadcasts.end())
            txn_broadcasts.push_back(query);
    }

    void handle(const ChangeRecord& change) {
        ++counters.changes;
        auto it = plans.find(change.relid);
        if (it == plans.end()) return;
        RelPlan& plan = it->second;
        if (plan.definitions_table) txn_definitions = true;
        static const std::vector<Value> none;
        SqlArgs key_new, key_old;
        for (const WatchPlan& wp : plan.watches) {
            bool update = change.op == ChangeOp::Update;
            bool has_new = change.op != ChangeOp::Delete;
            bool has_old = change.op != ChangeOp::Insert;
            Key nk = has_new ? new_key(wp, change.new_values, change.old_values, key_new) : Key::Unknown;
            Key ok = has_old ? old_key(wp, change.old_values, update, nk, key_new, key_old) : Key::Unknown;
            if (ok == Key::SameAsNew) has_old = false;
            if ((has_new && nk != Key::Known) || (has_old && ok != Key::Known)) {
                // Never silently nothing: a key we cannot read may name any live doc of the query.
                broadcast(wp.query);
                ++counters.broadcasts;
            }
            bool dirty_new = has_new && nk == Key::Known;
            bool dirty_old = has_old && ok == Key::Known && !(dirty_new && key_old == key_new);
            if (wp.reverse) {
                if (dirty_new) queue_lookup(wp, key_new);
                if (dirty_old) queue_lookup(wp, key_old);
            } else {
                if (dirty_new) dirty_direct(wp.query, key_new);
                if (dirty_old) dirty_direct(wp.query, key_old);
            }
        }
    }

    void queue_lookup(const WatchPlan& wp, const SqlArgs& args) {
        std::size_t scanned = 0;  // dedupe against the recent ones only: a big transaction stays linear
        for (auto it = txn_lookups.rbegin(); it != txn_lookups.rend() && scanned < 64; ++it, ++scanned)
            if (it->watch == wp.watch && it->args == args) return;
        Lookup lookup;
        lookup.defs = defs;
        lookup.watch = wp.watch;
        lookup.args = args;
        lookup.xids = {txn_xid};
        txn_lookups.push_back(std::move(lookup));
    }

    void handle_truncate(const TruncateRecord& truncate) {
        for (auto relid : truncate.relids) {
            auto it = plans.find(relid);
            if (it == plans.end()) continue;
            if (it->second.definitions_table) txn_definitions = true;
            for (const auto& wp : it->second.watches) {
                broadcast(wp.query);
                ++counters.broadcasts;
            }
        }
    }

    bool commit(const CommitRecord& c, std::uint64_t ticket, std::vector<std::uint64_t>& done) {
        std::uint64_t seq = next_seq;
        bool waits = false;
        handled_lsn = std::max(handled_lsn, c.end_lsn);
        for (std::uint16_t query : txn_broadcasts) {
            for (auto& entry : docs) {
                if (entry.second.query != query || !(entry.second.flags & kLive)) continue;
                txn_touch(entry);
            }
        }
        for (Entry* entry : txn_docs) entry->second.flags &= static_cast<std::uint8_t>(~kTxn);
        for (Entry* entry : txn_docs) {
            Doc& doc = entry->second;
            if (!(doc.flags & kLive)) {  // dropped meanwhile: nobody waits for it any more
                if (!(doc.flags & (kQueued | kInFlight | kDelayed))) {
                    release(doc.pending_seq);
                    doc.pending_seq = 0;
                    doc.xids.clear();
                    doc.flags &= static_cast<std::uint8_t>(~kDirty);
                    walk_unflag(doc);
                }
                continue;
            }
            doc.lsn = std::max(doc.lsn, c.end_lsn);
            add_waiter(doc, seq);
            waits = true;
            schedule(*entry);
        }
        for (auto& lookup : txn_lookups) {
            lookup.seqs = {seq};
            lookup.epoch = epoch;
            lookup.end_lsn = c.end_lsn;
            hold(seq);
            waits = true;
            enqueue_lookup(std::move(lookup));
        }
        bool definitions = txn_definitions;
        if (definitions) {
            release(definitions_hold);
            definitions_hold = seq;
            hold(seq);
            waits = true;
        }
        clear_txn();
        if (waits) {
            tickets.push_back(ticket);
            ++next_seq;
        } else {
            // It dirtied no live doc: complete at once (its sequence is reused by the next one).
            ++counters.txns_completed;
            done.push_back(ticket);
        }
        collect_completed(done);
        return definitions;
    }

    void clear_txn() {
        for (Entry* entry : txn_docs) entry->second.flags &= static_cast<std::uint8_t>(~kTxn);
        txn_docs.clear();
        txn_lookups.clear();
        txn_broadcasts.clear();
        txn_definitions = false;
        in_txn = false;
    }

    // ---- the workers -------------------------------------------------------------------------

    struct Job {
        bool is_lookup = false;
        Lookup lookup;
        std::string channel;
        Entry* entry = nullptr;
        std::shared_ptr<const Definitions> defs;
        std::uint16_t query = 0;
        std::vector<std::uint64_t> xids;
        DocVersion version;
        Nanos previous_start = 0;
        std::uint64_t walk_id = 0;  // the walk this compute counts for, 0: none
    };

    void promote_due(Nanos t) {
        while (!delayed.empty() && delayed.begin()->first <= t) {
            auto node = delayed.extract(delayed.begin());
            auto it = docs.find(node.mapped());
            if (it == docs.end()) continue;
            Doc& doc = it->second;
            if (!(doc.flags & kDelayed) || doc.retry_at != node.key()) continue;  // superseded
            doc.flags &= static_cast<std::uint8_t>(~(kDelayed | kOffAck));
            schedule(*it);
        }
        while (!delayed_lookups.empty() && delayed_lookups.begin()->first <= t) {
            auto node = delayed_lookups.extract(delayed_lookups.begin());
            enqueue_lookup(std::move(node.mapped()));
        }
        while (!lookups_paced.empty() && lookups_paced.begin()->first <= t) {
            auto key = lookups_paced.begin()->second;
            lookups_paced.erase(lookups_paced.begin());
            lookups_in_flight.erase(key);
            auto node = lookups_again.extract(key);
            if (!node.empty()) enqueue_lookup(std::move(node.mapped()));
        }
    }

    void enqueue_lookup(Lookup lookup) {
        auto key = lookup.key();
        if (lookups_in_flight.count(key)) {
            auto [it, fresh] = lookups_again.try_emplace(key);
            if (fresh) {
                it->second = std::move(lookup);
            } else {
                it->second.merge(std::move(lookup));
            }
            return;
        }
        auto [it, fresh] = lookups_queued.try_emplace(key);
        if (!fresh) {
            it->second.merge(std::move(lookup));
            return;
        }
        it->second = std::move(lookup);
        lookup_order.push_back(std::move(key));
        wake.notify_one();
    }

    bool take_lookup(Job& job) {
        if (lookup_order.empty()) return false;
        auto node = lookups_queued.extract(lookup_order.front());
        lookup_order.pop_front();
        lookups_in_flight.insert(node.key());
        job.is_lookup = true;
        job.lookup = std::move(node.mapped());
        ++lookups_running;
        return true;
    }

    // Takes the next unit of work; false when there is none due. Lookups and doc computes take
    // turns while both wait, so neither starves the other.
    bool take(Job& job) {
        promote_due(now());
        bool docs_first = docs_turn && !ready.empty();
        docs_turn = !docs_turn;
        if (!docs_first && take_lookup(job)) return true;
        if (take_doc(job)) return true;
        return take_lookup(job);
    }

    bool take_doc(Job& job) {
        while (!ready.empty()) {
            Entry* entry = ready.front();
            Doc* doc = &entry->second;
            ready.pop_front();
            doc->flags &= static_cast<std::uint8_t>(~kQueued);
            if (doc->flags & kTxn) continue;  // rescheduled at COMMIT
            if (!(doc->flags & kLive)) {
                doc->flags &= static_cast<std::uint8_t>(~kDirty);
                release(doc->pending_seq);
                doc->pending_seq = 0;
                doc->xids.clear();
                walk_unflag(*doc);
                continue;
            }
            if (!(doc->flags & kDirty)) continue;
            doc->flags = static_cast<std::uint8_t>((doc->flags | kInFlight) & ~kDirty);
            job.previous_start = doc->last_start;
            doc->last_start = now();
            doc->flight_seq = doc->pending_seq;
            doc->pending_seq = 0;
            job.is_lookup = false;
            job.entry = entry;
            job.channel = entry->first;
            job.xids = std::move(doc->xids);
            doc->xids.clear();
            job.defs = defs;
            job.query = doc->query;
            job.version = DocVersion{generation, doc->lsn ? doc->lsn : handled_lsn};
            job.walk_id = 0;
            if (doc->flags & kWalk) {
                doc->flags &= static_cast<std::uint8_t>(~kWalk);
                --walk_flagged;
                ++walk_running;
                job.walk_id = walk_id;
            }
            ++in_flight;
            return true;
        }
        return false;
    }

    void run(Job& job, std::unique_lock<std::mutex>& lock) {
        if (job.is_lookup) {
            run_lookup(job.lookup, lock);
        } else {
            run_doc(job, lock);
        }
    }

    // A subscriber asked for the doc (touch, warm): renew its lease and protect it from a poll that
    // may predate the subscriber.
    void protect(Doc& doc) {
        Nanos t = now();
        doc.grace_until = t + std::chrono::duration_cast<std::chrono::nanoseconds>(options.touch_grace).count();
        doc.lease_until =
            std::max(doc.lease_until, t + std::chrono::duration_cast<std::chrono::nanoseconds>(options.lease).count());
    }

    // Completes the tickets no doc, lookup or reload holds any more, outside the engine's mutex.
    void complete_finished(std::unique_lock<std::mutex>& lock) {
        std::vector<std::uint64_t> done;
        collect_completed(done);
        if (!done.empty()) {
            lock.unlock();
            finish(done);
            lock.lock();
        }
    }

    void run_doc(Job& job, std::unique_lock<std::mutex>& lock) {
        const DocQuery* query = job.query < job.defs->queries.size() ? &job.defs->queries[job.query] : nullptr;
        ParsedChannel parsed;
        DocOutcome outcome;
        bool published = false;
        std::string publish_error;
        Nanos compute_time = 0;
        lock.unlock();
        if (!query || !parse_channel(job.channel, parsed) || parsed.values.size() != query->params.size()) {
            outcome.kind = OutcomeKind::Permanent;
            outcome.error = "channel \"" + job.channel + "\" no longer matches a defined query";
        } else {
            Visibility need{job.xids, job.version.lsn};
            Nanos started = now();
            try {
                outcome = runner.run_doc(*query, parsed.values, need);
            } catch (const std::exception& e) {
                outcome.kind = OutcomeKind::Transient;
                outcome.error = e.what();
            }
            compute_time = now() - started;
            if (outcome.kind == OutcomeKind::Ok) {
                // A doc's version is the WAL position its content reflects: at least the commits it
                // completes, and the compute's snapshot, so a recompute is never older than anything
                // published before it (a startup recompute handles no commit at all).
                job.version.lsn = std::max(job.version.lsn, outcome.snapshot_lsn);
                try {
                    publisher.publish(job.channel, outcome.doc, job.version);
                    published = true;
                } catch (const Error& e) {
                    if (e.transient()) {
                        publish_error = e.what();
                    } else {  // the sink refuses this doc for good (e.g. not valid JSON): an outcome
                        outcome.kind = OutcomeKind::Permanent;
                        outcome.error = std::string("the sink refused the doc: ") + e.what();
                        outcome.doc.reset();
                    }
                } catch (const std::exception& e) {
                    publish_error = e.what();
                }
            }
        }
        lock.lock();
        --in_flight;
        Entry& entry = *job.entry;
        Doc& doc = entry.second;
        doc.flags &= static_cast<std::uint8_t>(~kInFlight);
        QueryStats* stats = job.query < query_stats.size() && query && query_stats[job.query].name == query->name
                                ? &query_stats[job.query]
                                : nullptr;
        if (outcome.kind != OutcomeKind::NotVisible && query) {
            ++counters.computes;
            if (stats) {
                ++stats->computes;
                stats->compute_ns += static_cast<std::uint64_t>(compute_time);
            }
        }
        bool walk_job = job.walk_id != 0 && job.walk_id == walk_id;
        if (walk_job) --walk_running;
        auto retry_with_waiters = [&](std::chrono::milliseconds wait) {
            if (walk_job) {  // not done yet: the retry counts for the walk
                doc.flags |= kWalk;
                ++walk_flagged;
            }
            // The running compute's waiters wait for the next one; its xids must be seen by it too.
            if (doc.flight_seq) {
                add_waiter(doc, doc.flight_seq);
                release(doc.flight_seq);
                doc.flight_seq = 0;
            }
            doc.xids.insert(doc.xids.begin(), job.xids.begin(), job.xids.end());
            ++doc.failures;
            delay(job.channel, doc, wait, false);
        };
        if (outcome.kind == OutcomeKind::Ok && published) {
            ++counters.published;
            if (stats) ++stats->published;
            release(doc.flight_seq);
            doc.flight_seq = 0;
            doc.failures = 0;
            if (doc.flags & kDirty) schedule(entry);
        } else if (outcome.kind == OutcomeKind::Ok) {
            ++counters.transient_failures;
            counters.last_transient_error = "publishing " + job.channel + " failed: " + publish_error;
            // a sink that can never take a write again said so once; the worker is stopping
            if (!publisher.fatal())
                log_warning("engine", "publishing " + job.channel + " failed, will retry: " + publish_error);
            retry_with_waiters(backoff(options.transient_backoff, doc.failures + 1, 100));
        } else if (outcome.kind == OutcomeKind::NotVisible) {
            ++counters.not_visible;
            doc.last_start = job.previous_start;  // not a round: retry after the short backoff
            retry_with_waiters(backoff(options.not_visible_backoff, doc.failures + 1, 40));
        } else if (outcome.kind == OutcomeKind::Transient) {
            ++counters.transient_failures;
            counters.last_transient_error = "computing " + job.channel + " failed: " + outcome.error;
            log_warning("engine", "computing " + job.channel + " failed, will retry: " + outcome.error);
            retry_with_waiters(backoff(options.transient_backoff, doc.failures + 1, 100));
        } else {
            ++counters.permanent_failures;
            if (stats) {
                ++stats->errors;
                stats->last_error = outcome.error;
                stats->last_sqlstate = outcome.sqlstate;
                stats->last_channel = job.channel;
            }
            log_warning("engine", "computing " + job.channel + " failed: " + outcome.error);
            // A recorded outcome: its transactions complete; the doc is retried off the ack path.
            release(doc.flight_seq);
            doc.flight_seq = 0;
            ++doc.failures;
            bool waiters = doc.pending_seq != 0;
            delay(job.channel, doc, backoff(options.permanent_backoff, doc.failures, 300), true);
            if (waiters) schedule(entry);
        }
        if (walk_job) walk_settle();
        complete_finished(lock);
    }

    void run_lookup(Lookup& lookup, std::unique_lock<std::mutex>& lock) {
        const Watch& watch = lookup.defs->watches[lookup.watch];
        const DocQuery* query = lookup.defs->find_query(watch.query);
        KeysQuery keys{watch.query, *watch.keys_sql, query ? query->search_path : std::string(),
                       watch.schema + "." + watch.table, query ? query->refused : std::string()};
        std::size_t max_keys = options.max_keys;
        Nanos started = now();
        lock.unlock();
        KeysOutcome outcome;
        try {
            outcome = runner.run_keys(keys, lookup.args, max_keys, Visibility{lookup.xids, lookup.end_lsn});
        } catch (const std::exception& e) {
            outcome.kind = OutcomeKind::Transient;
            outcome.error = e.what();
        }
        if (outcome.kind == OutcomeKind::Ok && query) {
            for (const auto& row : outcome.keys) {
                if (row.size() != query->params.size()) {
                    outcome.kind = OutcomeKind::Permanent;
                    outcome.error = "the keys query of the watch of \"" + watch.query + "\" on " + keys.table +
                                    " returned " + std::to_string(row.size()) + " columns; query \"" + watch.query +
                                    "\" takes " + std::to_string(query->params.size()) + " params";
                    break;
                }
            }
        }
        lock.lock();
        --lookups_running;
        auto key = lookup.key();
        lookups_in_flight.erase(key);
        bool current = lookup.epoch == epoch;
        if (!current) lookup.seqs.clear();  // a reset forgot those transactions
        auto release_all = [&] {
            for (auto seq : lookup.seqs) release(seq);
        };
        ++counters.keys_lookups;
        auto query_now = query ? query_index.find(query->name) : query_index.end();
        bool known = query_now != query_index.end();
        if (outcome.kind == OutcomeKind::Ok && known) {
            for (const auto& row : outcome.keys) {
                Entry* entry = find_or_create(build_channel(query->name, row), options.live_all);
                if (!entry) continue;
                Doc& doc = entry->second;
                if (options.live_all) doc.flags |= kLive;
                if (!(doc.flags & kLive)) continue;
                for (auto xid : lookup.xids) add_xid(doc, xid);
                doc.lsn = std::max(doc.lsn, lookup.end_lsn);
                for (auto seq : lookup.seqs) add_waiter(doc, seq);
                schedule(*entry);
            }
            release_all();
        } else if (outcome.kind == OutcomeKind::NotVisible || outcome.kind == OutcomeKind::Transient) {
            if (outcome.kind == OutcomeKind::NotVisible) {
                ++counters.not_visible;
            } else {
                ++counters.transient_failures;
                counters.last_transient_error = "keys lookup on " + keys.table + " failed: " + outcome.error;
                log_warning("engine", "keys lookup on " + keys.table + " failed, will retry: " + outcome.error);
            }
            ++lookup.failures;
            auto wait = outcome.kind == OutcomeKind::NotVisible
                            ? backoff(options.not_visible_backoff, lookup.failures, 40)
                            : backoff(options.transient_backoff, lookup.failures, 100);
            lookup.retry_at = now() + std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
            if (!current) lookup.epoch = epoch;
            delayed_lookups.emplace(lookup.retry_at, std::move(lookup));
        } else if (known) {
            ++counters.permanent_failures;
            QueryStats& stats = query_stats[query_now->second];
            ++stats.errors;
            stats.last_error = outcome.error;
            stats.last_sqlstate = outcome.sqlstate;
            stats.last_channel = "keys:" + keys.table;
            log_warning("engine", "keys lookup on " + keys.table + " failed: " + outcome.error +
                                      "; recomputing every live doc of \"" + query->name + "\" instead");
            // Never silently nothing: the docs it would have named are among the live ones.
            for (auto& entry : docs) {
                Doc& doc = entry.second;
                if (doc.query != query_now->second || !(doc.flags & kLive)) continue;
                for (auto xid : lookup.xids) add_xid(doc, xid);
                doc.lsn = std::max(doc.lsn, lookup.end_lsn);
                schedule(entry);
            }
            release_all();
        } else {
            release_all();  // the query was dropped meanwhile
        }
        // What changed while it ran: one more round, for all of them, started at least
        // min_round_interval after this one (like a hot doc's); until then the key stays busy, so
        // what arrives keeps merging into that round.
        if (auto again = lookups_again.find(key); again != lookups_again.end()) {
            Nanos due = started + interval;
            if (due > now()) {
                lookups_in_flight.insert(key);
                lookups_paced.emplace(due, key);
            } else {
                Lookup next = std::move(again->second);
                lookups_again.erase(again);
                enqueue_lookup(std::move(next));
            }
        }
        complete_finished(lock);
    }

    Nanos next_due() const {
        Nanos due = std::numeric_limits<Nanos>::max();
        if (!delayed.empty()) due = delayed.begin()->first;
        if (!delayed_lookups.empty()) due = std::min(due, delayed_lookups.begin()->first);
        if (!lookups_paced.empty()) due = std::min(due, lookups_paced.begin()->first);
        return due;
    }

    void worker_loop() {
        std::unique_lock<std::mutex> lock(mutex);
        Nanos last_expiry = now();
        while (!stopping) {
            Job job;
            if (take(job)) {
                run(job, lock);
                continue;
            }
            Nanos t = now();
            if (t - last_expiry > 1'000'000'000) {  // once a second: leases
                drop_expired(t);
                last_expiry = t;
            }
            // Wake for new work, or to look at the clock again (retries and leases; the clock may be a
            // test's own).
            auto wait = std::chrono::milliseconds(50);
            Nanos due = next_due();
            if (due != std::numeric_limits<Nanos>::max()) {
                auto left = std::chrono::nanoseconds(std::max<Nanos>(due - t, 0));
                wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(left) +
                                          std::chrono::milliseconds(1));
            }
            wake.wait_for(lock, wait);
        }
    }
};

Engine::Engine(Runner& runner, Publisher& publisher, const Clock& clock, EngineOptions options,
               std::function<void(std::uint64_t)> complete)
    : impl_(std::make_unique<Impl>(runner, publisher, clock, options, std::move(complete))) {}

Engine::~Engine() { stop(); }

const Definitions& Engine::definitions() const { return *impl_->defs; }

void Engine::load_definitions(Definitions definitions) {
    Impl& s = *impl_;
    std::vector<std::uint64_t> done;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        auto next = std::make_shared<const Definitions>(std::move(definitions));
        if (next->queries.size() >= kNoQuery) throw Error("too many doc queries: at most 65534 are supported");
        if (next->watches.size() >= kNoQuery) throw Error("too many watches: at most 65534 are supported");
        const Definitions& old = *s.defs;
        // Which queries changed: their SQL, params, search_path, refusal, what they depend on besides
        // rows (DDL changes the fingerprint) or the watches that feed them.
        auto watches_of = [](const Definitions& d, const std::string& name) {
            std::vector<Watch> out;
            for (const auto& w : d.watches)
                if (w.query == name) out.push_back(w);
            return out;
        };
        std::vector<std::string> changed;
        for (const auto& q : next->queries) {
            const DocQuery* before = old.find_query(q.name);
            if (!before || before->sql != q.sql || before->params != q.params || before->search_path != q.search_path ||
                before->refused != q.refused || before->fingerprint != q.fingerprint || watches_of(old, q.name) != watches_of(*next, q.name))
                changed.push_back(q.name);
        }
        std::vector<QueryStats> stats;
        s.query_index.clear();
        for (std::size_t i = 0; i < next->queries.size(); ++i) {
            const auto& name = next->queries[i].name;
            s.query_index.emplace(name, static_cast<std::uint16_t>(i));
            QueryStats qs;
            qs.name = name;
            for (auto& prior : s.query_stats)
                if (prior.name == name) qs = std::move(prior);
            stats.push_back(std::move(qs));
        }
        s.query_stats = std::move(stats);
        s.defs = std::move(next);
        s.rebuild_plans();
        std::uint64_t seq = s.definitions_hold;
        for (auto& entry : s.docs) {
            const std::string& channel = entry.first;
            Doc& doc = entry.second;
            ParsedChannel parsed;
            auto q = parse_channel(channel, parsed) ? s.query_index.find(parsed.query) : s.query_index.end();
            if (q == s.query_index.end() || s.defs->queries[q->second].params.size() != parsed.values.size()) {
                doc.query = kNoQuery;
                doc.flags &= static_cast<std::uint8_t>(~kLive);  // its query is gone
                continue;
            }
            doc.query = q->second;
            if ((doc.flags & kLive) && std::find(changed.begin(), changed.end(), parsed.query) != changed.end()) {
                s.add_waiter(doc, seq);
                s.schedule(entry);
            }
        }
        s.sweep();
        s.release(seq);
        s.definitions_hold = 0;
        s.collect_completed(done);
    }
    s.finish(done);
}

void Engine::on_begin(const BeginRecord& begin) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->clear_txn();
    impl_->in_txn = true;
    impl_->txn_xid = begin.xid;
}

void Engine::on_relation(const RelationRecord& relation) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->relations[relation.relid] = relation;
    impl_->rebuild_plans();
}

void Engine::on_change(const ChangeRecord& change) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->handle(change);
}

void Engine::on_truncate(const TruncateRecord& truncate) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->handle_truncate(truncate);
}

void Engine::on_message(const MessageRecord& message) {
    if (!message.transactional || message.prefix != kDefinitionsMessagePrefix) return;
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->txn_definitions = true;
}

bool Engine::on_commit(const CommitRecord& commit, std::uint64_t ticket) {
    std::vector<std::uint64_t> done;
    bool definitions;
    {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        definitions = impl_->commit(commit, ticket, done);
    }
    impl_->finish(done);
    return definitions;
}

void Engine::set_generation(std::uint64_t generation) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->generation = generation;
}

void Engine::sync_live(const std::vector<std::string>& channels, bool complete) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    Nanos t = s.now();
    Nanos lease = std::chrono::duration_cast<std::chrono::nanoseconds>(s.options.lease).count();
    std::vector<Doc*> listed;
    for (const auto& channel : channels) {
        Entry* entry = s.find_or_create(channel, true);
        if (!entry) continue;
        entry->second.lease_until = t + lease;
        s.make_live(*entry);
        listed.push_back(&entry->second);
    }
    if (complete && !s.options.live_all) {
        std::sort(listed.begin(), listed.end());
        for (auto& [channel, doc] : s.docs) {
            if (!(doc.flags & kLive) || doc.grace_until > t) continue;
            if (!std::binary_search(listed.begin(), listed.end(), &doc)) doc.flags &= static_cast<std::uint8_t>(~kLive);
        }
    }
    s.drop_expired(t);
    s.sweep();
}

void Engine::touch(const std::string& channel) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    Entry* entry = s.find_or_create(channel, true);
    if (!entry) return;
    s.protect(entry->second);
    s.make_live(*entry);
}

void Engine::warm(const std::string& channel) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    Entry* entry = s.find_or_create(channel, true);
    if (!entry) return;
    s.protect(entry->second);
    entry->second.flags |= kLive;
    s.schedule(*entry);  // computed as soon as a worker is free, live or not before
}

void Engine::recompute_all_live(RecomputeReason reason) {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.walk_id;  // computes of an earlier walk still running no longer count
    s.walk = RecomputeProgress{reason, s.walk_id, 0, 0, s.now(), 0};
    s.walk_flagged = 0;
    s.walk_running = 0;
    for (auto& entry : s.docs) {
        Doc& doc = entry.second;
        doc.flags &= static_cast<std::uint8_t>(~kWalk);
        if (!(doc.flags & kLive)) continue;
        doc.flags |= kWalk;
        ++s.walk_flagged;
        s.schedule(entry);
    }
    s.walk.total = s.walk_flagged;
    s.walk_settle();
}

void Engine::start(unsigned threads) {
    Impl& s = *impl_;
    if (s.options.live_all) {
        auto retained = s.publisher.retained_channels();
        std::lock_guard<std::mutex> lock(s.mutex);
        for (const auto& channel : retained) {
            Entry* entry = s.find_or_create(channel, true);
            if (entry) entry->second.flags |= kLive;
        }
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = false;
    for (unsigned i = 0; i < threads; ++i) s.threads.emplace_back([&s] { s.worker_loop(); });
}

void Engine::stop() {
    Impl& s = *impl_;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.stopping = true;
    }
    s.wake.notify_all();
    for (auto& t : s.threads) t.join();
    s.threads.clear();
}

void Engine::reset_stream() {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    s.clear_txn();
    ++s.epoch;
    s.tickets.clear();
    s.ticket_base = s.next_seq;
    s.holds.clear();
    s.definitions_hold = 0;
    for (auto& [channel, doc] : s.docs) {
        doc.pending_seq = 0;
        doc.flight_seq = 0;
    }
    for (auto& [key, lookup] : s.lookups_queued) lookup.seqs.clear();
    for (auto& [key, lookup] : s.lookups_again) lookup.seqs.clear();
    for (auto& [due, lookup] : s.delayed_lookups) lookup.seqs.clear();
}

bool Engine::run_once() {
    Impl& s = *impl_;
    std::unique_lock<std::mutex> lock(s.mutex);
    Impl::Job job;
    if (!s.take(job)) return false;
    s.run(job, lock);
    return true;
}

EngineStats Engine::stats() const {
    const Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.mutex);
    EngineStats out = s.counters;
    for (const auto& [channel, doc] : s.docs) {
        if (!(doc.flags & kLive)) continue;
        ++out.live_docs;
        if (doc.flags & kDirty) ++out.dirty_docs;
    }
    out.keys_queued = s.lookups_queued.size() + s.lookups_again.size() + s.delayed_lookups.size() + s.lookups_running;
    out.in_flight = s.in_flight;
    out.waiting_txns = s.tickets.size();
    out.recompute = s.walk;
    if (!out.recompute.finished_ns) out.recompute.done = s.walk.total - s.walk_flagged - s.walk_running;
    out.queries = s.query_stats;
    return out;
}

}  // namespace docsync
