#pragma once
// The recompute engine: maps row changes to docs, keeps the dirty set, coalesces per key, runs doc
// and keys queries on its own worker threads through the Runner, publishes through the Publisher,
// and completes the coordinator's transaction tickets once every doc a transaction dirtied has a
// durable outcome.
//
// Threads: the stream thread calls on_begin/on_relation/on_change/on_truncate/on_commit,
// load_definitions, set_generation and reset_stream; these never run SQL and never wait on a
// compute (they take the engine's mutex, which no thread holds across SQL or a publish). Any thread
// may call sync_live, touch, warm, recompute_all_live, stats and the audit's draw_live and
// audit_view. The worker threads started by start() call the Runner and the Publisher, and call
// `complete` (never under the engine's mutex).
//
// Coalescing (invariant 4 (docs/design.md)): a doc is computed by at most one thread at a time; a
// change that arrives while it computes marks it dirty again, which schedules exactly one more round
// however many changes arrive; and rounds of one doc start at least min_round_interval apart.
//
// Completion (invariants 1 and 2): every transaction that waits on something gets a sequence
// number at its COMMIT. A doc records the oldest sequence waiting for its next compute (and the one
// its running compute will satisfy), the xids that compute must see, and the highest COMMIT end LSN
// it handled. A ticket completes when no doc, keys lookup or definitions reload holds its sequence
// or an earlier one (engine/ticket_ledger.hpp): tickets complete in stream order, which is what the
// contiguous acknowledgement needs, and the engine keeps 8 bytes per waiting transaction plus 8
// bytes per (transaction, dirtied doc) pair for the visibility check. A transaction that dirtied
// nothing completes at once, in on_commit.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.hpp"
#include "common/histogram.hpp"
#include "engine/definitions.hpp"
#include "engine/seams.hpp"
#include "replication/records.hpp"

namespace docsync {

// The prefix of the logical message docsync.next_generation() emits in every transaction that
// changes the definitions or, by DDL, what a doc query reads (sql/parts/04_generation.sql).
inline constexpr std::string_view kDefinitionsMessagePrefix = "docsync.definitions";

// The generation a definitions message carries (its content: the new generation in decimal), or
// nothing when the content is not one. pg_logical_emit_message is executable by PUBLIC, so a
// message with the prefix proves nothing: one that does not even carry a generation is not
// docsync's and is ignored, and the rest are coalesced (docs/design.md, "Definitions reloads").
inline std::optional<std::uint64_t> definitions_message_generation(std::string_view content) {
    if (content.empty() || content.size() > 19) return std::nullopt;
    std::uint64_t g = 0;
    for (char c : content) {
        if (c < '0' || c > '9') return std::nullopt;
        g = g * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (g == 0) return std::nullopt;
    return g;
}

struct EngineOptions {
    bool live_all = false;                                     // --live all: every doc is live
    std::chrono::milliseconds lease{std::chrono::seconds(90)};  // a listed channel stays live this long
    std::chrono::milliseconds touch_grace{std::chrono::seconds(30)};  // warm/touch protect from a poll
    std::size_t max_keys = 10000;                               // --max-keys
    // --key-check-rate: server key checks (Runner::print_keys) per second, at most, for channels
    // only a liveness poll names; one over the budget waits for a later poll. 0: no bound.
    std::size_t key_check_rate = 50;
    // --batch: at most this many docs of one query computed by one statement, and keys lookups of
    // one watch run by one statement, when that many wait at once; 1 computes each alone.
    std::size_t batch = 1;
    // A doc's next compute starts no sooner than this after its previous one started. A doc changed
    // after a quiet spell is computed at once; a hot doc is computed at most once per interval
    // however many changes arrive, so a stream decoded in real time coalesces too.
    std::chrono::milliseconds min_round_interval{100};
    // Retries back off: the first wait doubles with each consecutive failure, up to the first wait
    // times the cap.
    // A compute or keys lookup whose snapshot does not yet include what it completes: the server is
    // about to catch up (a standby replaying, a commit becoming visible), so retry soon.
    std::chrono::milliseconds not_visible_backoff{5};
    std::uint32_t not_visible_backoff_cap = 40;  // at most 200 ms
    // An infrastructure fault (a pool connection, a sink that takes no writes): it holds the slot,
    // so keep trying, but do not hammer what is down.
    std::chrono::milliseconds transient_backoff{100};
    std::uint32_t transient_backoff_cap = 100;  // at most 10 s
    // A doc whose query failed for good is retried off the ack path, rarely: a query that fails
    // every time must not cost a round every second.
    std::chrono::milliseconds permanent_backoff{std::chrono::seconds(1)};
    std::uint32_t permanent_backoff_cap = 300;  // at most 5 minutes
    // An idle worker looks at the clock at least this often (retries and leases come due with no
    // notification; the clock may be a test's own).
    std::chrono::milliseconds idle_wake{50};
    // How often an idle worker drops the docs whose leases expired.
    std::chrono::milliseconds lease_check_interval{std::chrono::seconds(1)};
    // A transaction asks once for a keys lookup of the same watch and key values among its last
    // this many: a row changed again and again in one transaction costs one lookup, and a big
    // transaction stays linear.
    std::size_t lookup_dedupe_window = 64;
    // With --live all and a sink that retains docs: the journal of the live set (seams.hpp). Not
    // owned; outlives the engine. nullptr: the live set is what the sink holds.
    LiveJournal* journal = nullptr;
    // No doc is computed, and no keys lookup run, until release_computes() (docsync-worker: once
    // the stream's first session has set the generation and started its recompute of every live
    // doc). A doc published before would carry generation 0, which a sink refuses as older than
    // what it holds, and that recompute would compute it again anyway: a recompute asked for before
    // the stream starts (a sink that lost docs, a gap the last worker left) flags its docs and waits.
    bool hold_computes = false;
};

// Per doc query, for the status view.
struct QueryStats {
    std::string name;
    std::uint64_t recomputes = 0;          // computes with an outcome (not-visible retries apart)
    std::uint64_t publishes = 0;           // docs published
    std::uint64_t permanent_failures = 0;  // query errors, timeouts, size and keys caps
    std::uint64_t compute_ns = 0;          // time in those computes (by the engine's clock)
    // The same times one by one, in seconds: a doc computed with others counts its share of the
    // statement, as compute_ns does.
    Histogram compute_seconds{kComputeSecondsBounds};
    std::string last_error;
    std::string last_sqlstate;
    std::string last_channel;  // the doc (or "keys:<table>") of the last error
    bool last_error_cleared = false;  // that doc has been published since: the error's cause is gone
    // Why its batched forms are set aside (Runner::batched_forms_set_aside_by_query), empty: none.
    std::string batch_set_aside;
};

// Why every live doc is being recomputed.
// The values are DocsyncStatusRecompute's (shared/docsync_status.h).
enum class RecomputeReason : std::uint32_t { None = 0, Startup = 1, Valve = 2, NewSlot = 3, NewServer = 4, SinkReset = 5,
                                               Settings = 6, Publication = 7 };

// The progress of the last recompute of every live doc (recompute_all_live). Times are the engine
// clock's nanoseconds; finished is 0 while it runs. done counts docs with an outcome (published, or
// failed for good) and docs that stopped being live before their turn; retried ones are not done.
struct RecomputeProgress {
    RecomputeReason reason = RecomputeReason::None;
    std::uint64_t id = 0;  // 1 for the first one since start, 2 for the next, ...
    std::uint64_t total = 0;
    std::uint64_t done = 0;
    std::int64_t started_ns = 0;
    std::int64_t finished_ns = 0;
    // It covers changes the stream will never deliver (the slot or the server changed, the sink lost
    // docs): until it finishes, docs may lack commits before the acknowledged position, so
    // read-your-writes waits hold (publish/watermark.hpp, docsync.wait_published).
    bool gap = false;

    bool running() const { return id != 0 && finished_ns == 0; }
    // Running, and covering such a gap.
    bool holds_waits() const { return gap && running(); }
};

struct EngineStats {
    std::uint64_t dirty_docs = 0;           // live docs awaiting a compute (not counting running ones)
    std::uint64_t keys_queued = 0;          // keys lookups waiting or running
    std::uint64_t in_flight = 0;            // doc computes running
    std::uint64_t live_docs = 0;
    std::uint64_t waiting_txns = 0;         // registered transactions not yet complete
    std::uint64_t changes = 0;              // row changes handled
    std::uint64_t broadcasts = 0;           // changes (or truncates) that dirtied every live doc of a query
    std::uint64_t recomputes = 0;           // computes with an outcome (not-visible retries apart)
    std::uint64_t keys_lookups = 0;         // keys queries run
    std::uint64_t publishes = 0;
    std::uint64_t not_visible_retries = 0;  // computes requeued by the visibility check
    std::uint64_t transient_retries = 0;    // computes, lookups or publishes retried
    // What the last of them said (a sink that takes no docs, a pool connection fault), naming the
    // doc or table; empty: none since start. Transient failures hold the slot, so status must
    // show them: a Redis outage is otherwise only a growing lag.
    std::string last_transient_error;
    std::uint64_t permanent_failures = 0;
    std::uint64_t txns_completed = 0;
    // Channels refused because a key was not spelled as PostgreSQL prints it (engine/key_text.hpp).
    std::uint64_t refused_channels = 0;
    // Batched forms the Runner set aside (Runner::batched_forms_set_aside).
    std::uint64_t batched_forms_set_aside = 0;
    RecomputeProgress recompute;
    std::vector<QueryStats> queries;
    Histogram batch_size{kBatchSizeBounds};  // docs per doc-query statement (--batch caps it)

    std::uint64_t dirty_depth() const { return dirty_docs + keys_queued; }
};

// What the continuous audit (worker/audit/auditor.hpp) needs to know of a doc it checks, read at one
// moment under the engine's mutex.
struct AuditView {
    std::uint64_t generation = 0;   // of the doc versions published now
    std::uint64_t definitions = 0;  // the definitions generation in force: a doc query may change with it
    // The last recompute of every live doc (RecomputeProgress::id; 0: none yet) and whether it runs:
    // it heals what the sink may have missed, so the audit waits for it.
    std::uint64_t walk_id = 0;
    bool recomputing = false;
    // The engine has work pending for the doc: dirty, queued, computing, waiting to retry, or dirtied
    // by the open transaction. Its next publish is coming.
    bool busy = false;
};

// A live doc drawn at random for the audit, with what computing it takes.
struct AuditDraw {
    std::string channel;
    DocQuery query;
    SqlArgs args;
    AuditView view;
};

class Engine {
public:
    Engine(Runner& runner, Publisher& publisher, const Clock& clock, EngineOptions options,
           std::function<void(std::uint64_t ticket)> complete);
    ~Engine();  // stops the worker threads
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Installs definitions. Live docs of queries whose SQL, params, search_path or watches changed are
    // recomputed; a definitions transaction seen by on_commit completes only after those recomputes.
    void load_definitions(Definitions definitions);
    const Definitions& definitions() const;  // the stream thread's view; not for other threads

    // The stream, in order. on_commit returns true when the transaction touched a docsync definition
    // table: the wiring reloads definitions (load_definitions) and re-plans the stream.
    void on_begin(const BeginRecord& begin);
    void on_relation(const RelationRecord& relation);
    void on_change(const ChangeRecord& change);
    void on_truncate(const TruncateRecord& truncate);
    // A transactional "docsync.definitions" message (docsync.next_generation()): the transaction
    // changed the definitions or what a doc query reads (DDL), so on_commit asks for a reload.
    void on_message(const MessageRecord& message);
    bool on_commit(const CommitRecord& commit, std::uint64_t ticket);
    // Whether the transaction of the last on_commit wrote a definition table (only the API, as the
    // extension's owner, does), rather than only sending a definitions message (any role can).
    bool last_commit_wrote_definitions() const;

    // The generation of the doc versions published from now on (contract C (docs/design.md)).
    void set_generation(std::uint64_t generation);
    // Lets computes begin (EngineOptions::hold_computes); later calls do nothing.
    void release_computes();

    // Liveness (subscribers mode). Listed channels are leased (newly live ones are computed); with
    // `complete`, live channels not listed are dropped unless warmed or touched within the grace.
    void sync_live(const std::vector<std::string>& channels, bool complete);
    void touch(const std::string& channel);  // a subscriber appeared: renew, or make live and compute
    void warm(const std::string& channel);   // a client wants a doc the sink lacks: make live, compute
    // Recomputes every live doc (at startup and after the WAL safety valve), tracking the progress
    // that stats().recompute reports. A new call restarts the count. `gap`: it covers changes the
    // stream will never deliver (RecomputeProgress::gap); a new call keeps a running gap open.
    void recompute_all_live(RecomputeReason reason, bool gap);
    // The progress of the last of them: cheap (stats() looks at every doc), for any thread.
    RecomputeProgress recompute_progress() const;

    // With --live all, reads the sink's channels (Publisher::retained_channels) into the live set, then
    // starts `threads` worker threads (0: none; run_once() drives the work, for tests).
    void start(unsigned threads);
    // Stops the worker threads after their running computes end. Idempotent.
    void stop();
    // A new stream epoch: forget the transactions not yet complete (their tickets are never completed).
    // Docs stay dirty; only the bookkeeping of who waits for them is dropped.
    void reset_stream();

    // Runs one unit of due work (a keys lookup or a doc compute) on the calling thread; false when
    // there is none. For tests and benchmarks that start no worker threads.
    bool run_once();

    EngineStats stats() const;
    std::uint64_t dirty_depth() const { return stats().dirty_depth(); }

    // The audit's reads, off every hot path: they never run SQL, and cost a few hash-table probes.
    // A live doc drawn with `random` (a uniformly random number) among the docs the engine knows,
    // nearly uniformly; nullopt when the draw found no live doc of a defined, not refused query.
    std::optional<AuditDraw> draw_live(std::uint64_t random) const;
    // The doc's view now (busy is false for a doc the engine does not know).
    AuditView audit_view(const std::string& channel) const;

private:
    class Impl;  // engine_impl.hpp
    std::unique_ptr<Impl> impl_;
};

}  // namespace docsync
