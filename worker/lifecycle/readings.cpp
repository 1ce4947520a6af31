// The status thread's readings of the worker's components.
#include "lifecycle/readings.hpp"

namespace docsync::lifecycle {

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
                             .error_cleared = q.last_error_cleared,
                             .batch_set_aside = std::move(q.batch_set_aside)});
    r.batch_size = std::move(e.batch_size);
    r.refused_channels = e.refused_channels;
    r.batched_forms_set_aside = e.batched_forms_set_aside;
    r.commit_publish_seconds = latency.histogram();
    return r;
}

}  // namespace docsync::lifecycle
