// The engine's worker side: taking due work, running doc and keys queries through the Runner,
// publishing through the Publisher, and recording each outcome. The mutex is never held across SQL
// or a publish.
#include <algorithm>
#include <chrono>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "engine/channel.hpp"
#include "engine/engine_impl.hpp"

namespace docsync {

namespace {

// The wait before retry number `failures` (1 for the first): `first`, doubled per failure since,
// at most `cap` times `first`.
std::chrono::milliseconds backoff(std::chrono::milliseconds first, std::uint32_t failures,
                                  std::uint32_t cap) {
    std::int64_t factor = 1;
    for (std::uint32_t i = 1; i < failures && factor < cap; ++i) factor *= 2;
    return first * std::min<std::int64_t>(factor, cap);
}

}  // namespace

void Engine::Impl::start(unsigned threads) {
    if (options_.live_all) {
        auto retained = publisher_.retained_channels();
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& channel : retained) {
            Entry* entry = docs_.find_or_create(channel, true);
            if (entry) entry->second.set(DocFlags::Live);
        }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { worker_loop(); });
}

void Engine::Impl::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

bool Engine::Impl::run_once() {
    std::unique_lock<std::mutex> lock(mutex_);
    Job job;
    if (!take(job)) return false;
    run(job, lock);
    return true;
}

// Takes the next unit of work; false when there is none due. Lookups and doc computes take turns
// while both wait, so neither starves the other.
bool Engine::Impl::take(Job& job) {
    Nanos t = now();
    docs_.promote_due(t);
    lookups_.promote_due(t);
    bool docs_first = docs_turn_ && docs_.has_ready();
    docs_turn_ = !docs_turn_;
    if (!docs_first && lookups_.take(job.lookup)) {
        job.is_lookup = true;
        return true;
    }
    if (docs_.take(job.doc)) {
        job.is_lookup = false;
        job.defs = catalog_.shared();
        job.version = DocVersion{generation_, job.doc.lsn ? job.doc.lsn : handled_lsn_};
        return true;
    }
    if (lookups_.take(job.lookup)) {
        job.is_lookup = true;
        return true;
    }
    return false;
}

void Engine::Impl::run(Job& job, std::unique_lock<std::mutex>& lock) {
    if (job.is_lookup) {
        run_lookup(job.lookup, lock);
    } else {
        run_doc(job, lock);
    }
}

void Engine::Impl::run_doc(Job& job, std::unique_lock<std::mutex>& lock) {
    DocJob& dj = job.doc;
    const DocQuery* query = dj.query < job.defs->queries.size() ? &job.defs->queries[dj.query] : nullptr;
    ParsedChannel parsed;
    DocOutcome outcome;
    bool published = false;
    std::string publish_error;
    Nanos compute_time = 0;
    lock.unlock();
    if (!query || !parse_channel(dj.channel, parsed) || parsed.values.size() != query->params.size()) {
        outcome.kind = OutcomeKind::Permanent;
        outcome.error = "channel \"" + dj.channel + "\" no longer matches a defined query";
    } else {
        Visibility need{dj.xids, job.version.lsn};
        Nanos started = now();
        try {
            outcome = runner_.run_doc(*query, parsed.values, need);
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
                publisher_.publish(dj.channel, outcome.doc, job.version);
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
    Entry& entry = *dj.entry;
    bool walk_job = docs_.end_compute(dj);
    QueryStats* stats = query ? catalog_.stats_of(dj.query, query->name) : nullptr;
    if (outcome.kind != OutcomeKind::NotVisible && query) {
        ++counters_.recomputes;
        if (stats) {
            ++stats->recomputes;
            stats->compute_ns += static_cast<std::uint64_t>(compute_time);
        }
    }
    std::uint32_t failures = entry.second.failures + 1;  // in a row, counting this one
    auto retry = [&](std::chrono::milliseconds first, std::uint32_t cap, bool round) {
        docs_.retry(entry, dj, backoff(first, failures, cap), walk_job, round);
    };
    if (outcome.kind == OutcomeKind::Ok && published) {
        ++counters_.publishes;
        if (stats) ++stats->publishes;
        docs_.published(entry, walk_job);
    } else if (outcome.kind == OutcomeKind::Ok) {
        // a sink that can never take a write again said so once; the worker is stopping
        record_transient("publishing " + dj.channel, publish_error, !publisher_.fatal());
        retry(options_.transient_backoff, options_.transient_backoff_cap, true);
    } else if (outcome.kind == OutcomeKind::NotVisible) {
        ++counters_.not_visible_retries;
        // not a round: retry after the short backoff
        retry(options_.not_visible_backoff, options_.not_visible_backoff_cap, false);
    } else if (outcome.kind == OutcomeKind::Transient) {
        record_transient("computing " + dj.channel, outcome.error, true);
        retry(options_.transient_backoff, options_.transient_backoff_cap, true);
    } else {
        record_permanent(stats, dj.channel, outcome.error, outcome.sqlstate);
        log_warning("engine", "computing " + dj.channel + " failed: " + outcome.error);
        // A recorded outcome: its transactions complete; the doc is retried off the ack path.
        docs_.failed(entry, backoff(options_.permanent_backoff, failures, options_.permanent_backoff_cap),
                     walk_job);
    }
    complete_finished(lock);
}

void Engine::Impl::run_lookup(Lookup& lookup, std::unique_lock<std::mutex>& lock) {
    const Watch& watch = lookup.defs->watches[lookup.watch];
    const DocQuery* query = lookup.defs->find_query(watch.query);
    KeysQuery keys{watch.query, *watch.keys_sql, query ? query->search_path : std::string(),
                   watch.schema + "." + watch.table, query ? query->refused : std::string()};
    std::size_t max_keys = options_.max_keys;
    Nanos started = now();
    lock.unlock();
    KeysOutcome outcome;
    try {
        outcome = runner_.run_keys(keys, lookup.args, max_keys, Visibility{lookup.xids, lookup.end_lsn});
    } catch (const std::exception& e) {
        outcome.kind = OutcomeKind::Transient;
        outcome.error = e.what();
    }
    if (outcome.kind == OutcomeKind::Ok && query) {
        for (const auto& row : outcome.keys) {
            if (row.size() != query->params.size()) {
                outcome.kind = OutcomeKind::Permanent;
                outcome.error = "the keys query of the watch of \"" + watch.query + "\" on " + keys.table +
                                " returned " + std::to_string(row.size()) + " columns; query \"" +
                                watch.query + "\" takes " + std::to_string(query->params.size()) + " params";
                break;
            }
        }
    }
    lock.lock();
    auto key = lookup.key();
    bool current = lookup.epoch == epoch_;
    if (!current) lookup.seqs.clear();  // a reset forgot those transactions
    auto release_all = [&] {
        for (auto seq : lookup.seqs) ledger_.release(seq);
    };
    ++counters_.keys_lookups;
    std::uint16_t query_now = query ? catalog_.find(query->name) : kNoQuery;  // a reload may have dropped it
    // A doc the lookup dirties: its next compute must see what the lookup saw and, with `waits`,
    // completes the lookup's transactions.
    auto dirty = [&](Entry& entry, bool waits) {
        Doc& doc = entry.second;
        for (auto xid : lookup.xids) doc.add_xid(xid);
        doc.lsn = std::max(doc.lsn, lookup.end_lsn);
        if (waits)
            for (auto seq : lookup.seqs) ledger_.wait(doc.pending_seq, seq);
        docs_.schedule(entry);
    };
    if (outcome.kind == OutcomeKind::Ok && query_now != kNoQuery) {
        for (const auto& row : outcome.keys) {
            Entry* entry = docs_.find_or_create(build_channel(query->name, row), options_.live_all);
            if (!entry) continue;
            if (options_.live_all) entry->second.set(DocFlags::Live);
            if (!entry->second.has(DocFlags::Live)) continue;
            dirty(*entry, true);
        }
        release_all();
    } else if (outcome.kind == OutcomeKind::NotVisible || outcome.kind == OutcomeKind::Transient) {
        ++lookup.failures;
        std::chrono::milliseconds wait;
        if (outcome.kind == OutcomeKind::NotVisible) {
            ++counters_.not_visible_retries;
            wait = backoff(options_.not_visible_backoff, lookup.failures, options_.not_visible_backoff_cap);
        } else {
            record_transient("keys lookup on " + keys.table, outcome.error, true);
            wait = backoff(options_.transient_backoff, lookup.failures, options_.transient_backoff_cap);
        }
        if (!current) lookup.epoch = epoch_;
        lookups_.retry(now() + to_nanos(wait), std::move(lookup));
    } else if (query_now != kNoQuery) {
        record_permanent(catalog_.stats_of(query_now, query->name), "keys:" + keys.table, outcome.error,
                         outcome.sqlstate);
        log_warning("engine", "keys lookup on " + keys.table + " failed: " + outcome.error +
                                  "; recomputing every live doc of \"" + query->name + "\" instead");
        // Never silently nothing: the docs it would have named are among the live ones.
        docs_.for_each_live(query_now, [&](Entry& entry) { dirty(entry, false); });
        release_all();
    } else {
        release_all();  // the query was dropped meanwhile
    }
    lookups_.finish(key, started + to_nanos(options_.min_round_interval), now());
    complete_finished(lock);
}

Nanos Engine::Impl::next_due() const { return std::min(docs_.next_due(), lookups_.next_due()); }

void Engine::Impl::worker_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    Nanos last_expiry = now();
    while (!stopping_) {
        Job job;
        if (take(job)) {
            run(job, lock);
            continue;
        }
        Nanos t = now();
        if (t - last_expiry > to_nanos(options_.lease_check_interval)) {
            docs_.drop_expired(t);
            last_expiry = t;
        }
        // Wake for new work, or to look at the clock again.
        auto wait = options_.idle_wake;
        Nanos due = next_due();
        if (due != std::numeric_limits<Nanos>::max()) {
            auto left = std::chrono::nanoseconds(std::max<Nanos>(due - t, 0));
            wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(left) +
                                      std::chrono::milliseconds(1));
        }
        wake_.wait_for(lock, wait);
    }
}

}  // namespace docsync
