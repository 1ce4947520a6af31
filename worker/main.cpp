// docsync-worker: wiring only. Parses the settings, builds the components and connects them:
//
//   Stream (stream thread) ──records──▶ Engine.on_* ──tickets──▶ Coordinator ──ack──▶ Stream
//   Engine worker threads ──▶ Executor (Runner) ──▶ Publisher (sink)
//   status thread: Stream/Coordinator/Engine stats ──▶ StatusBoard
//   signal thread: SIGTERM/SIGINT drain and stop, SIGHUP reopens the log file
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "config/settings.hpp"
#include "engine/channel.hpp"
#include "engine/definitions.hpp"
#include "engine/engine.hpp"
#include "executor/definitions_reader.hpp"
#include "executor/executor.hpp"
#include "pg/connection.hpp"
#include "progress/coordinator.hpp"
#include "publish/sink.hpp"
#include "replication/stream.hpp"
#include "status/status_board.hpp"

extern char** environ;

namespace docsync {
namespace {

using namespace std::chrono_literals;

constexpr auto kControlTimeout = 30s;

// The database a connection reached and its server's system identifier (a hot standby shares its
// primary's).
struct DatabaseIdentity {
    std::string database;
    std::string system_identifier;
};

// Reads the definitions over an ordinary connection on --dsn, reconnecting when it was lost. Used
// at start (main thread) and then only by the stream thread.
class DefinitionsSource {
public:
    explicit DefinitionsSource(std::string dsn) : dsn_(std::move(dsn)) {}

    // The database --dsn reaches (its name names the status file) and its server, checking that the
    // extension is installed.
    DatabaseIdentity identity() {
        auto result = connection().exec(
            "SELECT current_database(), EXISTS (SELECT FROM pg_extension WHERE extname = 'docsync'), "
            "(SELECT system_identifier FROM pg_catalog.pg_control_system())::text",
            pg::deadline_in(kControlTimeout));
        std::string name(result.get(0, 0));
        if (result.get(0, 1) != "t")
            throw Error("the docsync extension is not installed in database \"" + name +
                        "\": run CREATE EXTENSION docsync there (as a superuser), then define doc queries");
        return {name, std::string(result.get(0, 2))};
    }

    // The --dsn role holds the slot and reads definitions: like the pool role, it must reach no
    // superuser and nothing else dangerous, except REPLICATION, which it needs.
    void check_role(bool allow_unsafe) {
        require_harmless_role(connection(), true, "the replication role of --dsn",
                              "connect --dsn as a role with REPLICATION and nothing more (CREATE ROLE docsync_repl "
                              "LOGIN REPLICATION; SELECT docsync.grant_replication('docsync_repl'))",
                              allow_unsafe, "definitions");
    }

    Definitions fetch() {
        for (int attempt = 1;; ++attempt) {
            try {
                Definitions definitions = read_definitions(connection(), pg::deadline_in(kControlTimeout));
                for (const auto& problem : definitions.unresolved)
                    log_warning("definitions", "not used: " + problem);
                return definitions;
            } catch (const Error& e) {
                if (!e.transient() || attempt >= 5) throw;
                log_warning("definitions", std::string("reading definitions failed, retrying: ") + e.what());
                conn_.reset();
                std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
            }
        }
    }

    // A commit is decoded before it is visible to new snapshots (invariant 3): before reading the
    // definitions a transaction changed, wait until that transaction is visible, or the read returns
    // the old definitions and the change is lost until the next session. However long it takes (a
    // synchronous-replication stall): the stream, and so the slot, wait with it, and waiting() says
    // what for, for docsync.status.
    void wait_visible(std::uint64_t xid) {
        auto started = std::chrono::steady_clock::now();
        auto next_log = started + kControlTimeout;
        auto pause = std::chrono::milliseconds(5);
        for (;;) {
            try {
                auto result = connection().exec("SELECT pg_visible_in_snapshot($1::text::xid8, pg_current_snapshot())",
                                                {std::to_string(xid)}, pg::deadline_in(kControlTimeout));
                if (result.get(0, 0) == "t") break;
            } catch (const Error& e) {
                if (!e.transient()) throw;
                conn_.reset();
            }
            auto now = std::chrono::steady_clock::now();
            if (now >= next_log) {
                auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - started).count();
                std::string what = "waiting " + std::to_string(waited) + " s for transaction " + std::to_string(xid) +
                                   ", which changed the definitions, to become visible (a synchronous replication "
                                   "stall, or a commit still in progress): the stream waits with it";
                log_warning("definitions", what);
                std::lock_guard lock(waiting_mutex_);
                waiting_ = what;
                next_log = now + kControlTimeout;
            }
            std::this_thread::sleep_for(pause);
            pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::milliseconds(200));
        }
        std::lock_guard lock(waiting_mutex_);
        if (!waiting_.empty()) log_info("definitions", "transaction " + std::to_string(xid) + " is visible now");
        waiting_.clear();
    }

    // What the stream waits for now (wait_visible), or empty.
    std::string waiting() const {
        std::lock_guard lock(waiting_mutex_);
        return waiting_;
    }

private:
    pg::Connection& connection() {
        if (!conn_ || !conn_->ok()) {
            conn_.emplace(pg::Connection::connect(dsn_, pg::deadline_in(kControlTimeout),
                                                  {{"application_name", "docsync-worker control"}}, "--dsn"));
            pg::pin_text_forms(*conn_, pg::deadline_in(kControlTimeout));
        }
        return *conn_;
    }

    std::string dsn_;
    std::optional<pg::Connection> conn_;
    mutable std::mutex waiting_mutex_;
    std::string waiting_;
};

// Each --warm channel must name a defined doc query, with one value per param.
void check_warm(const std::vector<std::string>& channels, const Definitions& defs) {
    for (const auto& channel : channels) {
        ParsedChannel parsed;
        if (!parse_channel(channel, parsed)) throw Error("--warm \"" + channel + "\" is not a doc channel");
        const DocQuery* query = defs.find_query(parsed.query);
        if (!query) {
            std::string names;
            for (const auto& q : defs.queries) names += (names.empty() ? "" : ", ") + q.name;
            throw Error("--warm \"" + channel + "\": no doc query is named \"" + parsed.query + "\" (" +
                        (names.empty() ? std::string("none is defined") : "defined: " + names) +
                        "); fix the channel: SELECT docsync.channel('<query>', '<value>') spells one");
        }
        if (query->params.size() != parsed.values.size()) {
            std::string params;
            for (const auto& p : query->params) params += (params.empty() ? "" : ", ") + p;
            throw Error("--warm \"" + channel + "\": doc query \"" + query->name + "\" takes " +
                        std::to_string(query->params.size()) + " value(s) (" + params + "), the channel gives " +
                        std::to_string(parsed.values.size()) + "; fix the channel: SELECT docsync.channel('" +
                        query->name + "', …) spells it");
        }
    }
}

// Hands stream records to the engine and keeps the definitions and the plugin's `tables` current.
class Pipeline final : public StreamHandler {
public:
    Pipeline(Engine& engine, DefinitionsSource& definitions, std::vector<std::string> warm)
        : engine_(engine), definitions_(definitions), warm_(std::move(warm)) {}

    void set_stream(Stream* stream) { stream_ = stream; }

    // Stream thread, at every session start: the newest definitions and their `tables` option.
    std::optional<std::string> session_tables() {
        auto defs = definitions_.fetch();
        tables_ = plugin_tables(defs);
        log_info("definitions", "definitions generation " + std::to_string(defs.generation) + ": " +
                                    std::to_string(defs.queries.size()) + " queries, " +
                                    std::to_string(defs.watches.size()) + " watches, tables '" + tables_ + "'");
        engine_.load_definitions(std::move(defs));
        return tables_;
    }

    void on_session(const SessionInfo& session) override {
        engine_.reset_stream();
        engine_.set_generation(session.generation);
        if (!session.generation_from_server)
            log_warning("stream", "docsync.advance_generation() is missing: doc generations are kept in this process only");
        // Whatever the sink holds may have missed changes: at start, and whenever this session's
        // stream does not continue the last one's (a recreated or new slot, another server).
        bool first = sessions_++ == 0;
        if (first || session.valve_fired || session.slot_created || session.identity_changed) {
            RecomputeReason reason = RecomputeReason::Startup;
            if (session.valve_fired) {
                reason = RecomputeReason::Valve;
                log_warning("engine", "the WAL safety valve recreated the slot: recomputing every live doc");
            } else if (!first && session.identity_changed) {
                reason = RecomputeReason::NewServer;
                log_warning("engine", "the server changed under the slot (system identifier " +
                                          session.system_identifier + ", timeline " +
                                          std::to_string(session.timeline) + "): recomputing every live doc");
            } else if (!first) {
                reason = RecomputeReason::NewSlot;
                log_warning("engine", "the slot was created anew: changes before it were never decoded; "
                                      "recomputing every live doc");
            }
            engine_.recompute_all_live(reason);
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
            engine_.on_begin(*begin);
        } else if (const auto* relation = std::get_if<RelationRecord>(&record)) {
            engine_.on_relation(*relation);
        } else if (const auto* truncate = std::get_if<TruncateRecord>(&record)) {
            engine_.on_truncate(*truncate);
        } else if (const auto* message = std::get_if<MessageRecord>(&record)) {
            engine_.on_message(*message);
        } else if (const auto* commit = std::get_if<CommitRecord>(&record)) {
            if (engine_.on_commit(*commit, ticket)) reload_definitions();
        }
    }

private:
    // A transaction changed the definitions. The engine holds its ticket until the definitions are
    // loaded (and their recomputes done); the stream restarts only when the plugin must emit other
    // tables or columns. A redelivered definitions transaction finds nothing new and completes.
    void reload_definitions() {
        definitions_.wait_visible(xid_);
        auto defs = definitions_.fetch();
        std::string tables = plugin_tables(defs);
        log_info("definitions", "definitions changed in-stream: generation " + std::to_string(defs.generation));
        engine_.load_definitions(std::move(defs));
        if (tables != tables_) {
            log_info("definitions", "the watched tables changed: restarting the stream with tables '" + tables + "'");
            tables_ = tables;
            stream_->request_restart();
        }
    }

    Engine& engine_;
    DefinitionsSource& definitions_;
    Stream* stream_ = nullptr;
    const std::vector<std::string> warm_;
    std::string tables_;
    std::uint64_t sessions_ = 0;
    std::uint64_t xid_ = 0;  // of the transaction being decoded
};

status::WorkerState worker_state(StreamState state, bool draining, std::uint64_t sessions) {
    if (draining) return status::WorkerState::Draining;
    switch (state) {
        case StreamState::Streaming:
        case StreamState::Paused: return status::WorkerState::Streaming;
        case StreamState::Connecting:
        case StreamState::Backoff:
            return sessions > 0 ? status::WorkerState::Reconnecting : status::WorkerState::Starting;
        case StreamState::Stopped:
        case StreamState::Failed: return status::WorkerState::Stopped;
        case StreamState::Idle: break;
    }
    return status::WorkerState::Starting;
}

// What the status thread remembers between snapshots: when the acknowledged position last moved,
// and when each error was first seen.
struct StatusHistory {
    Lsn lsn = 0;
    status::WallTime at{};
    // When errors were first seen (to the status interval): the stream's last error, each query's
    // failure count, and the most recent error of any kind, which docsync.status shows.
    std::string stream_error;
    std::map<std::string, std::pair<std::uint64_t, status::WallTime>> query_errors;
    std::uint64_t transient_failures = 0;  // the engine's count when its last retried failure was seen
    std::string last_error;
    status::WallTime last_error_at{};
};

// The engine's recompute progress on the wall clock (the engine's times are on `clock`).
status::RecomputeStatus recompute_status(const RecomputeProgress& p, const Clock& clock) {
    status::RecomputeStatus r;
    r.reason = static_cast<std::uint32_t>(p.reason);
    if (p.reason == RecomputeReason::None) return r;
    r.id = p.id;
    r.total = p.total;
    r.done = p.done;
    auto wall_now = std::chrono::system_clock::now();
    auto steady_now = clock.now().time_since_epoch();
    auto wall = [&](std::int64_t ns) {
        return wall_now - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              steady_now - std::chrono::nanoseconds(ns));
    };
    r.started_at = wall(p.started_ns);
    if (p.finished_ns) r.finished_at = wall(p.finished_ns);
    return r;
}

status::StatusSnapshot snapshot(const Stream& stream, const DeliveryProgressCoordinator& coordinator,
                                const Engine& engine, const Clock& clock, bool draining, const std::string& fatal,
                                const std::string& waiting, StatusHistory& history) {
    auto s = stream.stats();
    if (s.sent_flush_lsn != history.lsn) {
        history.lsn = s.sent_flush_lsn;
        history.at = std::chrono::system_clock::now();
    }
    auto c = coordinator.stats();
    auto e = engine.stats();
    status::StatusSnapshot snap;
    snap.state = fatal.empty() ? worker_state(s.state, draining, s.sessions) : status::WorkerState::Stopped;
    snap.generation = s.generation;
    snap.received_lsn = s.received_lsn;
    snap.acked_lsn = s.sent_flush_lsn;
    snap.acked_at = history.at;
    snap.open_txns = c.pending_groups;
    snap.dirty_depth = e.dirty_depth();
    snap.in_flight = e.in_flight;
    snap.live_docs = e.live_docs;
    snap.total_changes = e.changes;
    snap.total_recomputes = e.computes;
    snap.total_publishes = e.published;
    snap.total_permanent_failures = e.permanent_failures;
    snap.total_transient_retries = e.transient_failures + s.reconnects;
    snap.total_valve_resets = s.valve_fired;
    snap.total_not_visible_retries = e.not_visible;
    snap.recompute = recompute_status(e.recompute, clock);
    auto now = std::chrono::system_clock::now();
    auto note_error = [&](const std::string& message) {
        history.last_error = message;
        history.last_error_at = now;
    };
    if (s.last_error != history.stream_error) {
        history.stream_error = s.last_error;
        if (!s.last_error.empty()) note_error(s.last_error);
    }
    for (const auto& q : e.queries) {
        status::QueryCounters counters;
        counters.name = q.name;
        counters.recomputes = q.computes;
        counters.failures = q.errors;
        counters.compute_us_total = q.compute_ns / 1000;
        if (!q.last_error.empty())
            counters.last_error = q.last_error + (q.last_sqlstate.empty() ? "" : " (SQLSTATE " + q.last_sqlstate + ")") +
                                  (q.last_channel.empty() ? "" : " (" + q.last_channel + ")");
        auto& [seen, at] = history.query_errors[q.name];
        if (q.errors != seen) {
            seen = q.errors;
            at = now;
            // A permanent failure of a doc query is the last error of the worker too.
            if (!counters.last_error.empty()) note_error(counters.last_error);
        }
        counters.last_error_at = at;
        snap.queries.push_back(std::move(counters));
    }
    // A retried failure (a sink outage, a lost pool connection) is the worker's last error too: it
    // holds the slot until it clears.
    if (e.transient_failures != history.transient_failures) {
        history.transient_failures = e.transient_failures;
        if (!e.last_transient_error.empty()) note_error(e.last_transient_error);
    }
    if (!waiting.empty()) note_error(waiting);  // fresh at every snapshot while it lasts
    if (!fatal.empty() && history.last_error != fatal) note_error(fatal);
    snap.last_error = history.last_error;
    snap.last_error_at = history.last_error_at;
    return snap;
}

int run(const Settings& settings) {
    // Signals go to the signal thread only: block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGUSR1);  // internal: ends the signal thread
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    DefinitionsSource definitions(settings.dsn);
    DatabaseIdentity identity = definitions.identity();
    definitions.check_role(settings.allow_unsafe_pool);
    status::StatusBoard board(settings.status_dir, identity.database, settings.slot);

    auto sink = publish::parse_sink(settings.sink);
    auto publisher = publish::make_publisher(sink);

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
    Engine engine(executor, *publisher, clock, engine_options,
                  [&coordinator](std::uint64_t ticket) { coordinator.complete(ticket); });
    auto defs = definitions.fetch();
    check_warm(settings.warm, defs);
    engine.load_definitions(std::move(defs));

    Pipeline pipeline(engine, definitions, settings.warm);
    StreamOptions stream_options;
    stream_options.dsn = settings.dsn;
    stream_options.slot = settings.slot;
    stream_options.create_slot = settings.create_slot;
    stream_options.tables = [&pipeline] { return pipeline.session_tables(); };
    stream_options.generation_floor = [&publisher] { return publisher->max_generation(); };
    stream_options.status_interval = settings.status_interval;
    stream_options.max_pending_txns = settings.max_pending_txns;
    stream_options.max_pending_bytes = settings.max_pending_bytes;
    stream_options.max_retained_wal = settings.max_retained_wal;
    Stream stream(stream_options, coordinator, pipeline);
    pipeline.set_stream(&stream);

    // Redis clients ask for docs on docsync:warm and docsync:touch in both live modes; with --live
    // subscribers the subscriber set also decides which docs are live. With --live all every doc the
    // engine knows is live, so a touch computes only a doc it did not know, and a warm always computes.
    std::unique_ptr<publish::RedisLiveness> liveness;
    if (settings.live == LiveMode::Subscribers || sink.kind == publish::SinkSpec::Kind::Redis) {
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
    if (liveness) liveness->start();
    // A sink with no docs to keep current publishes nothing until a watched row changes: say so once.
    if (settings.live == LiveMode::All && settings.warm.empty() && engine.stats().live_docs == 0)
        log_info("engine", std::string(sink.kind == publish::SinkSpec::Kind::Stdout
                                           ? "stdout holds no docs the worker could keep current"
                                           : "the sink holds no docs yet") +
                               ": a doc is published when a row it watches changes, or at start when --warm names it" +
                               (sink.kind == publish::SinkSpec::Kind::Redis ? " (or when a client asks on docsync:warm)"
                                                                            : ""));

    std::mutex mutex;
    std::condition_variable wake;
    bool stream_done = false;
    bool draining = false;
    std::string fatal;
    StatusHistory history;

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

    // The sink watch: every second, whether the sink lost docs it had acknowledged (a Redis restart
    // or FLUSHALL, a truncated or replaced file); then every live doc is recomputed.
    std::thread sink_thread([&] {
        std::unique_lock lock(mutex);
        while (!stream_done && !draining) {
            lock.unlock();
            try {
                if (auto lost = publisher->lost_docs()) {
                    log_warning("publish", *lost + ": recomputing every live doc");
                    engine.recompute_all_live(RecomputeReason::SinkReset);
                }
            } catch (const std::exception&) {
                // the sink is down: its outage shows where docs are published; asked again next time
            }
            auto gone = publisher->fatal();
            lock.lock();
            if (gone) {
                log_error("publish", *gone);
                if (fatal.empty()) fatal = *gone;
                draining = true;
                wake.notify_all();
                break;
            }
            wake.wait_for(lock, 1s, [&] { return stream_done || draining; });
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
            board.publish(snapshot(stream, coordinator, engine, clock, false, {}, definitions.waiting(), history));
            lock.lock();
            wake.wait_for(lock, 500ms, [&] { return stream_done || draining; });
        }
    }

    if (liveness) liveness->stop();
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
            board.publish(snapshot(stream, coordinator, engine, clock, true, {}, definitions.waiting(), history));
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
    board.publish(snapshot(stream, coordinator, engine, clock, false, error, {}, history));
    if (!error.empty()) {
        log_error("worker", error);
        return 1;
    }
    log_info("worker", "stopped cleanly at " + format_lsn(stream.stats().sent_flush_lsn));
    return 0;
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
        return docsync::run(parsed.settings);
    } catch (const std::exception& e) {
        docsync::log_error("worker", e.what());
        return 1;
    }
}
