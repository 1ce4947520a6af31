#pragma once
// The engine's core, private to worker/engine/: the pieces it is made of and the one mutex that
// guards them all. engine.cpp holds the stream, definitions and liveness side; compute.cpp the
// worker side (taking work, running it through the Runner and the Publisher, recording outcomes).
//
// The pieces, each keeping its own state: Catalog (the definitions in force), ChangePlans and
// resolve_change (which docs a change names), OpenTxn (what the open transaction dirtied), DocSet
// (the docs and their work), LookupQueue (keys lookups) and TicketLedger (which tickets may
// complete). The core joins them: it keeps the counters, the stream's epoch and positions, and
// completes tickets outside the mutex.

#include <condition_variable>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/thread_annotations.hpp"
#include "engine/catalog.hpp"
#include "engine/doc_set.hpp"
#include "engine/engine.hpp"
#include "engine/key_resolution.hpp"
#include "engine/lookups.hpp"
#include "engine/open_txn.hpp"
#include "engine/ticket_ledger.hpp"

namespace docsync {

class Engine::Impl final : private KeyTargets {
public:
    Impl(Runner& runner, Publisher& publisher, const Clock& clock, EngineOptions options,
         std::function<void(std::uint64_t)> complete);

    // engine.cpp: the stream thread's calls and liveness, as Engine's.
    void load_definitions(Definitions definitions);
    // Channels no longer canonical after a key type changed: a tombstone each, then the expiry.
    void drop_retained(const std::vector<std::pair<std::string, Lsn>>& dropped, DocVersion version);
    // The stream thread's view, read without the mutex: only that thread installs definitions.
    const Definitions& definitions() const NO_THREAD_SAFETY_ANALYSIS { return catalog_.definitions(); }
    void on_begin(const BeginRecord& begin);
    void on_relation(const RelationRecord& relation);
    void on_change(const ChangeRecord& change);
    void on_truncate(const TruncateRecord& truncate);
    void on_message(const MessageRecord& message);
    bool last_commit_wrote_definitions() const {
        MutexLock lock(mutex_);
        return last_commit_definition_rows_;
    }
    bool on_commit(const CommitRecord& commit, std::uint64_t ticket);
    void set_generation(std::uint64_t generation);
    void release_computes();
    void sync_live(const std::vector<std::string>& channels, bool complete);
    void touch(const std::string& channel);
    void warm(const std::string& channel);
    void recompute_all_live(RecomputeReason reason, bool gap);
    RecomputeProgress recompute_progress() const;
    void reset_stream();
    EngineStats stats() const;
    std::optional<AuditDraw> draw_live(std::uint64_t random) const;
    AuditView audit_view(const std::string& channel) const;

    // compute.cpp: the workers, as Engine's.
    void start(unsigned threads);
    void stop();
    bool run_once();

private:
    // One unit of work a worker took: keys lookups of one watch, or computes of docs of one query,
    // each run by one statement where the runner can.
    struct Job {
        bool is_lookup = false;
        std::vector<Lookup> lookups;
        std::vector<DocJob> docs;
        std::shared_ptr<const Definitions> defs;  // the definitions the doc computes run on
        std::vector<DocVersion> versions;         // per doc
    };

    // What a change names (KeyTargets), recorded for the open transaction.
    // resolve_change calls them under the mutex.
    void broadcast(std::uint16_t query) override REQUIRES(mutex_);
    void direct(std::uint16_t query, const SqlArgs& key) override REQUIRES(mutex_);
    void lookup(std::uint16_t watch, const SqlArgs& key) override REQUIRES(mutex_);

    Nanos now() const { return to_nanos(clock_.now()); }
    // Schedules what the open transaction dirtied; appends the tickets complete now to `done`.
    bool commit(const CommitRecord& commit, std::uint64_t ticket, std::vector<std::uint64_t>& done)
        REQUIRES(mutex_);
    // Appends the tickets nothing holds any more to `done`, counting them.
    void collect_completed(std::vector<std::uint64_t>& done) REQUIRES(mutex_);
    // Completes tickets: never under the mutex.
    void finish(const std::vector<std::uint64_t>& done) EXCLUDES(mutex_);
    // Completes the tickets no doc, lookup or reload holds any more, outside the mutex (dropped
    // meanwhile, held again on return).
    void complete_finished() REQUIRES(mutex_);
    // A failure that is retried: counted, kept for status as "<what> failed: <error>", and logged
    // when `log`.
    void record_transient(const std::string& what, const std::string& error, bool log) REQUIRES(mutex_);
    // A failure that is an outcome (its transactions complete): counted, and kept in the query's
    // statistics (when it still has them) naming `channel`.
    void record_permanent(QueryStats* stats, const std::string& channel, const std::string& error,
                          const std::string& sqlstate) REQUIRES(mutex_);
    // Under the mutex: the audit's view of a doc (nullptr: one the engine does not know).
    AuditView view_of(const Doc* doc) const REQUIRES(mutex_);

    // compute.cpp
    // Each with the mutex held on entry and on return; run_docs and run_lookups drop it around the
    // Runner and the Publisher.
    bool take(Job& job) REQUIRES(mutex_);
    void run(Job& job) REQUIRES(mutex_);
    void run_docs(Job& job) REQUIRES(mutex_);
    // Without the mutex: the server's spelling check of a channel's key (Runner::print_keys).
    bool server_key_check(const DocQuery& query, const std::string& channel, const SqlArgs& values, DocOutcome& out,
                          bool& checked);
    // Records one doc's outcome (its compute took `compute_time`), under the mutex.
    void keep_journal(Entry& entry, bool has_doc);
    void record_doc(DocJob& job, const DocOutcome& outcome, bool published, const std::string& publish_error,
                    const DocQuery* query, Nanos compute_time) REQUIRES(mutex_);
    void run_lookups(Job& job) REQUIRES(mutex_);
    // Records one lookup's outcome, under the mutex.
    void record_lookup(Lookup& lookup, KeysOutcome& outcome, const DocQuery* query, const std::string& table,
                       Nanos started) REQUIRES(mutex_);
    Nanos next_due() const REQUIRES(mutex_);
    void worker_loop();

    Runner& runner_;
    Publisher& publisher_;
    const Clock& clock_;
    const EngineOptions options_;
    const std::function<void(std::uint64_t)> complete_;

    mutable Mutex mutex_;
    std::condition_variable wake_;
    std::vector<std::thread> threads_;  // start() and stop() only, on one thread
    bool stopping_ GUARDED_BY(mutex_) = false;

    Catalog catalog_ GUARDED_BY(mutex_);
    ChangePlans plans_ GUARDED_BY(mutex_);
    TicketLedger ledger_ GUARDED_BY(mutex_);
    DocSet docs_ GUARDED_BY(mutex_);
    LookupQueue lookups_ GUARDED_BY(mutex_);
    OpenTxn txn_ GUARDED_BY(mutex_);
    bool docs_turn_ GUARDED_BY(mutex_) = false;        // take() alternates lookups and docs when both wait
    // Of the doc versions published (contract C (docs/design.md)).
    std::uint64_t generation_ GUARDED_BY(mutex_) = 0;
    bool computes_held_ GUARDED_BY(mutex_) = false;     // EngineOptions::hold_computes, until release_computes
    Lsn handled_lsn_ GUARDED_BY(mutex_) = 0;           // highest COMMIT end LSN handled
    std::uint64_t epoch_ GUARDED_BY(mutex_) = 1;       // the stream epoch (reset_stream starts a new one)
    // The sequence of a definitions transaction awaiting its reload.
    std::uint64_t definitions_hold_ GUARDED_BY(mutex_) = 0;
    // The last COMMIT's transaction wrote a definition table.
    bool last_commit_definition_rows_ GUARDED_BY(mutex_) = false;
    EngineStats counters_ GUARDED_BY(mutex_);  // the running totals (the gauges are computed in stats())
};

}  // namespace docsync
