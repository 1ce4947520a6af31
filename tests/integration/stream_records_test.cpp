// The stream with the plugin emitting records for a watched table: acknowledgements held by an
// incomplete transaction, backpressure, redelivery after a reconnect or a crash, and the safety valve
// firing mid-stream. Each case first checks that the installed plugin emits records.
#include <doctest/doctest.h>

#include <set>

#include "stream_harness.hpp"

using namespace docsync;
using namespace docsync::testing;

namespace {

std::string watched_table(pg::Connection& c, const std::string& name) {
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE TABLE IF NOT EXISTS " + name + "(id int PRIMARY KEY, v text)");
    return exec1(c, "SELECT '" + name + "'::regclass::oid::text");
}

void unwatched_wal(pg::Connection& c, std::size_t bytes) {
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE TABLE IF NOT EXISTS stream_busy(id bigserial PRIMARY KEY, pad text)");
    for (std::size_t done = 0; done < bytes; done += 500 * 1100)
        exec1(c, "INSERT INTO stream_busy(pad) SELECT repeat('x', 1000) FROM generate_series(1, 500)");
}

// Drops the slot and empties the watched table (creating it); returns the table's OID. For tests
// that restart the server and so keep no connection across.
std::string fresh_watch(const std::string& slot, const std::string& table) {
    auto c = sql();
    drop_slot(c, slot);
    std::string oid = watched_table(c, table);
    exec1(c, "TRUNCATE " + table);
    return oid;
}

StreamOptions watching(const std::string& slot, const std::string& oid) {
    auto o = test_options(slot);
    o.create_slot = true;
    o.tables = [oid] { return std::optional<std::string>(oid); };
    return o;
}

}  // namespace

TEST_CASE("acknowledgements never pass an incomplete transaction, nor do keepalives while it is pending") {
    REQUIRE_MESSAGE(plugin_emits_records(), "the installed docsync plugin does not emit records yet");
    auto c = sql();
    drop_slot(c, "stream_hold");
    std::string oid = watched_table(c, "stream_hold_t");
    exec1(c, "TRUNCATE stream_hold_t");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    handler.hold_commit_index = 2;
    StreamRunner runner(watching("stream_hold", oid), coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());

    for (int i = 1; i <= 5; ++i) exec1(c, "INSERT INTO stream_hold_t VALUES (" + std::to_string(i) + ", 'x')");
    REQUIRE(wait_until([&] { return handler.commit_count() == 5; }, 30s));
    Lsn before_held = handler.with_lock([&] { return handler.commits[1].end_lsn; });
    Lsn held_end = handler.with_lock([&] { return handler.commits[2].end_lsn; });
    CHECK(wait_for_confirmed(c, "stream_hold", before_held, 30s));
    unwatched_wal(c, 1 << 20);  // keepalives arrive, but a transaction is pending
    std::this_thread::sleep_for(1500ms);
    auto slot = slot_row(c, "stream_hold");
    CHECK(slot.confirmed_flush == before_held);
    CHECK(slot.confirmed_flush < held_end);
    CHECK(runner.stream.stats().sent_flush_lsn < held_end);

    handler.release();
    Lsn last_end = handler.with_lock([&] { return handler.commits[4].end_lsn; });
    CHECK(wait_for_confirmed(c, "stream_hold", last_end, 30s));
    unwatched_wal(c, 256 << 10);
    CHECK(wait_for_confirmed(c, "stream_hold", current_wal_lsn(c), 30s));  // idle again: keepalives ack
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_hold");
}

TEST_CASE("backpressure: over the pending cap the stream stops reading until work completes") {
    REQUIRE_MESSAGE(plugin_emits_records(), "the installed docsync plugin does not emit records yet");
    auto c = sql();
    drop_slot(c, "stream_pressure");
    std::string oid = watched_table(c, "stream_pressure_t");
    exec1(c, "TRUNCATE stream_pressure_t");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    handler.hold_all = true;
    auto options = watching("stream_pressure", oid);
    options.max_pending_txns = 3;
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    for (int i = 1; i <= 10; ++i) exec1(c, "INSERT INTO stream_pressure_t VALUES (" + std::to_string(i) + ", 'x')");
    REQUIRE(wait_until([&] { return handler.commit_count() == 3; }, 30s));
    std::this_thread::sleep_for(1s);
    CHECK(handler.commit_count() == 3);
    CHECK(runner.stream.stats().state == StreamState::Paused);
    CHECK(coordinator.pending_groups() == 3);
    handler.hold_all = false;
    handler.release();
    CHECK(wait_until([&] { return handler.commit_count() == 10; }, 30s));
    CHECK(wait_until([&] { return coordinator.idle(); }, 10s));
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_pressure");
}

TEST_CASE("backpressure by bytes: a transaction over the byte cap is still read whole, the next one waits") {
    REQUIRE_MESSAGE(plugin_emits_records(), "the installed docsync plugin does not emit records yet");
    auto c = sql();
    drop_slot(c, "stream_pressure_bytes");
    std::string oid = watched_table(c, "stream_pressure_bytes_t");
    exec1(c, "TRUNCATE stream_pressure_bytes_t");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    handler.hold_all = true;
    auto options = watching("stream_pressure_bytes", oid);
    options.max_pending_bytes = 64 << 10;
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    // Two transactions of about 200 kB each.
    for (int i = 0; i < 2; ++i)
        exec1(c, "INSERT INTO stream_pressure_bytes_t SELECT g, repeat('y', 200) FROM generate_series(" +
                     std::to_string(i * 1000 + 1) + ", " + std::to_string(i * 1000 + 1000) + ") g");
    REQUIRE(wait_until([&] { return handler.commit_count() == 1; }, 30s));
    std::this_thread::sleep_for(1s);
    CHECK(handler.commit_count() == 1);
    CHECK(coordinator.pending_bytes() > (64u << 10));
    CHECK(runner.stream.stats().state == StreamState::Paused);
    handler.hold_all = false;
    handler.release();
    CHECK(wait_until([&] { return handler.commit_count() == 2; }, 30s));
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_pressure_bytes");
}

TEST_CASE("after a reconnect, pending transactions are redelivered under a new epoch and old completions are ignored") {
    REQUIRE_MESSAGE(plugin_emits_records(), "the installed docsync plugin does not emit records yet");
    auto c = sql();
    drop_slot(c, "stream_redeliver");
    std::string oid = watched_table(c, "stream_redeliver_t");
    exec1(c, "TRUNCATE stream_redeliver_t");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    handler.hold_commit_index = 0;
    StreamRunner runner(watching("stream_redeliver", oid), coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    for (int i = 1; i <= 3; ++i) exec1(c, "INSERT INTO stream_redeliver_t VALUES (" + std::to_string(i) + ", 'x')");
    REQUIRE(wait_until([&] { return handler.commit_count() == 3; }, 30s));
    std::string pid = slot_row(c, "stream_redeliver").active_pid;
    exec1(c, "SELECT pg_terminate_backend($1::int)", {pid});
    // All three come again: the first was never completed, so nothing was acknowledged.
    REQUIRE(wait_until([&] { return handler.commit_count() == 6; }, 30s));
    std::vector<SeenCommit> commits = handler.with_lock([&] { return handler.commits; });
    for (int i = 0; i < 3; ++i) {
        CHECK(commits[3 + i].end_lsn == commits[i].end_lsn);
        CHECK(commits[3 + i].epoch > commits[i].epoch);
    }
    handler.release();  // the old session's ticket: ignored, never "completed before registration"
    CHECK(coordinator.stats().stale_completions == 1);
    CHECK(wait_for_confirmed(c, "stream_redeliver", commits[5].end_lsn, 30s));
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_redeliver");
}

TEST_CASE("a transaction redelivered after a server crash is handled once") {
    REQUIRE_MESSAGE(plugin_emits_records(), "the installed docsync plugin does not emit records yet");
    std::string oid = fresh_watch("stream_crash", "stream_crash_t");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    StreamRunner runner(watching("stream_crash", oid), coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    {
        auto c = sql();
        exec1(c, "CHECKPOINT");  // the slot as saved on disk: before the transactions below
        for (int i = 1; i <= 3; ++i) exec1(c, "INSERT INTO stream_crash_t VALUES (" + std::to_string(i) + ", 'x')");
        REQUIRE(wait_until([&] { return handler.commit_count() == 3; }, 30s));
        CHECK(wait_for_confirmed(c, "stream_crash", handler.with_lock([&] { return handler.commits[2].end_lsn; }), 30s));
    }
    restart_server("immediate");  // the slot comes back with its last saved confirmed position
    REQUIRE(wait_until([&] { return handler.session_count() >= 2 && runner.streaming(); }, 60s));
    auto c = sql();
    exec1(c, "INSERT INTO stream_crash_t VALUES (4, 'x')");
    REQUIRE(wait_until([&] { return handler.commit_count() >= 4; }, 30s));
    std::this_thread::sleep_for(500ms);
    auto commits = handler.with_lock([&] { return handler.commits; });
    CHECK(commits.size() == 4);
    std::set<Lsn> ends;
    for (const auto& commit : commits) ends.insert(commit.end_lsn);
    CHECK(ends.size() == commits.size());
    // The CHECKPOINT above saved the slot before the three transactions, so the crash brings them back.
    CHECK(runner.stream.stats().redelivered_skipped >= 1);
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_crash");
}

TEST_CASE("the safety valve fires mid-stream when an incomplete transaction holds too much WAL, and recovers") {
    REQUIRE_MESSAGE(plugin_emits_records(), "the installed docsync plugin does not emit records yet");
    auto c = sql();
    drop_slot(c, "stream_valve_live");
    std::string oid = watched_table(c, "stream_valve_live_t");
    exec1(c, "TRUNCATE stream_valve_live_t");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    handler.hold_commit_index = 0;
    auto options = watching("stream_valve_live", oid);
    options.max_retained_wal = 2 << 20;
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    exec1(c, "INSERT INTO stream_valve_live_t VALUES (1, 'x')");
    REQUIRE(wait_until([&] { return handler.commit_count() == 1; }, 30s));
    unwatched_wal(c, 4 << 20);
    REQUIRE(wait_until([&] { return runner.stream.stats().valve_resets == 1 && runner.streaming(); }, 30s));
    REQUIRE(handler.session_count() == 2);
    auto second = handler.with_lock([&] { return handler.sessions[1]; });
    CHECK(second.valve_fired);
    CHECK(second.slot_created);
    CHECK(second.generation > handler.with_lock([&] { return handler.sessions[0].generation; }));
    handler.release();  // the held transaction belongs to the dropped slot: ignored
    CHECK(coordinator.stats().stale_completions == 1);
    exec1(c, "INSERT INTO stream_valve_live_t VALUES (2, 'x')");
    REQUIRE(wait_until([&] { return handler.commit_count() == 2; }, 30s));
    CHECK(wait_for_confirmed(c, "stream_valve_live", handler.with_lock([&] { return handler.commits[1].end_lsn; }), 30s));
    CHECK(runner.stream.stats().valve_resets == 1);
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_valve_live");
}

TEST_CASE("a fast shutdown is not held up by a transaction that cannot complete, with the valve off") {
    // The server's fast shutdown waits until the walsender's WAL is confirmed, which a held
    // transaction prevents: the stream's control check must notice the shutdown and leave.
    REQUIRE_MESSAGE(plugin_emits_records(), "the installed docsync plugin does not emit records yet");
    std::string oid = fresh_watch("stream_shutdown", "stream_shutdown_t");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    handler.hold_all = true;
    auto options = watching("stream_shutdown", oid);
    REQUIRE(options.max_retained_wal == 0);
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    {
        auto c = sql();
        exec1(c, "INSERT INTO stream_shutdown_t VALUES (1, 'pending at shutdown')");
    }
    REQUIRE(wait_until([&] { return handler.commit_count() == 1; }, 30s));
    auto started = std::chrono::steady_clock::now();
    restart_server("fast");  // pg_ctl -t 60: fails if the server cannot stop
    MESSAGE("fast restart took " << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() << " s");
    REQUIRE(wait_until([&] { return handler.session_count() >= 2 && runner.streaming(); }, 60s));
    // The transaction was never acknowledged: the new session delivers it again.
    REQUIRE(wait_until([&] { return handler.commit_count() == 2; }, 30s));
    handler.hold_all = false;
    handler.release();
    auto c = sql();
    Lsn end = handler.with_lock([&] { return handler.commits[1].end_lsn; });
    CHECK(wait_for_confirmed(c, "stream_shutdown", end, 30s));
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_shutdown");
}
