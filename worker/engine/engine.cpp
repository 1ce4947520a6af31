// The recompute engine; the model is described in engine.hpp, its pieces in engine_impl.hpp. This
// file: the stream thread's side (definitions, changes, commits), liveness and statistics.
#include "engine/engine.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "engine/channel.hpp"
#include "engine/key_text.hpp"
#include "engine/engine_impl.hpp"

namespace docsync {

Engine::Engine(Runner& runner, Publisher& publisher, const Clock& clock, EngineOptions options,
               std::function<void(std::uint64_t)> complete)
    : impl_(std::make_unique<Impl>(runner, publisher, clock, options, std::move(complete))) {}

Engine::~Engine() { stop(); }

const Definitions& Engine::definitions() const { return impl_->definitions(); }
void Engine::load_definitions(Definitions definitions) { impl_->load_definitions(std::move(definitions)); }
void Engine::on_begin(const BeginRecord& begin) { impl_->on_begin(begin); }
void Engine::on_relation(const RelationRecord& relation) { impl_->on_relation(relation); }
void Engine::on_change(const ChangeRecord& change) { impl_->on_change(change); }
void Engine::on_truncate(const TruncateRecord& truncate) { impl_->on_truncate(truncate); }
void Engine::on_message(const MessageRecord& message) { impl_->on_message(message); }
bool Engine::last_commit_wrote_definitions() const { return impl_->last_commit_wrote_definitions(); }
bool Engine::on_commit(const CommitRecord& commit, std::uint64_t ticket) {
    return impl_->on_commit(commit, ticket);
}
void Engine::set_generation(std::uint64_t generation) { impl_->set_generation(generation); }
void Engine::release_computes() { impl_->release_computes(); }
void Engine::sync_live(const std::vector<std::string>& channels, bool complete) {
    impl_->sync_live(channels, complete);
}
void Engine::touch(const std::string& channel) { impl_->touch(channel); }
void Engine::warm(const std::string& channel) { impl_->warm(channel); }
void Engine::recompute_all_live(RecomputeReason reason, bool gap) { impl_->recompute_all_live(reason, gap); }
RecomputeProgress Engine::recompute_progress() const { return impl_->recompute_progress(); }
void Engine::start(unsigned threads) { impl_->start(threads); }
void Engine::stop() { impl_->stop(); }
void Engine::reset_stream() { impl_->reset_stream(); }
bool Engine::run_once() { return impl_->run_once(); }
EngineStats Engine::stats() const { return impl_->stats(); }
std::optional<AuditDraw> Engine::draw_live(std::uint64_t random) const { return impl_->draw_live(random); }
AuditView Engine::audit_view(const std::string& channel) const { return impl_->audit_view(channel); }

Engine::Impl::Impl(Runner& runner, Publisher& publisher, const Clock& clock, EngineOptions options,
                   std::function<void(std::uint64_t)> complete)
    : runner_(runner),
      publisher_(publisher),
      clock_(clock),
      options_(options),
      complete_(std::move(complete)),
      docs_(clock_, options_, catalog_, ledger_, wake_),
      lookups_(wake_),
      computes_held_(options_.hold_computes) {}

// ---- tickets ---------------------------------------------------------------------------------

void Engine::Impl::collect_completed(std::vector<std::uint64_t>& done) {
    counters_.txns_completed += ledger_.collect_completed(done);
}

void Engine::Impl::finish(const std::vector<std::uint64_t>& done) {
    for (auto ticket : done) complete_(ticket);
}

void Engine::Impl::complete_finished() {
    std::vector<std::uint64_t> done;
    collect_completed(done);
    if (!done.empty()) {
        // Unlocking is safe: `done` is a copy, and completing a ticket calls into the coordinator (and
        // from it the stream), which must never wait on the engine's mutex.
        mutex_.unlock();
        finish(done);
        mutex_.lock();
    }
}

// ---- definitions -----------------------------------------------------------------------------

void Engine::Impl::load_definitions(Definitions definitions) {
    std::vector<std::uint64_t> done;
    std::string key_types;
    std::vector<std::pair<std::string, Lsn>> dropped;
    DocVersion version;
    {
        MutexLock lock(mutex_);
        std::vector<std::string> changed = catalog_.install(std::move(definitions));
        // Before any recompute the reload causes: none may use a statement planned before the DDL.
        runner_.definitions_changed();
        plans_.rebuild(catalog_);
        // A definitions transaction seen by on_commit completes only after the recomputes its
        // reload causes.
        docs_.reindex(changed, definitions_hold_);
        // a key type changed (ALTER COLUMN ... TYPE): a channel no longer canonical names no doc,
        // and what the sink retains for it expires like a tombstone
        dropped = docs_.drop_non_canonical();
        version = DocVersion{generation_, handled_lsn_};
        docs_.sweep();
        ledger_.settle(definitions_hold_);
        collect_completed(done);
        key_types = key_types_json(catalog_.definitions().queries);
    }
    finish(done);
    publisher_.describe_keys(key_types);
    if (!dropped.empty()) drop_retained(dropped, version);
}

void Engine::Impl::drop_retained(const std::vector<std::pair<std::string, Lsn>>& dropped, DocVersion version) {
    // A tombstone tells followers the channel names no doc any more; a sink holding a newer version
    // keeps it, and every copy expires like a tombstone (expire_orphans leaves a set expiry alone).
    std::vector<std::string> channels;
    for (const auto& [channel, lsn] : dropped) {
        channels.push_back(channel);
        try {
            // not older than what the sink holds: a startup compute's version is its snapshot's LSN
            DocVersion tombstone{version.generation, std::max(version.lsn, lsn)};
            if (auto held = publisher_.read_back(channel); held && held->version > tombstone) tombstone = held->version;
            publisher_.publish(channel, std::nullopt, tombstone);
            log_info("engine", "\"" + channel + "\" names no doc since its key type changed: a tombstone replaces its copy (" +
                                   format_lsn(tombstone.lsn) + ")");
        } catch (const std::exception& e) {
            log_warning("engine", "no tombstone for \"" + channel + "\" (" + e.what() + "); its copy expires");
        }
    }
    publisher_.expire_orphans(channels);
}

// ---- the stream ------------------------------------------------------------------------------

void Engine::Impl::on_begin(const BeginRecord& begin) {
    MutexLock lock(mutex_);
    txn_.begin(begin.xid);
}

void Engine::Impl::on_relation(const RelationRecord& relation) {
    MutexLock lock(mutex_);
    plans_.describe(relation, catalog_);
}

void Engine::Impl::on_change(const ChangeRecord& change) {
    MutexLock lock(mutex_);
    ++counters_.changes;
    const RelPlan* plan = plans_.find(change.relid);
    if (!plan) return;
    if (plan->definitions_table) txn_.mark_definition_rows();
    resolve_change(*plan, change, *this);
}

void Engine::Impl::on_truncate(const TruncateRecord& truncate) {
    MutexLock lock(mutex_);
    for (auto relid : truncate.relids) {
        const RelPlan* plan = plans_.find(relid);
        if (!plan) continue;
        if (plan->definitions_table) txn_.mark_definition_rows();
        resolve_truncate(*plan, *this);
    }
}

void Engine::Impl::on_message(const MessageRecord& message) {
    if (!message.transactional || message.prefix != kDefinitionsMessagePrefix) return;
    if (!definitions_message_generation(message.content)) return;  // not docsync's
    MutexLock lock(mutex_);
    txn_.mark_definitions();
}

void Engine::Impl::broadcast(std::uint16_t query) {
    txn_.broadcast(query);
    ++counters_.broadcasts;
}

void Engine::Impl::direct(std::uint16_t query, const SqlArgs& key) {
    const DocQuery& q = catalog_.definitions().queries[query];
    // the key as the row holds it may be spelled otherwise than its channel ('FR ' of a char(3)
    // column for a bpchar param): the change names the doc's one channel
    std::string channel = build_channel(q.name, canonical_key(q.key_types, key));
    docs_.forgive(channel);  // a row names it: whatever refused it before, a change reaches it
    Entry* entry = docs_.find_or_create(channel, options_.live_all);
    if (!entry) return;
    if (options_.live_all) entry->second.set(DocFlags::Live);
    if (!entry->second.has(DocFlags::Live)) return;
    // A row names a doc whose last publish was a tombstone: it is journaled again before its compute.
    if (entry->second.has(DocFlags::Unjournaled)) keep_journal(*entry, true);
    txn_.touch(*entry);
}

void Engine::Impl::lookup(std::uint16_t watch, const SqlArgs& key) {
    txn_.lookup(catalog_.shared(), watch, key, options_.lookup_dedupe_window);
}

bool Engine::Impl::on_commit(const CommitRecord& commit, std::uint64_t ticket) {
    std::vector<std::uint64_t> done;
    bool definitions;
    {
        MutexLock lock(mutex_);
        definitions = this->commit(commit, ticket, done);
    }
    finish(done);
    return definitions;
}

bool Engine::Impl::commit(const CommitRecord& c, std::uint64_t ticket, std::vector<std::uint64_t>& done) {
    std::uint64_t seq = ledger_.next_seq();
    bool waits = false;
    handled_lsn_ = std::max(handled_lsn_, c.end_lsn);
    for (std::uint16_t query : txn_.broadcasts())
        docs_.for_each_live(query, [this](Entry& entry) {
            mutex_.assert_held();  // for_each_live calls back under commit()'s lock
            txn_.touch(entry);
        });
    for (Entry* entry : txn_.release_docs()) {
        Doc& doc = entry->second;
        if (!doc.has(DocFlags::Live)) {  // dropped meanwhile: nobody waits for it any more
            if (!doc.has_any(DocFlags::Queued | DocFlags::InFlight | DocFlags::Delayed)) docs_.abandon(doc);
            continue;
        }
        doc.lsn = std::max(doc.lsn, c.end_lsn);
        ledger_.wait(doc.pending_seq, seq);
        waits = true;
        docs_.schedule(*entry);
    }
    for (auto& lookup : txn_.lookups()) {
        lookup.seqs = {seq};
        lookup.epoch = epoch_;
        lookup.end_lsn = c.end_lsn;
        ledger_.hold(seq);
        waits = true;
        lookups_.enqueue(std::move(lookup));
    }
    bool definitions = txn_.definitions();
    last_commit_definition_rows_ = txn_.definition_rows();
    if (definitions) {
        ledger_.release(definitions_hold_);
        definitions_hold_ = seq;
        ledger_.hold(seq);
        waits = true;
    }
    txn_.clear();
    if (waits) {
        ledger_.enqueue(ticket);
    } else {
        // It dirtied no live doc: complete at once (its sequence is reused by the next one).
        ++counters_.txns_completed;
        done.push_back(ticket);
    }
    collect_completed(done);
    return definitions;
}

void Engine::Impl::set_generation(std::uint64_t generation) {
    MutexLock lock(mutex_);
    generation_ = generation;
}

void Engine::Impl::release_computes() {
    {
        MutexLock lock(mutex_);
        if (!computes_held_) return;
        computes_held_ = false;
    }
    wake_.notify_all();  // the computes held until now (take())
}

void Engine::Impl::reset_stream() {
    MutexLock lock(mutex_);
    txn_.clear();
    ++epoch_;
    ledger_.reset();
    definitions_hold_ = 0;
    docs_.forget_waiters();
    lookups_.forget_waiters();
}

// ---- liveness --------------------------------------------------------------------------------

void Engine::Impl::sync_live(const std::vector<std::string>& channels, bool complete) {
    MutexLock lock(mutex_);
    docs_.sync_live(channels, complete);
}

void Engine::Impl::touch(const std::string& channel) {
    MutexLock lock(mutex_);
    Entry* entry = docs_.find_or_create(channel, true);
    if (!entry) return;
    docs_.protect(entry->second);
    docs_.make_live(*entry);
}

void Engine::Impl::warm(const std::string& channel) {
    MutexLock lock(mutex_);
    Entry* entry = docs_.find_or_create(channel, true);
    if (!entry) return;
    docs_.protect(entry->second);
    entry->second.set(DocFlags::Live);
    docs_.schedule(*entry);  // computed as soon as a worker is free, live or not before
}

void Engine::Impl::recompute_all_live(RecomputeReason reason, bool gap) {
    MutexLock lock(mutex_);
    docs_.start_walk(reason, gap);
}

RecomputeProgress Engine::Impl::recompute_progress() const {
    MutexLock lock(mutex_);
    return docs_.walk_progress();
}

// ---- statistics ------------------------------------------------------------------------------

void Engine::Impl::record_transient(const std::string& what, const std::string& error, bool log) {
    ++counters_.transient_retries;
    counters_.last_transient_error = what + " failed: " + error;
    if (log) log_warning("engine", what + " failed, will retry: " + error);
}

void Engine::Impl::record_permanent(QueryStats* stats, const std::string& channel, const std::string& error,
                                    const std::string& sqlstate) {
    ++counters_.permanent_failures;
    if (!stats) return;
    ++stats->permanent_failures;
    stats->last_error = error;
    stats->last_sqlstate = sqlstate;
    stats->last_channel = channel;
    stats->last_error_cleared = false;
}

EngineStats Engine::Impl::stats() const {
    MutexLock lock(mutex_);
    EngineStats out = counters_;
    docs_.count(out.live_docs, out.dirty_docs);
    out.refused_channels = docs_.refused_channels();
    out.batched_forms_set_aside = runner_.batched_forms_set_aside();
    out.keys_queued = lookups_.depth();
    out.in_flight = docs_.running();
    out.waiting_txns = ledger_.waiting();
    out.recompute = docs_.walk_progress();
    out.queries = catalog_.stats();
    auto set_aside = runner_.batched_forms_set_aside_by_query();
    for (auto& q : out.queries)
        if (auto it = set_aside.find(q.name); it != set_aside.end()) q.batch_set_aside = it->second;
    return out;
}

// ---- the audit's reads -----------------------------------------------------------------------

AuditView Engine::Impl::view_of(const Doc* doc) const {
    RecomputeProgress walk = docs_.walk_progress();
    return AuditView{generation_, catalog_.definitions().generation, walk.id, walk.running(), doc && DocSet::busy(*doc)};
}

std::optional<AuditDraw> Engine::Impl::draw_live(std::uint64_t random) const {
    MutexLock lock(mutex_);
    const auto& queries = catalog_.definitions().queries;
    const Entry* entry = docs_.draw(random, [&queries](const Entry& e) {
        return e.second.query < queries.size() && queries[e.second.query].refused.empty();
    });
    if (!entry) return std::nullopt;
    ParsedChannel parsed;
    if (!parse_channel(entry->first, parsed)) return std::nullopt;  // the docs the engine keeps always parse
    return AuditDraw{entry->first, queries[entry->second.query], std::move(parsed.values), view_of(&entry->second)};
}

AuditView Engine::Impl::audit_view(const std::string& channel) const {
    MutexLock lock(mutex_);
    return view_of(docs_.find(channel));
}

}  // namespace docsync
