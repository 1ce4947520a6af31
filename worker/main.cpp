// docsync-worker: wiring only. Parses the settings, builds the components and connects them:
//
//   Stream (stream thread) ──records──▶ Engine.on_* ──tickets──▶ Coordinator ──ack──▶ Stream
//   Engine worker threads ──▶ Executor (Runner) ──▶ Publisher (sink)
//   audit thread: Engine's live docs ──▶ Executor (one at a time) ──▶ Publisher read-back, compared
//   status thread: Stream/Coordinator/Engine/Auditor stats ──▶ StatusBoard (and the /metrics body)
//   signal thread: SIGTERM/SIGINT drain and stop, SIGHUP reopens the log file
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "audit/auditor.hpp"
#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "config/settings.hpp"
#include "config/warm.hpp"
#include "engine/definitions.hpp"
#include "engine/engine.hpp"
#include "executor/definitions_source.hpp"
#include "executor/executor.hpp"
#include "metrics/server.hpp"
#include "metrics/worker_metrics.hpp"
#include "progress/commit_latency.hpp"
#include "progress/coordinator.hpp"
#include "publish/sink.hpp"
#include "publish/watermark.hpp"
#include "replication/hung_watch.hpp"
#include "replication/lease.hpp"
#include "replication/lease_watch.hpp"
#include "replication/stream.hpp"
#include "status/fence.hpp"
#include "status/sink_start_watch.hpp"
#include "status/snapshot.hpp"
#include "status/status_board.hpp"

extern char** environ;

namespace docsync {
namespace {

using namespace std::chrono_literals;

// Hands stream records to the engine and keeps the definitions and the plugin's `tables` current.
class Pipeline final : public StreamHandler {
public:
    Pipeline(Engine& engine, DefinitionsSource& definitions, CommitLatency& latency, std::vector<std::string> warm)
        : engine_(engine), definitions_(definitions), latency_(latency), warm_(std::move(warm)) {}

    void set_stream(Stream* stream) { stream_ = stream; }
    // Called on the stream thread when a recompute of every live doc starts that covers a gap in
    // the stream: the status file should say so at once (docsync.wait_published reads it).
    void on_gap(std::function<void()> callback) { on_gap_ = std::move(callback); }
    // With Redis: docsync:watermark, told each session's generation before its acknowledgements.
    void set_watermark(publish::RedisWatermark* watermark) { watermark_ = watermark; }

    // Stream thread, at every session start: the newest definitions and their `tables` option.
    std::optional<std::string> session_tables() {
        auto defs = definitions_.fetch();
        tables_ = plugin_tables(defs);
        reload_pending_ = false;
        log_info("definitions", "definitions generation " + std::to_string(defs.generation) + ": " +
                                    std::to_string(defs.queries.size()) + " queries, " +
                                    std::to_string(defs.watches.size()) + " watches, tables '" + tables_ + "'");
        engine_.load_definitions(std::move(defs));
        return tables_;
    }

    void on_session(const SessionInfo& session) override {
        engine_.reset_stream();
        latency_.forget_all();
        engine_.set_generation(session.generation);
        if (watermark_) watermark_->set_generation(session.generation);
        if (!session.generation_from_server)
            log_warning("stream", "docsync.advance_generation() is missing: doc generations are kept in this process only");
        // Whatever the sink holds may have missed changes: at start, and whenever this session's
        // stream does not continue the last one's (a recreated or new slot, another server).
        bool first = sessions_++ == 0;
        if (first || session.valve_fired || session.slot_created || session.identity_changed || session.new_history) {
            RecomputeReason reason = RecomputeReason::Startup;
            if (session.valve_fired) {
                reason = RecomputeReason::Valve;
                log_warning("engine", "the WAL safety valve recreated the slot: recomputing every live doc");
            } else if (session.new_history || (!first && session.identity_changed)) {
                reason = RecomputeReason::NewServer;
                log_warning("engine", "the server changed under the slot (system identifier " +
                                          session.system_identifier + ", timeline " +
                                          std::to_string(session.timeline) + "): recomputing every live doc");
            } else if (!first) {
                reason = RecomputeReason::NewSlot;
                log_warning("engine", "the slot was created anew: changes before it were never decoded; "
                                      "recomputing every live doc");
            }
            // Changes before this session may never be delivered, unless it continues the last one.
            bool gap = session.valve_fired || session.slot_created || session.identity_changed || session.new_history;
            engine_.recompute_all_live(reason, gap);
            if (gap && on_gap_) on_gap_();
        }
        // The docs --warm names, once, now that doc versions have this session's generation.
        if (first && !warm_.empty()) {
            log_info("engine", "computing the " + std::to_string(warm_.size()) + " doc(s) --warm names");
            for (const auto& channel : warm_) engine_.warm(channel);
        }
    }

    void on_record(const Record& record, Lsn, std::uint64_t ticket) override {
        if (const auto* change = std::get_if<ChangeRecord>(&record)) {
            engine_.on_change(*change);
        } else if (const auto* begin = std::get_if<BeginRecord>(&record)) {
            xid_ = begin->xid;
            commit_time_ = begin->commit_time;
            engine_.on_begin(*begin);
        } else if (const auto* relation = std::get_if<RelationRecord>(&record)) {
            engine_.on_relation(*relation);
        } else if (const auto* truncate = std::get_if<TruncateRecord>(&record)) {
            engine_.on_truncate(*truncate);
        } else if (const auto* message = std::get_if<MessageRecord>(&record)) {
            if (message->transactional && message->prefix == kDefinitionsMessagePrefix) {
                // Anyone may emit one (pg_logical_emit_message is PUBLIC): one without a generation
                // is not docsync's, and the others only ask for a coalesced reload.
                if (!definitions_message_generation(message->content)) {
                    ++ignored_messages_;
                    return;
                }
            }
            engine_.on_message(*message);
        } else if (const auto* commit = std::get_if<CommitRecord>(&record)) {
            latency_.committed(ticket, commit_time_);
            if (engine_.on_commit(*commit, ticket)) {
                pending_xid_ = xid_;
                reload_pending_ = true;
                // A definition table written (only the API writes one) reloads at once: the next
                // transaction's changes must meet the new watches. A definitions message alone (DDL,
                // or anyone's pg_logical_emit_message) joins the pending reload, which runs at once
                // after a quiet interval, else once it has passed (maybe_reload): a flood costs one
                // reload per interval, and the reload recomputes what DDL changed meanwhile.
                if (engine_.last_commit_wrote_definitions()) reload_definitions();
            }
        }
        if (reload_pending_) maybe_reload();
    }

    void on_idle() override {
        if (reload_pending_) maybe_reload();
    }
    int idle_tick_ms() const override { return reload_pending_ ? 20 : 0; }

private:
    // A coalesced reload, once the interval since the last one has passed: a flood of definitions
    // messages costs one reload per interval, and the interval grows with what a reload costs, so
    // reloads never take more than a fifth of the stream thread's time.
    void maybe_reload() {
        auto now = std::chrono::steady_clock::now();
        if (now < last_reload_ + reload_interval_) return;
        if (ignored_messages_ > 0) {
            log_warning("definitions", std::to_string(ignored_messages_) +
                                           " \"docsync.definitions\" message(s) without a generation were ignored: "
                                           "docsync did not emit them (pg_logical_emit_message is executable by any role)");
            ignored_messages_ = 0;
        }
        reload_definitions();
    }

    // A transaction changed the definitions. The engine holds its ticket until the definitions are
    // loaded (and their recomputes done); the stream restarts only when the plugin must emit other
    // tables or columns. A redelivered definitions transaction finds nothing new and completes.
    void reload_definitions() {
        reload_pending_ = false;
        auto started = std::chrono::steady_clock::now();
        definitions_.wait_visible(pending_xid_);
        auto defs = definitions_.fetch();
        std::string tables = plugin_tables(defs);
        log_info("definitions", "definitions changed in-stream: generation " + std::to_string(defs.generation));
        engine_.load_definitions(std::move(defs));
        if (tables != tables_) {
            log_info("definitions", "the watched tables changed: restarting the stream with tables '" + tables + "'");
            tables_ = tables;
            stream_->request_restart();
        }
        last_reload_ = std::chrono::steady_clock::now();
        reload_interval_ = std::max<std::chrono::steady_clock::duration>(kMinReloadInterval,
                                                                          4 * (last_reload_ - started));
    }

    static constexpr std::chrono::milliseconds kMinReloadInterval{250};

    Engine& engine_;
    DefinitionsSource& definitions_;
    CommitLatency& latency_;
    Stream* stream_ = nullptr;
    std::function<void()> on_gap_;
    publish::RedisWatermark* watermark_ = nullptr;
    const std::vector<std::string> warm_;
    std::string tables_;
    std::uint64_t sessions_ = 0;
    std::uint64_t xid_ = 0;  // of the transaction being decoded
    std::uint64_t pending_xid_ = 0;  // of the last transaction that asked for a reload
    bool reload_pending_ = false;     // a coalesced reload is due (maybe_reload)
    std::uint64_t ignored_messages_ = 0;
    std::chrono::steady_clock::time_point last_reload_{};
    std::chrono::steady_clock::duration reload_interval_ = kMinReloadInterval;
    std::int64_t commit_time_ = 0;  // its commit timestamp (PostgreSQL epoch, microseconds)
};

// The stream's state in the status view's terms.
status::StreamPhase stream_phase(StreamState state) {
    switch (state) {
        case StreamState::Streaming:
        case StreamState::Paused: return status::StreamPhase::Streaming;
        case StreamState::Connecting:
        case StreamState::Backoff: return status::StreamPhase::Connecting;
        case StreamState::Stopped:
        case StreamState::Failed: return status::StreamPhase::Ended;
        case StreamState::Idle: break;
    }
    return status::StreamPhase::Idle;
}

// What the status thread reads from the stream, the coordinator and the engine, as the plain values
// the status component takes.
status::Readings read_status(const Stream& stream, const DeliveryProgressCoordinator& coordinator,
                             const Engine& engine, const CommitLatency& latency, const Clock& clock) {
    auto s = stream.stats();
    status::Readings r;
    r.phase = stream_phase(s.state);
    r.sessions = s.sessions;
    r.reconnects = s.reconnects;
    r.totals.valve_resets = s.valve_resets;
    r.generation = s.generation;
    r.received_lsn = s.received_lsn;
    r.acked_lsn = s.sent_flush_lsn;
    r.stream_error = s.last_error;
    r.retained_wal = s.retained_wal;
    r.open_txns = coordinator.stats().pending_groups;
    auto e = engine.stats();
    r.dirty_depth = e.dirty_depth();
    r.in_flight = e.in_flight;
    r.live_docs = e.live_docs;
    r.totals.changes = e.changes;
    r.totals.recomputes = e.recomputes;
    r.totals.publishes = e.publishes;
    r.totals.permanent_failures = e.permanent_failures;
    r.totals.transient_retries = e.transient_retries;
    r.last_transient_error = e.last_transient_error;
    r.totals.not_visible_retries = e.not_visible_retries;
    r.recompute = {.reason = static_cast<std::uint32_t>(e.recompute.reason),
                   .id = e.recompute.id,
                   .total = e.recompute.total,
                   .done = e.recompute.done,
                   .started_ns = e.recompute.started_ns,
                   .finished_ns = e.recompute.finished_ns,
                   .now_ns = std::chrono::nanoseconds(clock.now().time_since_epoch()).count(),
                   .gap = e.recompute.gap};
    for (auto& q : e.queries)
        r.queries.push_back({.name = std::move(q.name),
                             .recomputes = q.recomputes,
                             .permanent_failures = q.permanent_failures,
                             .compute_ns = q.compute_ns,
                             .publishes = q.publishes,
                             .compute_seconds = std::move(q.compute_seconds),
                             .last_error = std::move(q.last_error),
                             .last_sqlstate = std::move(q.last_sqlstate),
                             .last_channel = std::move(q.last_channel),
                             .error_cleared = q.last_error_cleared});
    r.batch_size = std::move(e.batch_size);
    r.refused_channels = e.refused_channels;
    r.batched_forms_set_aside = e.batched_forms_set_aside;
    r.commit_publish_seconds = latency.histogram();
    return r;
}

// run()'s exit code when the worker stepped down because another worker took its lease.
constexpr int kSteppedDown = 3;
// How long a worker without --standby retries a held lease (its holder may be exiting), and how long
// a spare that took the lease waits for the slot's lock file on this host (its last holder drains).
constexpr auto kLeaseGrace = 5s;

// Takes the slot's lease for a worker without --standby: retried for kLeaseGrace, then an error
// naming the holder.
void take_lease(Lease& lease, const std::string& slot) {
    auto until = std::chrono::steady_clock::now() + kLeaseGrace;
    for (bool logged = false;; std::this_thread::sleep_for(500ms)) {
        if (lease.try_acquire()) return;
        if (std::chrono::steady_clock::now() >= until)
            throw Error("the lease of slot \"" + slot + "\" is held by another worker: " + lease.holder() +
                        "; stop it, or start this worker with --standby to wait as its hot spare");
        if (!logged) log_info("worker", "waiting for the lease of slot \"" + slot + "\", held by " + lease.holder());
        logged = true;
    }
}

// A start that failed for a reason of the moment (a server that refuses connections for now, a sink
// that cannot be reached, a frozen predecessor that holds a lock): a spare gives the lease back and
// stands by again, as a running worker rides out the same outage; serve() catches it.
class StartUnavailable : public Error {
public:
    StartUnavailable(const std::string& what, const Error& e) : Error(what + ": " + e.what(), e.sqlstate(), true) {}
};

// How long a spare that could not start waits before standing by again.
constexpr auto kStartRetry = 2s;

// The slot's status board. Without --standby, a lock file held on this host refuses the start at
// once. A spare that just took the lease may find it still held by the worker it replaces, which
// drains or is frozen: it waits kLeaseGrace, then fences that worker (SIGKILL, only a docsync-worker
// of this host holding the lock file), so that the file docsync.status and wait_published read is
// always the lease holder's. A holder it cannot fence makes the start StartUnavailable.
std::unique_ptr<status::StatusBoard> open_board(const Settings& settings, const std::string& database) {
    auto until = std::chrono::steady_clock::now() + (settings.standby ? kLeaseGrace : 0s);
    for (bool fenced = false;;) {
        try {
            return std::make_unique<status::StatusBoard>(settings.status_dir, database, settings.slot);
        } catch (const Error& e) {
            if (!settings.standby) throw;
            if (std::chrono::steady_clock::now() >= until) {
                auto owner = status::local_lock_owner(settings.status_dir, database, settings.slot);
                if (fenced || !owner || *owner == ::getpid() ||
                    !status::kill_lock_owner(settings.status_dir, database, settings.slot, *owner))
                    throw StartUnavailable("cannot take the slot's status file", e);
                log_warning("status", std::string(e.what()) + ": that worker lost the lease to this one " +
                                          format_duration(kLeaseGrace) +
                                          " ago and still holds the status file (it drains or is frozen): killed "
                                          "it (SIGKILL), so that the status file is this worker's");
                fenced = true;
                until = std::chrono::steady_clock::now() + kLeaseGrace;  // the kernel drops its locks
            }
            std::this_thread::sleep_for(200ms);
        }
    }
}

// Fences the worker this spare replaces when it still holds the JSONL sink file's lock (frozen, or
// draining after it lost the lease): only a docsync-worker of this host serving this slot; true when
// it did.
bool fence_file_holder(const Settings& settings, const publish::SinkSpec& sink, const std::string& database) {
    if (sink.kind != publish::SinkSpec::Kind::File) return false;
    auto pid = status::kill_flock_holder(sink.path, settings.status_dir, database, settings.slot);
    if (!pid) return false;
    log_warning("publish", "the JSONL sink file " + sink.path + " is still locked by docsync-worker pid " +
                               std::to_string(*pid) + ", which lost the lease of slot \"" + settings.slot +
                               "\" to this worker (it drains or is frozen): killed it (SIGKILL) so that its lock goes");
    return true;
}

// The sink. For a spare, a sink that cannot be reached now is StartUnavailable (the JSONL file's lock
// held by the worker it replaces is fenced first); for anyone else, a failed start (the command
// line's sink is wrong, or down at a cold start) ends the worker.
std::unique_ptr<Publisher> open_sink(const Settings& settings, const publish::SinkSpec& sink, const std::string& database) {
    auto until = std::chrono::steady_clock::now() + kLeaseGrace;
    for (bool fenced = false;; std::this_thread::sleep_for(200ms)) {
        try {
            return publish::make_publisher(sink);
        } catch (const Error& e) {
            if (!settings.standby || !e.transient()) throw;
            if (!fenced) fenced = fence_file_holder(settings, sink, database);
            if (!fenced || std::chrono::steady_clock::now() >= until) throw StartUnavailable("cannot start the sink", e);
        }
    }
}

int run(const Settings& settings, Lease& lease, const sigset_t& signals, metrics::Server* metrics_server) {
    // The worker's state the threads below share: the stream ended, a drain was asked for (a
    // signal, a fatal sink, a lost lease), the lease went to another worker.
    std::mutex mutex;
    std::condition_variable wake;
    bool stream_done = false;
    bool draining = false;
    bool stepped_down = false;
    // The lease watch: from the moment this worker holds the lease, every second, whether it still
    // does; the round trip is also what tells spares it is alive while it starts (reading the
    // definitions may wait behind a migration's lock). Its connection broke and another worker took
    // the lease meanwhile: this one steps down (drains, makes a final acknowledgement and leaves the
    // slot to it), so two workers never both act as the active one.
    std::unique_ptr<LeaseWatch> lease_watch;
    auto watch_lease = [&] {
        lease_watch = std::make_unique<LeaseWatch>(lease, [&](const std::string& holder) {
            std::lock_guard lock(mutex);
            if (stream_done || draining) return;
            log_warning("worker", "another worker took the lease of slot \"" + settings.slot + "\" (" + holder +
                                      ") while this worker's lease connection was down: stepping down");
            stepped_down = true;
            draining = true;
            wake.notify_all();
        });
    };
    // A spare arrives here holding the lease.
    if (settings.standby) watch_lease();
    DefinitionsSource definitions(settings.dsn);
    DatabaseIdentity identity = definitions.identity();
    definitions.check_role(settings.allow_unsafe_pool);
    auto board = open_board(settings, identity.database);
    // A start that fails before its slot exists (no --create-slot, a refused pool role, …) leaves no
    // status file of its own behind: docsync.status would show it as a stale row until forget_slot.
    auto withdraw_if_no_slot = [&] {
        if (board->created() && !definitions.slot_exists(settings.slot)) board->withdraw();
    };
    struct FailedStart {
        std::function<void()> withdraw;
        int exceptions = std::uncaught_exceptions();
        ~FailedStart() {
            if (std::uncaught_exceptions() > exceptions) try {
                    withdraw();
                } catch (...) {
                }
        }
    } failed_start{withdraw_if_no_slot};
    // Anyone else takes the lease now, after the lock file, which refuses a second worker on this host
    // at once.
    if (!settings.standby) {
        take_lease(lease, settings.slot);
        watch_lease();
    }

    auto sink = publish::parse_sink(settings.sink);
    auto publisher = open_sink(settings, sink, identity.database);
    // Until the stream runs, a watch of its own says in the status file what the sink holds.
    std::optional<status::SinkStartWatch> start_watch(std::in_place, *publisher, *board);

    ExecutorOptions executor_options;
    executor_options.pool_dsn = settings.pool_dsn;
    executor_options.pool_size = settings.pool;
    executor_options.statement_timeout = settings.statement_timeout;
    executor_options.max_doc_bytes = settings.max_doc_bytes;
    executor_options.allow_unsafe_pool = settings.allow_unsafe_pool;
    Executor executor(executor_options);
    // The pool must see the rows the slot decodes: the same database, on the same server or a standby
    // of it (which shares its system identifier).
    if (executor.database() != identity.database || executor.system_identifier() != identity.system_identifier)
        throw Error("--pool-dsn reaches database \"" + executor.database() + "\" of the server with system identifier " +
                    executor.system_identifier() + ", but --dsn reaches database \"" + identity.database +
                    "\" of the server with system identifier " + identity.system_identifier +
                    ": the doc queries must run on the database the slot decodes; point --pool-dsn at dbname=" +
                    identity.database + " on that server or on a hot standby of it");

    SteadyClock clock;
    DeliveryProgressCoordinator coordinator;
    EngineOptions engine_options;
    engine_options.live_all = settings.live == LiveMode::All;
    engine_options.max_keys = settings.max_keys;
    engine_options.batch = settings.batch;
    CommitLatency latency;
    Engine engine(executor, *publisher, clock, engine_options, [&coordinator, &latency](std::uint64_t ticket) {
        latency.completed(ticket, std::chrono::system_clock::now());
        coordinator.complete(ticket);
    });
    auto defs = definitions.fetch();
    check_warm(settings.warm, defs);
    engine.load_definitions(std::move(defs));

    Pipeline pipeline(engine, definitions, latency, settings.warm);
    StreamOptions stream_options;
    stream_options.dsn = settings.dsn;
    stream_options.slot = settings.slot;
    stream_options.create_slot = settings.create_slot;
    stream_options.tables = [&pipeline] { return pipeline.session_tables(); };
    stream_options.sink_high_water = [&publisher] { return publisher->max_version(); };
    stream_options.status_interval = settings.status_interval;
    stream_options.max_pending_txns = settings.max_pending_txns;
    stream_options.max_pending_bytes = settings.max_pending_bytes;
    stream_options.max_retained_wal = settings.max_retained_wal;
    Stream stream(stream_options, coordinator, pipeline);
    pipeline.set_stream(&stream);
    // With Redis, each acknowledgement also advances docsync:watermark, for clients that wait for
    // their own writes; the watermark passes it on to the stream first (publish/watermark.hpp).
    // The sink's breaks (Publisher::breaks) a lost-docs check has covered: while a break is newer,
    // the sink may have lost what the slot confirmed, and neither docsync.wait_published nor the
    // watermark may say published (the sink watch below runs the check).
    // Until the first check, what the sink holds is unknown (the worker it replaced may have seen it
    // reset, or none did): waits hold, as the board's `starting` state says (status/status_board.hpp).
    std::atomic<std::uint64_t> sink_checked{publisher->breaks()};
    std::atomic<bool> sink_first_checked{false};
    auto sink_unchecked = [&publisher, &sink_checked, &sink_first_checked] {
        return !sink_first_checked.load() || publisher->breaks() > sink_checked.load();
    };
    std::unique_ptr<publish::RedisWatermark> watermark;
    if (sink.is_redis()) {
        auto holding = [&engine, &sink_unchecked] {
            return engine.recompute_progress().holds_waits() || sink_unchecked();
        };
        watermark = sink.kind == publish::SinkSpec::Kind::Redis
                        ? std::make_unique<publish::RedisWatermark>(sink.redis, stream, publish::WatermarkOptions{}, holding)
                        : std::make_unique<publish::RedisWatermark>(sink.cluster, stream, publish::WatermarkOptions{},
                                                                    holding);
        coordinator.set_acknowledger(watermark.get());
        pipeline.set_watermark(watermark.get());
    }

    // Redis clients ask for docs on docsync:warm and docsync:touch in both live modes; with --live
    // subscribers the subscriber set also decides which docs are live. With --live all every doc the
    // engine knows is live, so a touch computes only a doc it did not know, and a warm always computes.
    std::unique_ptr<publish::RedisLiveness> liveness;
    if (settings.live == LiveMode::Subscribers || sink.is_redis()) {
        publish::LivenessOptions liveness_options;
        liveness_options.poll_subscribers = settings.live == LiveMode::Subscribers;
        liveness_options.poll_interval = settings.live_poll;
        liveness = publish::make_liveness(
            sink,
            {[&engine](const std::vector<std::string>& channels, bool complete) { engine.sync_live(channels, complete); },
             [&engine](const std::string& channel) { engine.warm(channel); },
             [&engine](const std::string& channel) { engine.touch(channel); }},
            liveness_options);
    }

    engine.start(settings.threads);
    // The last worker of the slot left a recompute that covered a gap unfinished: docs may still
    // lack changes the stream will not deliver again. Recomputing them now keeps read-your-writes
    // waits holding until that gap is closed (the first session's own recompute keeps it open).
    auto check_inherited_gap = [&] {
        if (!board->inherited_gap()) return;
        log_warning("engine", "the last worker of the slot stopped during a recompute of every live doc that covered "
                              "changes the stream will not deliver again: recomputing every live doc");
        engine.recompute_all_live(RecomputeReason::Startup, true);
    };
    check_inherited_gap();
    if (auto lost = start_watch->stop()) {
        log_warning("publish", *lost + " while this worker started: recomputing every live doc");
        engine.recompute_all_live(RecomputeReason::SinkReset, true);
    }
    if (liveness) liveness->start();
    // The continuous audit: a sample of the live docs recomputed and compared with what the sink
    // retains, once the acknowledged position covers what each sample sees (audit/auditor.hpp).
    audit::AuditorOptions audit_options;
    audit_options.rate = settings.audit_rate;
    audit_options.rate_given = settings.audit_rate_given;
    audit_options.sink = sink.display();
    audit::Auditor auditor(engine, executor, *publisher, [&coordinator] { return coordinator.checkpoint(); },
                           audit_options);
    auditor.start();
    // A sink with no docs to keep current publishes nothing until a watched row changes: say so once.
    if (settings.live == LiveMode::All && settings.warm.empty() && engine.stats().live_docs == 0)
        log_info("engine", std::string(sink.kind == publish::SinkSpec::Kind::Stdout
                                           ? "stdout holds no docs the worker could keep current"
                                           : "the sink holds no docs yet") +
                               ": a doc is published when a row it watches changes, or at start when --warm names it" +
                               (sink.is_redis() ? " (or when a client asks on docsync:warm)"
                                                                            : ""));

    bool status_now = false;  // publish the board before the next tick
    auto publish_status_now = [&] {
        std::lock_guard lock(mutex);
        status_now = true;
        wake.notify_all();
    };
    pipeline.on_gap(publish_status_now);
    std::string fatal;
    // The board's snapshot of what the components report and of the worker's own condition.
    status::StatusHistory history;
    auto publish_status = [&](bool draining_now, const std::string& error, const std::string& waiting) {
        status::Readings readings = read_status(stream, coordinator, engine, latency, clock);
        audit::AuditStats audited = auditor.stats();
        readings.totals.audit_samples = audited.samples;
        readings.totals.audit_divergences = audited.divergences;
        readings.sink_unchecked = sink_unchecked();
        readings.draining = draining_now;
        readings.fatal = error;
        readings.waiting = waiting;
        auto now = std::chrono::system_clock::now();
        status::StatusSnapshot snapshot = history.snapshot(readings, now);
        if (metrics_server) metrics_server->publish(metrics::render(readings, snapshot, now));
        board->publish(snapshot);
    };

    std::thread stream_thread([&] {
        try {
            stream.run();
        } catch (const std::exception& e) {
            std::lock_guard lock(mutex);
            fatal = e.what();
        }
        std::lock_guard lock(mutex);
        stream_done = true;
        wake.notify_all();
    });

    // The sink watch: every second, and at once when the sink's connection breaks, whether the sink
    // lost docs it had acknowledged (a Redis restart or FLUSHALL, a truncated or replaced file); then
    // every live doc is recomputed. Between a break and the check after it, waits hold (above).
    std::thread sink_thread([&] {
        std::unique_lock lock(mutex);
        while (!stream_done && !draining) {
            lock.unlock();
            std::uint64_t breaks = publisher->breaks();
            bool was_unchecked = breaks > sink_checked.load();
            try {
                if (auto lost = publisher->lost_docs()) {
                    log_warning("publish", *lost + ": recomputing every live doc");
                    engine.recompute_all_live(RecomputeReason::SinkReset, true);
                    publish_status_now();
                }
                // The gap recompute holds the waits now, if the sink lost anything.
                std::uint64_t seen = sink_checked.load();
                while (seen < breaks && !sink_checked.compare_exchange_weak(seen, breaks)) {
                }
                if (!sink_first_checked.exchange(true) || was_unchecked) publish_status_now();
            } catch (const std::exception&) {
                // the sink is down: its outage shows where docs are published; asked again next time
            }
            auto gone = publisher->fatal();
            auto next = std::chrono::steady_clock::now() + 1s;
            if (!gone && publisher->wait_for_break(1s)) {
                publish_status_now();  // waits hold from now until the check
                next = std::chrono::steady_clock::now();
            }
            lock.lock();
            if (gone) {
                log_error("publish", *gone);
                if (fatal.empty()) fatal = *gone;
                draining = true;
                wake.notify_all();
                break;
            }
            wake.wait_until(lock, next, [&] { return stream_done || draining; });
        }
    });

    std::thread signal_thread([&] {
        for (;;) {
            int signal = 0;
            if (sigwait(&signals, &signal) != 0) continue;
            if (signal == SIGHUP) {
                reopen_log();
                log_info("worker", "SIGHUP: log file reopened");
                continue;
            }
            std::lock_guard lock(mutex);
            if (signal == SIGUSR1 || stream_done) return;  // the worker is ending on its own
            log_info("worker", std::string(signal == SIGTERM ? "SIGTERM" : "SIGINT") +
                                   ": draining in-flight computes, then a final acknowledgement");
            draining = true;
            wake.notify_all();
            return;
        }
    });

    // The status thread: this one. Publishes the board every 500 ms until the stream ends or a
    // signal asks to drain.
    {
        std::unique_lock lock(mutex);
        while (!stream_done && !draining) {
            lock.unlock();
            publish_status(false, {}, definitions.waiting());
            lock.lock();
            wake.wait_for(lock, 500ms, [&] { return stream_done || draining || status_now; });
            status_now = false;
        }
    }

    if (liveness) liveness->stop();
    auditor.stop();  // after its running compute, if any: it holds no transaction back
    // A drain is bounded: a compute blocked writing to a sink nobody reads (a stalled stdout) must not
    // keep the worker alive. Past --drain-timeout it leaves at once; what it did not publish was never
    // acknowledged, so the next start sends it again.
    std::mutex drain_mutex;
    std::condition_variable drain_done_cv;
    bool drain_done = false;
    std::thread drain_watch([&] {
        std::unique_lock lock(drain_mutex);
        if (drain_done_cv.wait_for(lock, settings.drain_timeout, [&] { return drain_done; })) return;
        log_error("worker", "draining did not finish within --drain-timeout " + format_duration(settings.drain_timeout) +
                                ": a compute is blocked publishing to the sink (a reader that stopped reading?); "
                                "exiting without acknowledging what was not published");
        std::_Exit(1);
    });
    {
        std::unique_lock lock(mutex);
        if (draining) {
            lock.unlock();
            publish_status(true, {}, definitions.waiting());
            engine.stop();  // running computes end; their completions acknowledge
            stream.stop();  // a final status update, then run() returns
            lock.lock();
            wake.wait(lock, [&] { return stream_done; });
        } else {
            lock.unlock();
            engine.stop();
            lock.lock();
        }
    }
    stream_thread.join();
    sink_thread.join();
    lease_watch->stop();
    {
        std::lock_guard lock(drain_mutex);
        drain_done = true;
    }
    drain_done_cv.notify_all();
    drain_watch.join();
    pthread_kill(signal_thread.native_handle(), SIGUSR1);
    signal_thread.join();

    std::string error;
    {
        std::lock_guard lock(mutex);
        error = fatal;
    }
    publish_status(false, error, {});
    if (!error.empty()) {
        log_error("worker", error);
        withdraw_if_no_slot();
        return 1;
    }
    if (stepped_down) {
        log_info("worker", "stepped down at " + format_lsn(stream.stats().sent_flush_lsn));
        return kSteppedDown;
    }
    log_info("worker", "stopped cleanly at " + format_lsn(stream.stats().sent_flush_lsn));
    return 0;
}

// A spare's wait (--standby): polls the lease every 500 ms, registered as a standby meanwhile, until
// it takes the lease (true) or a signal asks it to stop (false). Server outages are retried. An
// active worker is taken for hung when no walsender streams the slot for 3 status intervals, 20 s at
// least (HungWatch).
bool stand_by(Lease& lease, const Settings& settings, const sigset_t& signals, metrics::Server* metrics_server) {
    auto since = std::chrono::system_clock::now();
    auto started = std::chrono::steady_clock::now();
    std::string last_problem;
    bool announced = false;
    HungWatch hung(std::max<std::chrono::milliseconds>(3 * settings.status_interval, 20s),
                   [&settings](const std::string& database, int pid) {
                       return status::kill_lock_owner(settings.status_dir, database, settings.slot, pid);
                   });
    for (;;) {
        try {
            if (lease.try_acquire()) {
                auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
                log_info("worker", "took the lease of slot \"" + settings.slot + "\" after standing by for " +
                                       format_duration(waited) + ": starting as the active worker");
                return true;
            }
            lease.stand_by();
            if (!announced)
                log_info("worker", "standing by: the lease of slot \"" + settings.slot + "\" is held by " + lease.holder() +
                                       "; taking over when that worker stops or dies");
            announced = true;
            last_problem.clear();
            hung.look(lease, settings.slot);
        } catch (const Error& e) {
            hung.forget();
            // A wrong password or role, or a database that does not exist, is a setting to fix: no
            // wait makes it right.
            if (e.sqlstate().starts_with("28") || e.sqlstate() == "3D000") throw;
            if (last_problem != e.what())
                log_warning("worker", std::string("standing by, the server cannot be asked (retried): ") + e.what());
            last_problem = e.what();
        }
        if (metrics_server) metrics_server->publish(metrics::render_standby(since, std::chrono::system_clock::now()));
        timespec wait{0, 500'000'000};
        int signal = sigtimedwait(&signals, nullptr, &wait);
        if (signal == SIGHUP) {
            reopen_log();
            log_info("worker", "SIGHUP: log file reopened");
        } else if (signal == SIGTERM || signal == SIGINT) {
            log_info("worker", std::string(signal == SIGTERM ? "SIGTERM" : "SIGINT") + " while standing by: stopping");
            return false;
        }
    }
}

// Whether a failed start is retried, and after how long. A spare retries what the moment explains
// (StartUnavailable, a lost connection, SQLSTATE classes 08, 53, 57: see sqlstate_is_transient), every
// kStartRetry, lease given back; a worker without --standby retries only what the server itself
// says is of the moment (08, 53, 57P03 "cannot connect now"), backing off up to 30 s. A wrong
// password, role or database, a refused role or sink setting still ends the start with its message.
std::optional<std::chrono::milliseconds> start_retry(const Error& e, bool standby, int failed_starts) {
    const std::string& state = e.sqlstate();
    if (standby) {
        if (dynamic_cast<const StartUnavailable*>(&e) || (e.transient() && sqlstate_is_transient(state)))
            return kStartRetry;
        return std::nullopt;
    }
    if (!e.transient() || !(state.starts_with("08") || state.starts_with("53") || state == "57P03")) return std::nullopt;
    return std::min<std::chrono::milliseconds>(kStartRetry * (1 << std::min(failed_starts, 4)), 30s);
}

// Waits `delay` before a retried start; false when SIGTERM or SIGINT asks the worker to stop.
bool wait_to_retry(const sigset_t& signals, std::chrono::milliseconds delay) {
    auto until = std::chrono::steady_clock::now() + delay;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0) return true;
        timespec wait{static_cast<time_t>(left.count() / 1'000'000'000), static_cast<long>(left.count() % 1'000'000'000)};
        int signal = sigtimedwait(&signals, nullptr, &wait);
        if (signal == SIGTERM || signal == SIGINT) return false;
        if (signal == SIGHUP) reopen_log();
    }
}

// The worker's life: with --standby, stand by until the lease is free, run as the active worker, and
// stand by again after stepping down; without it, run once.
int serve(const Settings& settings) {
    // Signals go to one thread only (run()'s signal thread, or stand_by()): block them before any
    // thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGUSR1);  // internal: ends run()'s signal thread
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    // Listening first: a port in use fails the start before anything connects.
    std::unique_ptr<metrics::Server> metrics_server;
    if (!settings.metrics_address.empty())
        metrics_server = std::make_unique<metrics::Server>(settings.metrics_address, settings.metrics_port);

    Lease lease({.dsn = settings.dsn, .slot = settings.slot});
    int failed_starts = 0;
    for (;;) {
        if (settings.standby && !stand_by(lease, settings, signals, metrics_server.get())) return 0;
        int code = 0;
        try {
            code = run(settings, lease, signals, metrics_server.get());
        } catch (const Error& e) {
            auto retry = start_retry(e, settings.standby, failed_starts);
            if (!retry) throw;
            ++failed_starts;
            if (settings.standby)
                log_warning("worker", "took the lease of slot \"" + settings.slot + "\" but " +
                                          (dynamic_cast<const StartUnavailable*>(&e) ? "" : "cannot start: ") + e.what() +
                                          "; giving the lease back and standing by again (retried in " +
                                          format_duration(*retry) + ")");
            else
                log_warning("worker", std::string("cannot start: ") + e.what() + "; the server refuses for now: retried in " +
                                          format_duration(*retry) + " (try " + std::to_string(failed_starts) + ")");
            lease.release();
            if (!wait_to_retry(signals, *retry)) return 0;
            continue;
        }
        failed_starts = 0;
        if (code != kSteppedDown) return code;
        if (!settings.standby) {
            log_error("worker", "this worker lost the lease of slot \"" + settings.slot +
                                    "\" to another worker and stepped down; start every worker of a slot with "
                                    "--standby so the one that steps down waits as the hot spare");
            return 1;
        }
    }
}

}  // namespace
}  // namespace docsync

int main(int argc, char** argv) {
    auto parsed = docsync::parse_settings(argc, argv, environ);
    if (!parsed.run) {
        if (!parsed.output.empty()) std::fputs(parsed.output.c_str(), stdout);
        if (!parsed.error.empty()) std::fprintf(stderr, "%s\n", parsed.error.c_str());
        return parsed.exit_code;
    }
    if (auto error = docsync::apply_log_settings(parsed.settings); !error.empty()) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 2;
    }
    try {
        return docsync::serve(parsed.settings);
    } catch (const std::exception& e) {
        docsync::log_error("worker", e.what());
        return 1;
    }
}
