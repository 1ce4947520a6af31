// docsync-worker: wiring only. Parses the settings, builds the components and connects them:
//
//   Stream (stream thread) ──records──▶ Engine.on_* ──tickets──▶ Coordinator ──ack──▶ Stream
//   Engine worker threads ──▶ Executor (Runner) ──▶ Publisher (sink)
//   status thread: Stream/Coordinator/Engine stats ──▶ StatusBoard (and the /metrics body)
//   signal thread: SIGTERM/SIGINT drain and stop, SIGHUP reopens the log file
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

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
#include "progress/coordinator.hpp"
#include "publish/sink.hpp"
#include "replication/stream.hpp"
#include "status/status_board.hpp"
#include "status/snapshot.hpp"

extern char** environ;

namespace docsync {
namespace {

using namespace std::chrono_literals;

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
                             const Engine& engine, const Clock& clock) {
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
                   .now_ns = std::chrono::nanoseconds(clock.now().time_since_epoch()).count()};
    for (auto& q : e.queries)
        r.queries.push_back({.name = std::move(q.name),
                             .recomputes = q.recomputes,
                             .permanent_failures = q.permanent_failures,
                             .compute_ns = q.compute_ns,
                             .publishes = q.publishes,
                             .compute_seconds = std::move(q.compute_seconds),
                             .last_error = std::move(q.last_error),
                             .last_sqlstate = std::move(q.last_sqlstate),
                             .last_channel = std::move(q.last_channel)});
    r.batch_size = std::move(e.batch_size);
    return r;
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

    // Listening first: a port in use fails the start before anything connects.
    std::unique_ptr<metrics::Server> metrics_server;
    if (!settings.metrics_address.empty())
        metrics_server = std::make_unique<metrics::Server>(settings.metrics_address, settings.metrics_port);

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
    engine_options.batch = settings.batch;
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
    // The board's snapshot of what the components report and of the worker's own condition.
    status::StatusHistory history;
    auto publish_status = [&](bool draining_now, const std::string& error, const std::string& waiting) {
        status::Readings readings = read_status(stream, coordinator, engine, clock);
        readings.draining = draining_now;
        readings.fatal = error;
        readings.waiting = waiting;
        auto now = std::chrono::system_clock::now();
        status::StatusSnapshot snapshot = history.snapshot(readings, now);
        if (metrics_server) metrics_server->publish(metrics::render(readings, snapshot, now));
        board.publish(snapshot);
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
            publish_status(false, {}, definitions.waiting());
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
