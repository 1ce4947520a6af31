// The status snapshot made from the components' readings: the worker's state, when the acknowledged
// position last moved, the most recent error of any kind and when it was first seen, and the
// recompute's times on the wall clock.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "status/snapshot.hpp"

using namespace docsync;
using namespace docsync::status;
using namespace std::chrono_literals;

namespace {

// A wall-clock moment `s` seconds after an arbitrary origin.
WallTime at(int s) { return WallTime{} + std::chrono::hours(24 * 365 * 50) + std::chrono::seconds(s); }

Readings streaming() {
    Readings r;
    r.phase = StreamPhase::Streaming;
    r.sessions = 1;
    return r;
}

QueryReading query(std::string name, std::uint64_t permanent_failures, std::string error = {}, std::string sqlstate = {},
                   std::string channel = {}) {
    QueryReading q;
    q.name = std::move(name);
    q.permanent_failures = permanent_failures;
    q.last_error = std::move(error);
    q.last_sqlstate = std::move(sqlstate);
    q.last_channel = std::move(channel);
    return q;
}

}  // namespace

TEST_CASE("the worker's state: an ending error, then a drain, then the stream's phase") {
    Readings r;
    CHECK(worker_state(r) == WorkerState::Starting);  // idle
    r.phase = StreamPhase::Connecting;
    CHECK(worker_state(r) == WorkerState::Connecting);  // the first connection
    r.sessions = 1;
    CHECK(worker_state(r) == WorkerState::Connecting);  // its session started: creating the slot, streaming soon
    r.reconnects = 1;
    CHECK(worker_state(r) == WorkerState::Reconnecting);  // a session ended before
    r.phase = StreamPhase::Streaming;
    CHECK(worker_state(r) == WorkerState::Streaming);
    r.phase = StreamPhase::Ended;
    CHECK(worker_state(r) == WorkerState::Stopped);
    r.phase = StreamPhase::Streaming;
    r.draining = true;
    CHECK(worker_state(r) == WorkerState::Draining);
    r.fatal = "the slot was dropped";
    CHECK(worker_state(r) == WorkerState::Stopped);
    r.draining = false;
    CHECK(worker_state(r) == WorkerState::Stopped);
}

TEST_CASE("a doc query's failure whose doc was published since is shown as recovered, keeping its time") {
    StatusHistory history;
    auto t0 = WallTime{} + std::chrono::hours(1000);
    Readings r;
    r.queries.push_back(query("order", 1, "permission denied for table orders", "42501", "db:order:1"));
    auto snap = history.snapshot(r, t0);
    CHECK(snap.last_error == "permission denied for table orders (SQLSTATE 42501) (db:order:1)");
    CHECK(snap.last_error_at == t0);
    r.queries[0].error_cleared = true;  // db:order:1 published since (grant_reader ran)
    snap = history.snapshot(r, t0 + std::chrono::seconds(8));
    CHECK(snap.last_error == "recovered: permission denied for table orders (SQLSTATE 42501) (db:order:1)");
    CHECK(snap.last_error_at == t0);
    CHECK(snap.queries[0].last_error.starts_with("recovered: "));
    // a new failure is an error again
    r.queries[0] = query("order", 2, "permission denied for table orders", "42501", "db:order:2");
    snap = history.snapshot(r, t0 + std::chrono::seconds(9));
    CHECK(snap.last_error == "permission denied for table orders (SQLSTATE 42501) (db:order:2)");
    CHECK(snap.last_error_at == t0 + std::chrono::seconds(9));
    // an error from elsewhere since is not cleared by the query's recovery
    r.stream_error = "replication connection lost";
    snap = history.snapshot(r, t0 + std::chrono::seconds(10));
    r.queries[0].error_cleared = true;
    snap = history.snapshot(r, t0 + std::chrono::seconds(11));
    CHECK(snap.last_error == "replication connection lost");
}

TEST_CASE("figures are copied, retries count stream reconnects, compute time is in microseconds") {
    StatusHistory history;
    Readings r = streaming();
    r.generation = 7;
    r.received_lsn = 0x2000;
    r.acked_lsn = 0x1000;
    r.open_txns = 3;
    r.dirty_depth = 4;
    r.in_flight = 2;
    r.live_docs = 100;
    r.totals.changes = 50;
    r.totals.recomputes = 40;
    r.totals.publishes = 38;
    r.totals.permanent_failures = 1;
    r.totals.transient_retries = 5;
    r.reconnects = 2;
    r.totals.valve_resets = 1;
    r.totals.not_visible_retries = 6;
    QueryReading q = query("order", 0);
    q.recomputes = 9;
    q.compute_ns = 2'500'999;
    q.batch_set_aside = "doc query \"order\": its batched form failed where each doc alone runs";
    r.queries = {q};
    auto snap = history.snapshot(r, at(0));
    CHECK(snap.state == WorkerState::Streaming);
    CHECK(snap.generation == 7);
    CHECK(snap.received_lsn == 0x2000);
    CHECK(snap.acked_lsn == 0x1000);
    CHECK(snap.open_txns == 3);
    CHECK(snap.dirty_depth == 4);
    CHECK(snap.in_flight == 2);
    CHECK(snap.live_docs == 100);
    CHECK(snap.totals.changes == 50);
    CHECK(snap.totals.recomputes == 40);
    CHECK(snap.totals.publishes == 38);
    CHECK(snap.totals.permanent_failures == 1);
    CHECK(snap.totals.transient_retries == 7);
    CHECK(snap.totals.valve_resets == 1);
    CHECK(snap.totals.not_visible_retries == 6);
    REQUIRE(snap.queries.size() == 1);
    CHECK(snap.queries[0].name == "order");
    CHECK(snap.queries[0].recomputes == 9);
    CHECK(snap.queries[0].permanent_failures == 0);
    CHECK(snap.queries[0].compute_us_total == 2500);
    CHECK(snap.queries[0].last_error.empty());
    CHECK(snap.queries[0].last_error_at == WallTime{});
    CHECK(snap.queries[0].batch_set_aside == q.batch_set_aside);  // not an error: docsync.queries shows it
    CHECK(snap.last_error.empty());
    CHECK(snap.last_error_at == WallTime{});
}

TEST_CASE("the acknowledged position's time is when it last moved") {
    StatusHistory history;
    Readings r = streaming();
    CHECK(history.snapshot(r, at(1)).acked_at == WallTime{});  // nothing acknowledged yet
    r.acked_lsn = 100;
    CHECK(history.snapshot(r, at(2)).acked_at == at(2));
    CHECK(history.snapshot(r, at(3)).acked_at == at(2));  // unchanged: still the time it moved
    r.acked_lsn = 200;
    CHECK(history.snapshot(r, at(4)).acked_at == at(4));
}

TEST_CASE("an error counts from the snapshot that first shows it") {
    StatusHistory history;
    Readings r = streaming();
    r.stream_error = "connection lost";
    auto snap = history.snapshot(r, at(10));
    CHECK(snap.last_error == "connection lost");
    CHECK(snap.last_error_at == at(10));
    snap = history.snapshot(r, at(11));
    CHECK(snap.last_error_at == at(10));

    // A doc query's new permanent failure is the worker's last error too, with its SQLSTATE and doc.
    r.queries = {query("order", 1, "division by zero", "22012", "db:order:42")};
    snap = history.snapshot(r, at(12));
    CHECK(snap.last_error == "division by zero (SQLSTATE 22012) (db:order:42)");
    CHECK(snap.last_error_at == at(12));
    REQUIRE(snap.queries.size() == 1);
    CHECK(snap.queries[0].last_error == "division by zero (SQLSTATE 22012) (db:order:42)");
    CHECK(snap.queries[0].last_error_at == at(12));
    // The same count later changes nothing.
    snap = history.snapshot(r, at(13));
    CHECK(snap.last_error_at == at(12));
    CHECK(snap.queries[0].last_error_at == at(12));

    // The stream's error cleared and came back: seen anew.
    r.stream_error.clear();
    CHECK(history.snapshot(r, at(14)).last_error == "division by zero (SQLSTATE 22012) (db:order:42)");
    r.stream_error = "connection lost";
    snap = history.snapshot(r, at(15));
    CHECK(snap.last_error == "connection lost");
    CHECK(snap.last_error_at == at(15));

    // A query error without a SQLSTATE or doc is shown as is.
    r.queries = {query("order", 2, "doc larger than --max-doc-bytes")};
    snap = history.snapshot(r, at(16));
    CHECK(snap.last_error == "doc larger than --max-doc-bytes");
    CHECK(snap.queries[0].last_error_at == at(16));
}

TEST_CASE("a retried failure is the last error when the engine's count of them moves") {
    StatusHistory history;
    Readings r = streaming();
    r.totals.transient_retries = 1;
    r.last_transient_error = "redis: connection refused";
    auto snap = history.snapshot(r, at(20));
    CHECK(snap.last_error == "redis: connection refused");
    CHECK(snap.last_error_at == at(20));
    CHECK(history.snapshot(r, at(21)).last_error_at == at(20));
    r.totals.transient_retries = 2;
    CHECK(history.snapshot(r, at(22)).last_error_at == at(22));
}

TEST_CASE("a wait is fresh at every snapshot, the ending error is noted once") {
    StatusHistory history;
    Readings r = streaming();
    r.waiting = "waiting 30 s for transaction 42";
    CHECK(history.snapshot(r, at(30)).last_error_at == at(30));
    auto snap = history.snapshot(r, at(31));
    CHECK(snap.last_error == "waiting 30 s for transaction 42");
    CHECK(snap.last_error_at == at(31));
    r.waiting.clear();
    CHECK(history.snapshot(r, at(32)).last_error_at == at(31));

    r.fatal = "the slot was dropped";
    snap = history.snapshot(r, at(33));
    CHECK(snap.state == WorkerState::Stopped);
    CHECK(snap.last_error == "the slot was dropped");
    CHECK(snap.last_error_at == at(33));
    CHECK(history.snapshot(r, at(34)).last_error_at == at(33));
}

TEST_CASE("a recompute's times move from the engine's clock to the wall clock") {
    RecomputeReading p;
    p.reason = DOCSYNC_RECOMPUTE_VALVE;
    p.id = 3;
    p.total = 1000;
    p.done = 400;
    p.now_ns = std::chrono::nanoseconds(10s).count();
    p.started_ns = std::chrono::nanoseconds(4s).count();
    auto r = recompute_status(p, at(100));
    CHECK(r.reason == DOCSYNC_RECOMPUTE_VALVE);
    CHECK(r.id == 3);
    CHECK(r.total == 1000);
    CHECK(r.done == 400);
    CHECK(r.started_at == at(94));
    CHECK(r.finished_at == WallTime{});  // still running
    p.finished_ns = std::chrono::nanoseconds(9500ms).count();
    CHECK(recompute_status(p, at(100)).finished_at == at(100) - 500ms);

    // None since start: nothing else is reported.
    p.reason = DOCSYNC_RECOMPUTE_NONE;
    r = recompute_status(p, at(100));
    CHECK(r.id == 0);
    CHECK(r.total == 0);
    CHECK(r.started_at == WallTime{});

    StatusHistory history;
    Readings readings = streaming();
    readings.recompute = p;
    readings.recompute.reason = DOCSYNC_RECOMPUTE_STARTUP;
    CHECK(history.snapshot(readings, at(100)).recompute.started_at == at(94));
}
