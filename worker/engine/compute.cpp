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
#include "engine/key_text.hpp"

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
        // The journal first (quietly: its docs are named there already), then what the sink holds
        // that the journal lacks (an UNLOGGED journal comes back empty after a crash of PostgreSQL)
        // is named to it; a journaled channel whose query is gone is forgotten.
        if (options_.journal) {
            auto journaled = options_.journal->load();
            std::vector<std::string> gone;
            MutexLock lock(mutex_);
            docs_.set_journal_quiet(true);
            for (const auto& channel : journaled) {
                Entry* entry = docs_.find_or_create(channel, true);
                if (entry)
                    entry->second.set(DocFlags::Live);
                else
                    gone.push_back(channel);
            }
            docs_.set_journal_quiet(false);
            for (const auto& channel : gone) options_.journal->forgotten(channel);
        }
        auto retained = publisher_.retained_channels();
        std::vector<std::string> orphans;
        {
            MutexLock lock(mutex_);
            for (const auto& channel : retained) {
                Entry* entry = docs_.find_or_create(channel, true);
                if (entry)
                    entry->second.set(DocFlags::Live | DocFlags::Retained);
                else
                    orphans.push_back(channel);
            }
        }
        if (!orphans.empty()) {
            log_info("engine", std::to_string(orphans.size()) +
                                   " retained channel(s) name no doc (no such query, or a key not in canonical text, as "
                                   "logged); they expire instead of being kept");
            publisher_.expire_orphans(orphans);
        }
    }
    MutexLock lock(mutex_);
    stopping_ = false;
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { worker_loop(); });
}

void Engine::Impl::stop() {
    {
        MutexLock lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

bool Engine::Impl::run_once() {
    MutexLock lock(mutex_);
    Job job;
    if (!take(job)) return false;
    run(job);
    return true;
}

// Takes the next unit of work; false when there is none due. Lookups and doc computes take turns
// while both wait, so neither starves the other.
bool Engine::Impl::take(Job& job) {
    if (computes_held_) return false;  // EngineOptions::hold_computes
    Nanos t = now();
    docs_.promote_due(t);
    lookups_.promote_due(t);
    bool docs_first = docs_turn_ && docs_.has_ready();
    docs_turn_ = !docs_turn_;
    if (!docs_first && lookups_.take(job.lookups, options_.batch)) {
        job.is_lookup = true;
        return true;
    }
    if (docs_.take(job.docs, options_.batch)) {
        job.is_lookup = false;
        job.defs = catalog_.shared();
        job.versions.clear();
        for (const auto& doc : job.docs)
            job.versions.push_back(DocVersion{generation_, doc.lsn ? doc.lsn : handled_lsn_});
        return true;
    }
    if (lookups_.take(job.lookups, options_.batch)) {
        job.is_lookup = true;
        return true;
    }
    return false;
}

void Engine::Impl::run(Job& job) {
    if (job.is_lookup) {
        run_lookups(job);
    } else {
        run_docs(job);
    }
}

namespace {

// What a statement over items [begin, end) must see: everything each of them must (a hot doc's
// list can be long: sorted and made unique, never searched item by item).
Visibility union_of(const std::vector<Visibility>& needs, std::size_t begin, std::size_t end) {
    if (end - begin == 1) return needs[begin];
    Visibility out;
    for (std::size_t i = begin; i < end; ++i) {
        out.xids.insert(out.xids.end(), needs[i].xids.begin(), needs[i].xids.end());
        out.max_end_lsn = std::max(out.max_end_lsn, needs[i].max_end_lsn);
    }
    std::sort(out.xids.begin(), out.xids.end());
    out.xids.erase(std::unique(out.xids.begin(), out.xids.end()), out.xids.end());
    return out;
}

// Runs items [begin, end) with `run(begin, end)`, one statement for them all. When that statement
// fails as a whole for an error one of them may cause, the two halves run again, and so on down to
// single items: only the item at fault records the failure, and the others get their outcomes. A
// runner's exception is a transient outcome for each item.
template <class Outcome, class Run>
void run_halving(std::size_t begin, std::size_t end, std::vector<Outcome>& out, Run& run) {
    BatchOutcome<Outcome> got;
    try {
        got = run(begin, end);
    } catch (const std::exception& e) {
        for (std::size_t i = begin; i < end; ++i) {
            out[i].kind = OutcomeKind::Transient;
            out[i].error = e.what();
        }
        return;
    }
    if (!got.split && got.outcomes.size() == end - begin) {
        std::move(got.outcomes.begin(), got.outcomes.end(), out.begin() + static_cast<std::ptrdiff_t>(begin));
        return;
    }
    if (!got.split)
        got.error = "the runner returned " + std::to_string(got.outcomes.size()) + " outcomes for " +
                    std::to_string(end - begin) + " computes";
    if (end - begin == 1) {
        out[begin].kind = OutcomeKind::Permanent;
        out[begin].error = got.error;
        return;
    }
    std::size_t middle = begin + (end - begin) / 2;
    run_halving(begin, middle, out, run);
    run_halving(middle, end, out, run);
}

}  // namespace

// The server's spelling check of a channel's key (Runner::print_keys), on a worker thread without
// the mutex. True when the doc is to be computed: `checked` when the key is as PostgreSQL prints it
// (a check failing for another reason than the key leaves the compute to report it). False when
// the key is refused (another spelling, or a value PostgreSQL cannot read as its type): `out` says why.
bool Engine::Impl::server_key_check(const DocQuery& query, const std::string& channel, const SqlArgs& values,
                                    DocOutcome& out, bool& checked) {
    KeyPrintOutcome printed;
    try {
        printed = runner_.print_keys(query, values);
    } catch (const std::exception& e) {
        printed.kind = OutcomeKind::Transient;
        printed.error = e.what();
    }
    if (printed.kind == OutcomeKind::Ok && printed.printed.size() != values.size()) {
        printed.kind = OutcomeKind::Permanent;
        printed.error = "the runner printed " + std::to_string(printed.printed.size()) + " key values for " +
                        std::to_string(values.size());
    }
    if (printed.kind != OutcomeKind::Ok) {
        if (!sqlstate_is_invalid_input(printed.sqlstate)) {
            // not the key's fault (an outage, a query the check cannot wrap): the compute runs and
            // says what is wrong; the channel is asked again before its next compute
            log_debug("engine", "checking the key of " + channel + " failed: " + printed.error);
            return true;
        }
        out.kind = OutcomeKind::Permanent;
        out.sqlstate = printed.sqlstate;
        out.key_refused = true;
        out.error = "PostgreSQL refused its key: " + printed.error + " (SQLSTATE " + printed.sqlstate + ")";
        return false;
    }
    if (printed.printed == values) return checked = true;
    for (std::size_t k = 0; k < values.size(); ++k) {
        if (printed.printed[k] == values[k]) continue;
        out.kind = OutcomeKind::Permanent;
        out.key_refused = true;
        out.error = "param " + std::to_string(k + 1) + " is not as PostgreSQL prints it; the doc's channel is \"" +
                    build_channel(query.name, printed.printed) + "\"";
        break;
    }
    return false;
}

void Engine::Impl::run_docs(Job& job) {
    std::vector<DocJob>& jobs = job.docs;
    std::uint16_t index = jobs.front().query;
    const DocQuery* query = index < job.defs->queries.size() ? &job.defs->queries[index] : nullptr;
    // A key of a type engine/key_text.hpp cannot check is spelled-checked by the server once per
    // channel, before its first compute (read here, under the mutex; set after, under it again).
    std::vector<bool> ask(jobs.size(), false), asked(jobs.size(), false);
    if (query && !key_types_checked(query->key_types, query->params.size()))
        for (std::size_t i = 0; i < jobs.size(); ++i) ask[i] = !jobs[i].entry->second.has(DocFlags::KeyChecked);
    // Unlocking is safe: take() marked these docs running (no other worker takes them) and the job
    // holds its own definitions and versions; nothing below touches the engine's state until lock().
    mutex_.unlock();
    std::vector<DocOutcome> outcomes(jobs.size());
    // The docs whose channels still name the query run together; any other fails at once.
    std::vector<std::size_t> runs;
    std::vector<SqlArgs> args;
    std::vector<Visibility> needs;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        ParsedChannel parsed;
        if (!query || !parse_channel(jobs[i].channel, parsed) || parsed.values.size() != query->params.size()) {
            outcomes[i].kind = OutcomeKind::Permanent;
            outcomes[i].error = "channel \"" + jobs[i].channel + "\" no longer matches a defined query";
            continue;
        }
        bool checked = false;
        if (ask[i] && !server_key_check(*query, jobs[i].channel, parsed.values, outcomes[i], checked)) continue;
        asked[i] = checked;
        runs.push_back(i);
        args.push_back(std::move(parsed.values));
        needs.push_back(Visibility{jobs[i].xids, job.versions[i].lsn});
    }
    Nanos compute_time = 0;
    if (!runs.empty()) {
        std::vector<DocOutcome> ran(runs.size());
        auto run = [&](std::size_t begin, std::size_t end) {
            if (begin == 0 && end == args.size()) return runner_.run_docs(*query, args, union_of(needs, 0, end));
            std::vector<SqlArgs> part(args.begin() + static_cast<std::ptrdiff_t>(begin),
                                      args.begin() + static_cast<std::ptrdiff_t>(end));
            return runner_.run_docs(*query, part, union_of(needs, begin, end));
        };
        Nanos started = now();
        run_halving(0, args.size(), ran, run);
        compute_time = (now() - started) / static_cast<Nanos>(runs.size());
        for (std::size_t k = 0; k < runs.size(); ++k) outcomes[runs[k]] = std::move(ran[k]);
    }
    // A doc's version is the WAL position its content reflects: at least the commits it completes,
    // and the compute's snapshot, so a recompute is never older than anything published before it
    // (a startup recompute handles no commit at all).
    std::vector<Publication> publications;
    std::vector<std::size_t> publishing;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (outcomes[i].kind != OutcomeKind::Ok) continue;
        DocVersion& version = job.versions[i];
        version.lsn = std::max(version.lsn, outcomes[i].snapshot_lsn);
        publications.push_back(Publication{&jobs[i].channel, &outcomes[i].doc, version});
        publishing.push_back(i);
    }
    std::vector<bool> published(jobs.size(), false);
    std::vector<std::string> publish_errors(jobs.size());
    if (!publications.empty()) {
        auto errors = publisher_.publish_many(publications);
        for (std::size_t k = 0; k < publishing.size(); ++k) {
            std::size_t i = publishing[k];
            std::optional<Error> error =
                k < errors.size() ? errors[k] : std::optional<Error>(Error("the sink gave no outcome", {}, true));
            if (!error) {
                published[i] = true;
            } else if (error->transient()) {
                publish_errors[i] = error->what();
            } else {  // the sink refuses this doc for good (e.g. not valid JSON): an outcome
                outcomes[i].kind = OutcomeKind::Permanent;
                outcomes[i].error = std::string("the sink refused the doc: ") + error->what();
                outcomes[i].doc.reset();
            }
        }
    }
    mutex_.lock();
    if (!runs.empty()) counters_.batch_size.observe(static_cast<double>(runs.size()));
    std::vector<std::pair<std::string, Lsn>> tombstones;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (asked[i]) jobs[i].entry->second.set(DocFlags::KeyChecked);
        record_doc(jobs[i], outcomes[i], published[i], publish_errors[i], query, compute_time);
        // its key type changed while it computed: what it published goes under a tombstone too
        if (docs_.take_dropped(jobs[i].channel) && published[i]) tombstones.emplace_back(jobs[i].channel, job.versions[i].lsn);
    }
    // retained copies under channels the server check refused: no doc, so they expire
    if (auto orphans = docs_.take_refused_retained(); !orphans.empty()) {
        mutex_.unlock();  // safe: the channels are copies, and expire_orphans only writes to the sink
        log_info("engine", std::to_string(orphans.size()) +
                               " retained channel(s) name no doc (PostgreSQL spells the key otherwise, as logged); they "
                               "expire instead of being kept");
        try {
            publisher_.expire_orphans(orphans);
        } catch (const std::exception& e) {
            log_warning("engine", std::string("the sink did not take the expiry of refused retained channels: ") + e.what());
        }
        mutex_.lock();
    }
    if (!tombstones.empty()) {
        DocVersion version{generation_, handled_lsn_};
        // Unlocking is safe: the tombstones and their version are copies, and drop_retained only publishes.
        mutex_.unlock();
        drop_retained(tombstones, version);
        mutex_.lock();
    }
    complete_finished();
}

// A tombstone leaves the live journal (a deleted row's doc is not recomputed at every start
// forever); a doc published again after one is named again.
void Engine::Impl::keep_journal(Entry& entry, bool has_doc) {
    if (!options_.live_all || !options_.journal) return;
    bool unjournaled = entry.second.has(DocFlags::Unjournaled);
    if (!has_doc && !unjournaled) {
        options_.journal->forgotten(entry.first);
        entry.second.set(DocFlags::Unjournaled);
    } else if (has_doc && unjournaled) {
        options_.journal->named(entry.first);
        entry.second.clear(DocFlags::Unjournaled);
    }
}

void Engine::Impl::record_doc(DocJob& dj, const DocOutcome& outcome, bool published,
                              const std::string& publish_error, const DocQuery* query, Nanos compute_time) {
    Entry& entry = *dj.entry;
    bool walk_job = docs_.end_compute(dj);
    QueryStats* stats = query ? catalog_.stats_of(dj.query, query->name) : nullptr;
    if (outcome.key_refused) {  // nothing was computed: refused like a key_text refusal
        docs_.refuse_computed(entry, outcome.error, walk_job, true);
        return;
    }
    if (outcome.kind != OutcomeKind::NotVisible && query) {
        ++counters_.recomputes;
        if (stats) {
            ++stats->recomputes;
            stats->compute_ns += static_cast<std::uint64_t>(compute_time);
            stats->compute_seconds.observe(static_cast<double>(compute_time) / 1e9);
        }
    }
    std::uint32_t failures = entry.second.failures + 1;  // in a row, counting this one
    auto retry = [&](std::chrono::milliseconds first, std::uint32_t cap, bool round) REQUIRES(mutex_) {
        docs_.retry(entry, dj, backoff(first, failures, cap), walk_job, round);
    };
    if (outcome.kind == OutcomeKind::Ok && published) {
        ++counters_.publishes;
        if (stats) ++stats->publishes;
        if (stats && !stats->last_error.empty() && stats->last_channel == dj.channel) stats->last_error_cleared = true;
        keep_journal(entry, outcome.doc.has_value());
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
    } else if (query && sqlstate_is_invalid_input(outcome.sqlstate) && entry.second.lsn == 0) {
        // PostgreSQL cannot read the key as its type: a refused channel, like one the key check
        // refuses (no failure recorded, not retried), whatever the type. Only for a doc no change
        // named: a key a change gave comes from a row, so the error is the data's (a cast in the
        // query, say), a failure of the doc that is retried like any other.
        docs_.refuse_computed(entry, "PostgreSQL refused its key: " + outcome.error + " (SQLSTATE " + outcome.sqlstate + ")",
                              walk_job);
    } else {
        record_permanent(stats, dj.channel, outcome.error, outcome.sqlstate);
        log_warning("engine", "computing " + dj.channel + " failed: " + outcome.error);
        // A recorded outcome: its transactions complete; the doc is retried off the ack path.
        docs_.failed(entry, backoff(options_.permanent_backoff, failures, options_.permanent_backoff_cap),
                     walk_job);
    }
}

void Engine::Impl::run_lookups(Job& job) {
    std::vector<Lookup>& lookups = job.lookups;
    const Definitions& defs = *lookups.front().defs;
    const Watch& watch = defs.watches[lookups.front().watch];
    const DocQuery* query = defs.find_query(watch.query);
    KeysQuery keys{watch.query, *watch.keys_sql, watch.keys_search_path,
                   watch.schema + "." + watch.table, query ? query->refused : std::string(), watch.keys_batch_sql,
                   watch.keys_reader_role};
    std::size_t max_keys = options_.max_keys;
    Nanos started = now();
    // Unlocking is safe: take() moved these lookups out of the queue into the job, which holds the
    // definitions they run on; nothing below touches the engine's state until lock().
    mutex_.unlock();
    std::vector<SqlArgs> args;
    std::vector<Visibility> needs;
    for (const auto& lookup : lookups) {
        args.push_back(lookup.args);
        needs.push_back(Visibility{lookup.xids, lookup.end_lsn});
    }
    std::vector<KeysOutcome> outcomes(lookups.size());
    auto run = [&](std::size_t begin, std::size_t end) {
        std::vector<SqlArgs> part(args.begin() + static_cast<std::ptrdiff_t>(begin),
                                  args.begin() + static_cast<std::ptrdiff_t>(end));
        return runner_.run_keys_batch(keys, part, max_keys, union_of(needs, begin, end));
    };
    run_halving(0, args.size(), outcomes, run);
    for (auto& outcome : outcomes) {
        if (outcome.kind != OutcomeKind::Ok || !query) continue;
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
    mutex_.lock();
    for (std::size_t i = 0; i < lookups.size(); ++i) record_lookup(lookups[i], outcomes[i], query, keys.table, started);
    complete_finished();
}

void Engine::Impl::record_lookup(Lookup& lookup, KeysOutcome& outcome, const DocQuery* query,
                                 const std::string& table, Nanos started) {
    const std::string& query_name = lookup.defs->watches[lookup.watch].query;
    auto key = lookup.key();
    bool current = lookup.epoch == epoch_;
    if (!current) lookup.seqs.clear();  // a reset forgot those transactions
    auto release_all = [&]() REQUIRES(mutex_) {
        for (auto seq : lookup.seqs) ledger_.release(seq);
    };
    ++counters_.keys_lookups;
    std::uint16_t query_now = query ? catalog_.find(query->name) : kNoQuery;  // a reload may have dropped it
    // A doc the lookup dirties: its next compute must see what the lookup saw and, with `waits`,
    // completes the lookup's transactions.
    auto dirty = [&](Entry& entry, bool waits) REQUIRES(mutex_) {
        Doc& doc = entry.second;
        for (auto xid : lookup.xids) doc.add_xid(xid);
        doc.lsn = std::max(doc.lsn, lookup.end_lsn);
        if (waits)
            for (auto seq : lookup.seqs) ledger_.wait(doc.pending_seq, seq);
        docs_.schedule(entry);
    };
    if (outcome.kind == OutcomeKind::Ok && query_now != kNoQuery) {
        for (const auto& row : outcome.keys) {
            std::string channel = build_channel(query->name, canonical_key(query->key_types, row));
            docs_.forgive(channel);  // a row names it (see direct(), which spells it the same way)
            Entry* entry = docs_.find_or_create(channel, options_.live_all);
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
            record_transient("keys lookup on " + table, outcome.error, true);
            wait = backoff(options_.transient_backoff, lookup.failures, options_.transient_backoff_cap);
        }
        if (!current) lookup.epoch = epoch_;
        lookups_.retry(now() + to_nanos(wait), std::move(lookup));
    } else if (query_now != kNoQuery) {
        record_permanent(catalog_.stats_of(query_now, query->name), "keys:" + table, outcome.error,
                         outcome.sqlstate);
        log_warning("engine", "keys lookup on " + table + " failed: " + outcome.error +
                                  "; recomputing every live doc of \"" + query_name + "\" instead");
        // Never silently nothing: the docs it would have named are among the live ones.
        docs_.for_each_live(query_now, [&](Entry& entry) {
            mutex_.assert_held();  // for_each_live calls back under this function's lock
            dirty(entry, false);
        });
        release_all();
    } else {
        release_all();  // the query was dropped meanwhile
    }
    lookups_.finish(key, started + to_nanos(options_.min_round_interval), now());
}

Nanos Engine::Impl::next_due() const { return std::min(docs_.next_due(), lookups_.next_due()); }

void Engine::Impl::worker_loop() {
    MutexLock lock(mutex_);
    Nanos last_expiry = now();
    while (!stopping_) {
        Job job;
        if (take(job)) {
            run(job);
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
        mutex_.wait_for(wake_, wait);
    }
}

}  // namespace docsync
