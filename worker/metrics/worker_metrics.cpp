// The worker's Prometheus families, from the readings and snapshot of one status tick.
#include "metrics/worker_metrics.hpp"

#include <algorithm>
#include <chrono>

#include "metrics/exposition.hpp"

namespace docsync::metrics {

namespace {

constexpr const char* kStandbyName = "docsync_standby";
constexpr const char* kStandbyHelp = "1 while the worker waits as a hot spare (--standby), 0 while it is the active one.";

}  // namespace

std::string render(const status::Readings& readings, const status::StatusSnapshot& snap, status::WallTime now) {
    Exposition out;
    auto count = [](std::uint64_t value) { return static_cast<double>(value); };

    // The totals, as docsync.status names them (transient_retries includes the stream's reconnects).
    const status::Totals& t = snap.totals;
    out.counter("docsync_changes_total", "Row changes handled since the worker started.", {}, count(t.changes));
    out.counter("docsync_recomputes_total", "Doc computes finished, failed ones included.", {}, count(t.recomputes));
    out.counter("docsync_publishes_total", "Docs published to the sink.", {}, count(t.publishes));
    out.counter("docsync_permanent_failures_total", "Doc computes that failed for good (query error, timeout, size cap).",
                {}, count(t.permanent_failures));
    out.counter("docsync_transient_retries_total",
                "Computes, lookups, publishes and stream sessions retried after an infrastructure fault.", {},
                count(t.transient_retries));
    out.counter("docsync_valve_resets_total", "Slots dropped and recreated by the WAL safety valve.", {},
                count(t.valve_resets));
    out.counter("docsync_not_visible_retries_total", "Computes retried because a commit was not visible yet.", {},
                count(t.not_visible_retries));
    out.counter("docsync_audit_samples_total",
                "Live docs the continuous audit recomputed and compared with what the sink retains.", {},
                count(t.audit_samples));
    out.counter("docsync_audit_divergences_total",
                "Docs the continuous audit found the sink holding wrongly (each published again).", {},
                count(t.audit_divergences));

    // Per doc query: the queries of the current definitions only, so the label set stays bounded.
    for (const auto& q : readings.queries) {
        Labels query{{"query", q.name}};
        out.counter("docsync_query_recomputes_total", "Doc computes finished per doc query.", query, count(q.recomputes));
        out.counter("docsync_query_publishes_total", "Docs published per doc query.", query, count(q.publishes));
        out.counter("docsync_query_permanent_failures_total", "Doc computes that failed for good per doc query.", query,
                    count(q.permanent_failures));
        out.counter("docsync_query_compute_seconds_total", "Time spent computing docs per doc query.", query,
                    static_cast<double>(q.compute_ns) / 1e9);
    }
    for (const auto& q : readings.queries)
        out.histogram("docsync_compute_duration_seconds",
                      "Time one doc's compute took per doc query (a batched doc counts its share of the statement).",
                      {{"query", q.name}}, q.compute_seconds);
    out.histogram("docsync_batch_size", "Docs computed by one doc-query statement (at most --batch).", {},
                  readings.batch_size);
    out.gauge("docsync_batched_forms_set_aside",
              "Batched forms that failed where their docs alone ran: those queries are computed one statement per doc.",
              {}, count(readings.batched_forms_set_aside));
    out.counter("docsync_refused_channels_total",
                "Channels refused because a key was not spelled as PostgreSQL prints it, or not of its type.", {},
                count(readings.refused_channels));
    if (const auto& p = readings.patches) {
        out.counter("docsync_patches_total", "Docs published as a patch from the version published before (--patches on).",
                    {}, count(p->patches));
        out.counter("docsync_patch_whole_total",
                    "Docs of at least --patch-min-bytes published whole: no base (not cached, or the sink held another "
                    "version) or the patch not at most half the doc.",
                    {{"reason", "no_base"}}, count(p->whole_no_base));
        out.counter("docsync_patch_whole_total", "", {{"reason", "not_smaller"}}, count(p->whole_not_smaller));
        out.counter("docsync_patch_bytes_saved_total",
                    "Bytes of whole-doc envelopes not sent because their patch was sent instead.", {},
                    count(p->bytes_saved));
        out.gauge("docsync_patch_cache_bytes", "Memory held by the cache of last-published docs (at most --patch-memory).",
                  {}, count(p->cache_bytes));
        out.gauge("docsync_patch_cache_entries", "Docs the cache of last-published docs holds.", {},
                  count(p->cache_entries));
    }
    out.histogram("docsync_commit_publish_seconds",
                  "Seconds from a transaction's commit on the server until every doc it changed was published.", {},
                  readings.commit_publish_seconds);

    // Where the stream is. Ack lag as docsync.status computes it from the same file: the WAL received
    // but not acknowledged yet, and for how long the acknowledged position has held still behind it.
    bool behind = snap.received_lsn > snap.acked_lsn;
    out.gauge("docsync_ack_lag_bytes", "WAL received from the slot but not acknowledged yet.", {},
              count(behind ? snap.received_lsn - snap.acked_lsn : 0));
    double lag_seconds = 0;
    if (behind && snap.acked_at != status::WallTime{})
        lag_seconds = std::max(0.0, std::chrono::duration<double>(now - snap.acked_at).count());
    out.gauge("docsync_ack_lag_seconds", "Seconds the acknowledged position has held still behind what was received.",
              {}, lag_seconds);
    out.gauge("docsync_retained_wal_bytes",
              "The server's WAL past the slot's acknowledged position, at the WAL safety valve's last poll "
              "(the figure --max-retained-wal caps).",
              {}, count(readings.retained_wal));
    out.gauge("docsync_dirty_docs", "Docs and keys lookups waiting for a compute (the dirty depth).", {},
              count(snap.dirty_depth));
    out.gauge("docsync_computes_in_flight", "Doc computes running.", {}, count(snap.in_flight));
    out.gauge("docsync_open_transactions", "Decoded transactions not yet acknowledged.", {}, count(snap.open_txns));
    out.gauge("docsync_live_docs", "Docs the worker keeps current.", {}, count(snap.live_docs));
    out.gauge("docsync_recompute_done_docs", "Docs done in the last recompute of every live doc.", {},
              count(snap.recompute.done));
    out.gauge("docsync_recompute_total_docs", "Docs in the last recompute of every live doc.", {},
              count(snap.recompute.total));
    out.gauge("docsync_streaming", "1 while the worker streams the slot, else 0.", {},
              snap.state == status::WorkerState::Streaming ? 1 : 0);
    out.gauge(kStandbyName, kStandbyHelp, {}, 0);
    // The state docsync.status shows, one series per state, the current one 1.
    for (auto state : {status::WorkerState::Starting, status::WorkerState::Connecting, status::WorkerState::Streaming,
                       status::WorkerState::Reconnecting,
                       status::WorkerState::Draining, status::WorkerState::ValveReset, status::WorkerState::Stopped})
        out.gauge("docsync_state", "The worker's state as docsync.status shows it: 1 for the current one.",
                  {{"state", std::string(status::state_name(state))}}, snap.state == state ? 1 : 0);
    return out.text();
}

std::string render_standby(status::WallTime since, status::WallTime now) {
    Exposition out;
    out.gauge(kStandbyName, kStandbyHelp, {}, 1);
    out.gauge("docsync_standby_waiting_seconds", "Seconds the hot spare has been waiting for the slot's lease.", {},
              std::chrono::duration<double>(now - since).count());
    return out.text();
}

}  // namespace docsync::metrics
