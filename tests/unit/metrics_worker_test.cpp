// The worker's metric families from one status tick: the totals as the status file has them, the
// per-query series for the defined queries only, the lag gauges and the state.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "metrics/worker_metrics.hpp"

using namespace docsync;
using namespace std::chrono_literals;

namespace {

bool has_line(const std::string& text, const std::string& line) { return text.find("\n" + line + "\n") != std::string::npos; }

}  // namespace

TEST_CASE("the metrics show the status file's totals, per-query series, lag and state of one tick") {
    status::Readings r;
    r.phase = status::StreamPhase::Streaming;
    r.reconnects = 2;
    r.received_lsn = 5000;
    r.acked_lsn = 4000;
    r.retained_wal = 123456;
    r.dirty_depth = 7;
    r.live_docs = 40;
    r.totals = {.changes = 10, .recomputes = 9, .publishes = 8, .permanent_failures = 1, .transient_retries = 3,
                .valve_resets = 0, .not_visible_retries = 4, .audit_samples = 300, .audit_divergences = 2};
    status::QueryReading q;
    q.name = "order \"x\"";
    q.recomputes = 9;
    q.publishes = 8;
    q.compute_ns = 1500000000;
    q.compute_seconds.observe(0.002);
    r.queries.push_back(q);
    r.batch_size.observe(3);
    r.refused_channels = 6;
    r.batched_forms_set_aside = 1;
    status::StatusHistory history;
    auto t0 = status::WallTime{} + 1000h;
    history.snapshot(r, t0);  // the acknowledged position is first seen at t0
    auto snap = history.snapshot(r, t0 + 5s);
    std::string text = metrics::render(r, snap, t0 + 5s);

    CHECK(has_line(text, "docsync_changes_total 10"));
    CHECK(has_line(text, "docsync_transient_retries_total 5"));  // the stream's reconnects counted, as in the file
    CHECK(has_line(text, "docsync_not_visible_retries_total 4"));
    CHECK(has_line(text, "docsync_audit_samples_total 300"));
    CHECK(has_line(text, "docsync_audit_divergences_total 2"));
    CHECK(has_line(text, "docsync_query_publishes_total{query=\"order \\\"x\\\"\"} 8"));
    CHECK(has_line(text, "docsync_query_compute_seconds_total{query=\"order \\\"x\\\"\"} 1.5"));
    CHECK(has_line(text, "docsync_compute_duration_seconds_count{query=\"order \\\"x\\\"\"} 1"));
    CHECK(has_line(text, "docsync_batch_size_sum 3"));
    CHECK(has_line(text, "docsync_refused_channels_total 6"));
    CHECK(has_line(text, "docsync_batched_forms_set_aside 1"));
    CHECK(has_line(text, "docsync_ack_lag_bytes 1000"));
    CHECK(has_line(text, "docsync_ack_lag_seconds 5"));
    CHECK(has_line(text, "docsync_retained_wal_bytes 123456"));
    CHECK(has_line(text, "docsync_dirty_docs 7"));
    CHECK(has_line(text, "docsync_streaming 1"));
    CHECK(has_line(text, "docsync_state{state=\"streaming\"} 1"));
    CHECK(has_line(text, "docsync_state{state=\"stopped\"} 0"));

    // All acknowledged: no lag, whatever the time since the position last moved.
    r.acked_lsn = 5000;
    r.fatal = "gone";
    snap = history.snapshot(r, t0 + 60s);
    text = metrics::render(r, snap, t0 + 60s);
    CHECK(has_line(text, "docsync_ack_lag_bytes 0"));
    CHECK(has_line(text, "docsync_ack_lag_seconds 0"));
    CHECK(has_line(text, "docsync_streaming 0"));
    CHECK(has_line(text, "docsync_state{state=\"stopped\"} 1"));
}

TEST_CASE("the patch families appear with --patches on, from the cache's counters, and not without") {
    status::Readings r;
    status::StatusHistory history;
    auto t0 = status::WallTime{} + 1000h;
    auto snap = history.snapshot(r, t0);
    std::string text = metrics::render(r, snap, t0);
    CHECK(text.find("docsync_patches_total") == std::string::npos);
    r.patches = status::PatchReading{.patches = 12, .whole_no_base = 3, .whole_not_smaller = 2, .bytes_saved = 480000,
                                     .cache_bytes = 70000, .cache_entries = 4};
    text = metrics::render(r, snap, t0);
    CHECK(has_line(text, "docsync_patches_total 12"));
    CHECK(has_line(text, "docsync_patch_whole_total{reason=\"no_base\"} 3"));
    CHECK(has_line(text, "docsync_patch_whole_total{reason=\"not_smaller\"} 2"));
    CHECK(has_line(text, "docsync_patch_bytes_saved_total 480000"));
    CHECK(has_line(text, "docsync_patch_cache_bytes 70000"));
    CHECK(has_line(text, "docsync_patch_cache_entries 4"));
    CHECK(text.find("# TYPE docsync_patch_whole_total counter") != std::string::npos);
}
