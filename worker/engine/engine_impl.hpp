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
#include <mutex>
#include <thread>
#include <vector>

#include "engine/catalog.hpp"
#include "engine/doc_set.hpp"
#include "engine/engine.hpp"
#include "engine/key_resolution.hpp"
#include "engine/lookups.hpp"
#include "engine/open_txn.hpp"
#include "engine/ticket_ledger.hpp"

namespace docsync {

class Engine::Impl : private KeyTargets {
public:
    Impl(Runner& runner, Publisher& publisher, const Clock& clock, EngineOptions options,
         std::function<void(std::uint64_t)> complete);

    // engine.cpp: the stream thread's calls and liveness, as Engine's.
    void load_definitions(Definitions definitions);
    // Channels no longer canonical after a key type changed: a tombstone each, then the expiry.
    void drop_retained(const std::vector<std::pair<std::string, Lsn>>& dropped, DocVersion version);
    const Definitions& definitions() const { return catalog_.definitions(); }
    void on_begin(const BeginRecord& begin);
    void on_relation(const RelationRecord& relation);
    void on_change(const ChangeRecord& change);
    void on_truncate(const TruncateRecord& truncate);
    void on_message(const MessageRecord& message);
    bool last_commit_wrote_definitions() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return last_commit_definition_rows_;
    }
    bool on_commit(const CommitRecord& commit, std::uint64_t ticket);
    void set_generation(std::uint64_t generation);
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
    void broadcast(std::uint16_t query) override;
    void direct(std::uint16_t query, const SqlArgs& key) override;
    void lookup(std::uint16_t watch, const SqlArgs& key) override;

    Nanos now() const { return to_nanos(clock_.now()); }
    // Schedules what the open transaction dirtied; appends the tickets complete now to `done`.
    bool commit(const CommitRecord& commit, std::uint64_t ticket, std::vector<std::uint64_t>& done);
    // Appends the tickets nothing holds any more to `done`, counting them.
    void collect_completed(std::vector<std::uint64_t>& done);
    // Completes tickets: never under the mutex.
    void finish(const std::vector<std::uint64_t>& done);
    // Completes the tickets no doc, lookup or reload holds any more, outside the mutex.
    void complete_finished(std::unique_lock<std::mutex>& lock);
    // A failure that is retried: counted, kept for status as "<what> failed: <error>", and logged
    // when `log`.
    void record_transient(const std::string& what, const std::string& error, bool log);
    // A failure that is an outcome (its transactions complete): counted, and kept in the query's
    // statistics (when it still has them) naming `channel`.
    void record_permanent(QueryStats* stats, const std::string& channel, const std::string& error,
                          const std::string& sqlstate);
    // Under the mutex: the audit's view of a doc (nullptr: one the engine does not know).
    AuditView view_of(const Doc* doc) const;

    // compute.cpp
    bool take(Job& job);
    void run(Job& job, std::unique_lock<std::mutex>& lock);
    void run_docs(Job& job, std::unique_lock<std::mutex>& lock);
    // Records one doc's outcome (its compute took `compute_time`), under the mutex.
    void keep_journal(Entry& entry, bool has_doc);
    void record_doc(DocJob& job, const DocOutcome& outcome, bool published, const std::string& publish_error,
                    const DocQuery* query, Nanos compute_time);
    void run_lookups(Job& job, std::unique_lock<std::mutex>& lock);
    // Records one lookup's outcome, under the mutex.
    void record_lookup(Lookup& lookup, KeysOutcome& outcome, const DocQuery* query, const std::string& table,
                       Nanos started);
    Nanos next_due() const;
    void worker_loop();

    Runner& runner_;
    Publisher& publisher_;
    const Clock& clock_;
    const EngineOptions options_;
    const std::function<void(std::uint64_t)> complete_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<std::thread> threads_;
    bool stopping_ = false;

    Catalog catalog_;
    ChangePlans plans_;
    TicketLedger ledger_;
    DocSet docs_;
    LookupQueue lookups_;
    OpenTxn txn_;
    bool docs_turn_ = false;              // take() alternates lookups and docs when both wait
    std::uint64_t generation_ = 0;        // of the doc versions published (contract C (docs/design.md))
    Lsn handled_lsn_ = 0;                 // highest COMMIT end LSN handled
    std::uint64_t epoch_ = 1;             // the stream epoch (reset_stream starts a new one)
    std::uint64_t definitions_hold_ = 0;
    bool last_commit_definition_rows_ = false;  // the last COMMIT's transaction wrote a definition table  // the sequence of a definitions transaction awaiting its reload
    EngineStats counters_;                // the running totals (the gauges are computed in stats())
};

}  // namespace docsync
