// The status snapshot: the worker's state, its most recent error and when it was first seen, and
// the recompute's times on the wall clock, from the figures the status thread reads.
#include "status/snapshot.hpp"

#include <chrono>

namespace docsync::status {

WorkerState worker_state(const Readings& r) {
    if (!r.fatal.empty()) return WorkerState::Stopped;
    if (r.draining) return WorkerState::Draining;
    switch (r.phase) {
        case StreamPhase::Streaming: return WorkerState::Streaming;
        // A session that ended before is what makes a connection a reconnection: the first one,
        // slot creation and startup recompute included, is "connecting".
        case StreamPhase::Connecting: return r.reconnects > 0 ? WorkerState::Reconnecting : WorkerState::Connecting;
        case StreamPhase::Ended: return WorkerState::Stopped;
        case StreamPhase::Idle: break;
    }
    return WorkerState::Starting;
}

RecomputeStatus recompute_status(const RecomputeReading& p, WallTime now) {
    RecomputeStatus r;
    r.reason = p.reason;
    if (p.reason == DOCSYNC_RECOMPUTE_NONE) return r;
    r.id = p.id;
    r.total = p.total;
    r.done = p.done;
    r.gap = p.gap;
    // A time on the engine's clock is as long before the wall clock's `now` as it was before the
    // engine clock's now_ns.
    auto wall = [&](std::int64_t ns) {
        return now - std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(p.now_ns - ns));
    };
    r.started_at = wall(p.started_ns);
    if (p.finished_ns) r.finished_at = wall(p.finished_ns);
    return r;
}

StatusSnapshot StatusHistory::snapshot(const Readings& r, WallTime now) {
    if (r.acked_lsn != lsn_) {
        lsn_ = r.acked_lsn;
        lsn_at_ = now;
    }
    StatusSnapshot snap;
    snap.state = worker_state(r);
    snap.generation = r.generation;
    snap.sink_unchecked = r.sink_unchecked;
    snap.received_lsn = r.received_lsn;
    snap.acked_lsn = r.acked_lsn;
    snap.acked_at = lsn_at_;
    snap.open_txns = r.open_txns;
    snap.dirty_depth = r.dirty_depth;
    snap.in_flight = r.in_flight;
    snap.live_docs = r.live_docs;
    snap.totals = r.totals;
    snap.totals.transient_retries += r.reconnects;
    snap.recompute = recompute_status(r.recompute, now);
    auto note_error = [&](const std::string& message) {
        last_error_ = message;
        last_error_at_ = now;
        last_error_query_.clear();
    };
    if (r.stream_error != stream_error_) {
        stream_error_ = r.stream_error;
        if (!r.stream_error.empty()) note_error(r.stream_error);
    }
    for (const auto& q : r.queries) {
        QueryCounters counters;
        counters.name = q.name;
        counters.recomputes = q.recomputes;
        counters.permanent_failures = q.permanent_failures;
        counters.compute_us_total = q.compute_ns / 1000;
        counters.batch_set_aside = q.batch_set_aside;
        if (!q.last_error.empty())
            counters.last_error = (q.error_cleared ? std::string(kRecoveredPrefix) : std::string()) + q.last_error +
                                  (q.last_sqlstate.empty() ? "" : " (SQLSTATE " + q.last_sqlstate + ")") +
                                  (q.last_channel.empty() ? "" : " (" + q.last_channel + ")");
        auto& [seen, at] = query_errors_[q.name];
        if (q.permanent_failures != seen) {
            seen = q.permanent_failures;
            at = now;
            // A permanent failure of a doc query is the last error of the worker too.
            if (!counters.last_error.empty()) {
                note_error(counters.last_error);
                last_error_query_ = q.name;
            }
        } else if (q.error_cleared && last_error_query_ == q.name && !last_error_.starts_with(kRecoveredPrefix)) {
            // The doc that failed has been published since: the worker's last error is resolved,
            // and keeps its time.
            last_error_ = counters.last_error;
        }
        counters.last_error_at = at;
        snap.queries.push_back(std::move(counters));
    }
    // A retried failure (a sink outage, a lost pool connection) is the worker's last error too: it
    // holds the slot until it clears.
    if (r.totals.transient_retries != transient_retries_) {
        transient_retries_ = r.totals.transient_retries;
        if (!r.last_transient_error.empty()) note_error(r.last_transient_error);
    }
    if (!r.waiting.empty()) note_error(r.waiting);  // fresh at every snapshot while it lasts
    if (!r.fatal.empty() && last_error_ != r.fatal) note_error(r.fatal);
    snap.last_error = last_error_;
    snap.last_error_at = last_error_at_;
    return snap;
}

}  // namespace docsync::status
