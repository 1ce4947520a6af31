// The active worker's run: its components wired and its threads, from start to drain.
#include "lifecycle/run.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <unistd.h>

#include "audit/auditor.hpp"
#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "config/warm.hpp"
#include "engine/engine.hpp"
#include "executor/definitions_source.hpp"
#include "executor/executor.hpp"
#include "executor/settings_watch.hpp"
#include "executor/sink_record.hpp"
#include "lifecycle/pipeline.hpp"
#include "lifecycle/readings.hpp"
#include "lifecycle/start.hpp"
#include "lifecycle/status_table.hpp"
#include "metrics/worker_metrics.hpp"
#include "progress/commit_latency.hpp"
#include "progress/coordinator.hpp"
#include "replication/pgoutput_publication.hpp"
#include "publish/sink.hpp"
#include "publish/watermark.hpp"
#include "replication/lease_watch.hpp"
#include "replication/stream.hpp"
#include "status/sink_start_watch.hpp"
#include "status/snapshot.hpp"
#include "status/status_board.hpp"

namespace docsync::lifecycle {

using namespace std::chrono_literals;

namespace {

// The record of what a retaining sink should hold (executor/sink_record.hpp), or nullptr: a sink
// that keeps nothing (stdout), or an extension installed without the record's functions.
std::unique_ptr<SinkRecord> open_sink_record(const Settings& settings, const publish::SinkSpec& sink,
                                             Publisher& publisher) {
    if (!publisher.retains()) return nullptr;
    auto record = std::make_unique<SinkRecord>(settings.dsn, settings.slot, sink.display());
    auto problem = record->unusable();
    if (!problem) return record;
    log_warning("publish", "a sink that loses docs while no worker runs is not noticed, nor a doc never published "
                           "kept across the WAL safety valve: " + *problem);
    return nullptr;
}

}  // namespace

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
    // A portable install cannot read the status file: the worker reports in its tables too.
    std::optional<StatusTable> status_table;
    const bool portable = portable_install(settings.dsn);
    if (portable) {
        log_info("status", "a portable install: reporting in docsync.worker_status");
        status_table.emplace(settings.dsn, settings.slot, static_cast<std::int32_t>(getpid()),
                             std::chrono::system_clock::now());
    }
    // A start that fails before its slot exists (no --create-slot, a refused pool role, …) leaves no
    // status file of its own behind: docsync.status would show it as a stale row until forget_slot.
    auto withdraw_if_no_slot = [&] {
        if (!board->created() && !status_table) return;
        if (definitions.slot_exists(settings.slot)) return;
        if (board->created()) board->withdraw();
        if (status_table) status_table->withdraw();
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
    // --patches on: the last published text of each doc, which the sink makes patches from.
    std::shared_ptr<publish::Patcher> patcher;
    if (settings.patches)
        patcher = std::make_shared<publish::Patcher>(
            publish::PatcherOptions{settings.patch_memory, settings.patch_min_bytes});
    auto publisher = open_sink(settings, sink, identity.database, patcher);
    // Until the stream runs, a watch of its own says in the status file what the sink holds.
    std::optional<status::SinkStartWatch> start_watch(std::in_place, *publisher, *board);

    ExecutorOptions executor_options;
    executor_options.pool_dsn = settings.pool_dsn;
    executor_options.pool_size = settings.pool;
    executor_options.statement_timeout = settings.statement_timeout;
    executor_options.max_doc_bytes = settings.max_doc_bytes;
    executor_options.allow_unsafe_pool = settings.allow_unsafe_pool;
    executor_options.check_reader = portable;  // its compute_as cannot hold the role (docs/portable.md)
    executor_options.lend_reader = portable;   // its compute_as lends the reader role for the compute
    Executor executor(executor_options);
    // The pool must see the rows the slot decodes: the same database, on the same server or a standby
    // of it (which shares its system identifier).
    if (executor.database() != identity.database || executor.system_identifier() != identity.system_identifier)
        throw Error("--pool-dsn reaches database \"" + executor.database() + "\" of the server with system identifier " +
                    executor.system_identifier() + ", but --dsn reaches database \"" + identity.database +
                    "\" of the server with system identifier " + identity.system_identifier +
                    ": the doc queries must run on the database the slot decodes; point --pool-dsn at dbname=" +
                    identity.database + " on that server or on a hot standby of it");

    // What the sink should hold, recorded in PostgreSQL (docs/design.md, "sink checks"): a sink
    // that lost docs while no worker ran is found here, and with --live all the live journal
    // joins what the sink holds in the live set.
    auto sink_record = open_sink_record(settings, sink, *publisher);
    std::optional<std::string> sink_lost = sink_record ? sink_record->check(publisher->max_version()) : std::nullopt;
    if (sink_lost)
        log_error("publish", *sink_lost + ": recomputing every live doc (the journal's and the sink's); "
                             "docsync.wait_published and docsync:watermark hold until it ends");

    SteadyClock clock;
    DeliveryProgressCoordinator coordinator;
    EngineOptions engine_options;
    engine_options.live_all = settings.live == LiveMode::All;
    if (sink_record && engine_options.live_all) engine_options.journal = sink_record.get();
    engine_options.max_keys = settings.max_keys;
    engine_options.key_check_rate = static_cast<std::size_t>(settings.key_check_rate);
    engine_options.batch = settings.batch;
    // The recompute a lost sink or an inherited gap asks for below is computed from the first
    // session on (Pipeline::on_session releases the computes), at its generation, once: the
    // session's own recompute of every live doc would compute again whatever was computed before it.
    engine_options.hold_computes = true;
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
    stream_options.plugin = settings.plugin;
    stream_options.pgoutput_streaming = settings.pgoutput_streaming;
    stream_options.stream_memory = static_cast<std::size_t>(settings.stream_memory);
    stream_options.tables = [&pipeline] { return pipeline.session_tables(); };
    stream_options.sink_high_water = [&publisher] { return publisher->max_version(); };
    stream_options.status_interval = settings.status_interval;
    stream_options.max_pending_txns = settings.max_pending_txns;
    stream_options.max_pending_bytes = settings.max_pending_bytes;
    stream_options.max_retained_wal = settings.max_retained_wal;
    Stream stream(stream_options, coordinator, pipeline);
    pipeline.set_stream(&stream);
    pipeline.set_catalog_check(settings.catalog_check);
    pipeline.set_publication(publication_name(settings.slot));
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
    if (sink_lost) engine.recompute_all_live(RecomputeReason::SinkReset, true);
    if (sink_record) sink_record->start([&publisher] { return publisher->max_version(); });
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
        if (patcher) {
            auto c = patcher->counters();
            readings.patches = status::PatchReading{c.patches, c.whole_no_base, c.whole_not_smaller, c.bytes_saved,
                                                    c.cache_bytes, c.cache_entries};
        }
        readings.draining = draining_now;
        readings.fatal = error;
        readings.waiting = waiting;
        auto now = std::chrono::system_clock::now();
        status::StatusSnapshot snapshot = history.snapshot(readings, now);
        if (metrics_server) metrics_server->publish(metrics::render(readings, snapshot, now));
        board->publish(snapshot);
        if (status_table) status_table->publish(snapshot, draining_now || !error.empty());
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

    // The settings watch: every second, whether a setting doc queries follow from the server changed
    // (ALTER DATABASE or ALTER ROLE … SET, a reloaded configuration; executor/settings_watch.hpp). No
    // event trigger fires for those: the pool's sessions are renewed and every live doc recomputed.
    std::thread settings_thread([&] {
        SettingsWatch watch(settings.pool_dsn, settings.statement_timeout + 5s);
        std::unique_lock lock(mutex);
        while (!stream_done && !draining) {
            lock.unlock();
            try {
                if (auto what = watch.changed()) {
                    executor.renew_sessions();
                    log_warning("executor", *what + ": renewing the pool's sessions and recomputing every live doc");
                    engine.recompute_all_live(RecomputeReason::Settings, true);
                    publish_status_now();
                }
            } catch (const std::exception&) {
                // the server is unreachable: the pool reports it; asked again next second
            }
            lock.lock();
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
    if (sink_record) sink_record->stop();  // what the last computes named is written
    settings_thread.join();
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

}  // namespace docsync::lifecycle
