// The replication stream against the real server: slot checks and creation, acknowledgements on an
// idle slot, reconnects after pg_terminate_backend and server restarts, "slot is active", the WAL
// safety valve (also for a slot invalidated just before START_REPLICATION), leaving a server that
// refuses new connections while it shuts down, the generation, and — once the plugin emits records —
// acknowledgements held by an incomplete transaction and redelivered transactions handled once.
#include <doctest/doctest.h>

#include "../unit/log_capture.hpp"
#include "stream_harness.hpp"

using namespace docsync;
using namespace docsync::testing;

namespace {

// Generates about `bytes` of WAL in committed transactions on an unwatched table.
void make_wal(pg::Connection& c, std::size_t bytes) {
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE TABLE IF NOT EXISTS stream_busy(id bigserial PRIMARY KEY, pad text)");
    std::size_t rows = bytes / 1100 + 1;
    for (std::size_t done = 0; done < rows; done += 500)
        exec1(c, "INSERT INTO stream_busy(pad) SELECT repeat('x', 1000) FROM generate_series(1, 500)");
}

std::uint64_t valve_count(StreamRunner& r) { return r.stream.stats().valve_resets; }

// Has the server invalidate the inactive `slot` (wal_status = lost): a small max_slot_wal_keep_size,
// WAL past it and checkpoints. Returns whether it did within a minute.
bool invalidate_slot(const std::string& slot) {
    auto c = sql();
    exec1(c, "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'");
    exec1(c, "SELECT pg_reload_conf()");
    bool lost = wait_until([&] {
        make_wal(c, 512 << 10);
        exec1(c, "SELECT pg_switch_wal()");
        exec1(c, "CHECKPOINT");
        return slot_row(c, slot).wal_status == "lost";
    }, 60s, 10ms);
    exec1(c, "ALTER SYSTEM RESET max_slot_wal_keep_size");
    exec1(c, "SELECT pg_reload_conf()");
    return lost;
}

// Invalidates the slot when the first session starts: after the stream checked the slot, before
// its START_REPLICATION.
class InvalidatingHandler : public RecordingHandler {
public:
    InvalidatingHandler(DeliveryProgressCoordinator& coordinator, std::string slot)
        : RecordingHandler(coordinator), slot_(std::move(slot)) {}
    void on_session(const SessionInfo& session) override {
        if (session_count() == 0) invalidated = invalidate_slot(slot_);
        RecordingHandler::on_session(session);
    }
    std::atomic<bool> invalidated{false};

private:
    std::string slot_;
};

}  // namespace

TEST_CASE("a missing slot is a clear error naming the slot and --create-slot") {
    auto c = sql();
    drop_slot(c, "stream_missing");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    Stream stream(test_options("stream_missing"), coordinator, handler);
    CHECK_THROWS_WITH_AS(stream.run(), doctest::Contains("replication slot \"stream_missing\" does not exist"), Error);
    try {
        stream.run();
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("--create-slot") != std::string::npos);
    }
    CHECK(stream.stats().state == StreamState::Failed);
    CHECK_FALSE(slot_row(c, "stream_missing").exists);
}

TEST_CASE("a slot of another plugin is refused") {
    auto c = sql();
    drop_slot(c, "stream_other_plugin");
    exec1(c, "SELECT pg_create_logical_replication_slot('stream_other_plugin', 'test_decoding')");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    Stream stream(test_options("stream_other_plugin"), coordinator, handler);
    CHECK_THROWS_WITH_AS(stream.run(), doctest::Contains("not a docsync slot"), Error);
    drop_slot(c, "stream_other_plugin");
}

TEST_CASE("--create-slot creates the slot, and an idle stream with busy unwatched tables still advances it") {
    auto c = sql();
    drop_slot(c, "stream_idle");
    exec1(c, "CREATE TABLE IF NOT EXISTS stream_watched_idle(id int PRIMARY KEY)");
    bool filtered = plugin_emits_records();
    std::string watched = exec1(c, "SELECT 'stream_watched_idle'::regclass::oid::text");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_idle");
    options.create_slot = true;
    if (filtered) options.tables = [watched] { return std::optional<std::string>(watched); };
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    auto slot = slot_row(c, "stream_idle");
    REQUIRE(slot.exists);
    CHECK(exec1(c, "SELECT plugin FROM pg_replication_slots WHERE slot_name = 'stream_idle'") == "docsync");
    REQUIRE(handler.session_count() == 1);
    CHECK(handler.sessions[0].slot_created);
    CHECK(handler.sessions[0].generation >= 1);

    Lsn before = slot.confirmed_flush;
    make_wal(c, 2 << 20);
    Lsn target = current_wal_lsn(c);
    CHECK(target > before + (1 << 20));
    CHECK(wait_for_confirmed(c, "stream_idle", target, 30s));
    CHECK(handler.commit_count() == 0);  // nothing watched changed
    CHECK(runner.stream.stats().keepalives > 0);
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_idle");
}

TEST_CASE("pg_terminate_backend of the walsender is survived: a new session from the slot's position") {
    auto c = sql();
    drop_slot(c, "stream_terminate");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_terminate");
    options.create_slot = true;
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    std::string pid;
    REQUIRE(wait_until([&] { return !(pid = slot_row(c, "stream_terminate").active_pid).empty(); }, 10s));
    exec1(c, "SELECT pg_terminate_backend($1::int)", {pid});
    REQUIRE(wait_until([&] { return handler.session_count() >= 2 && runner.streaming(); }, 30s));
    CHECK(runner.stream.stats().reconnects >= 1);
    CHECK(handler.sessions[1].reconnect);
    CHECK_FALSE(handler.sessions[1].slot_created);
    CHECK(handler.sessions[1].epoch > handler.sessions[0].epoch);
    REQUIRE(wait_until([&] {
        auto p = slot_row(c, "stream_terminate").active_pid;
        return !p.empty() && p != pid;
    }, 10s));
    make_wal(c, 256 << 10);
    CHECK(wait_for_confirmed(c, "stream_terminate", current_wal_lsn(c), 30s));
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_terminate");
}

TEST_CASE("a server restart mid-stream is survived") {
    {
        auto c = sql();
        drop_slot(c, "stream_restart");
    }
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_restart");
    options.create_slot = true;
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    restart_server("fast");
    REQUIRE(wait_until([&] { return handler.session_count() >= 2 && runner.streaming(); }, 60s));
    auto c = sql();
    make_wal(c, 256 << 10);
    CHECK(wait_for_confirmed(c, "stream_restart", current_wal_lsn(c), 30s));
    CHECK(runner.error().empty());
    runner.stop();
    drop_slot(c, "stream_restart");
}

TEST_CASE("a slot held by another process is retried, then is an error naming its pid") {
    auto c = sql();
    drop_slot(c, "stream_active");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_active");
    options.create_slot = true;
    StreamRunner holder(options, coordinator, handler);
    REQUIRE(wait_until([&] { return holder.streaming() || holder.done(); }, 30s));
    std::string pid = slot_row(c, "stream_active").active_pid;
    REQUIRE_FALSE(pid.empty());

    DeliveryProgressCoordinator coordinator2;
    RecordingHandler handler2(coordinator2);
    auto options2 = test_options("stream_active");
    options2.slot_active_timeout = 1500ms;
    Stream second(options2, coordinator2, handler2);
    auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(second.run(), doctest::Contains(("held by the process with pid " + pid).c_str()), Error);
    CHECK(std::chrono::steady_clock::now() - started >= 1500ms);
    CHECK(holder.streaming());  // the first stream is untouched
    holder.stop();
    drop_slot(c, "stream_active");
}

TEST_CASE("the WAL safety valve recreates a slot holding more than --max-retained-wal and raises the generation") {
    auto c = sql();
    drop_slot(c, "stream_valve");
    std::uint64_t first_generation = 0;
    {
        DeliveryProgressCoordinator coordinator;
        RecordingHandler handler(coordinator);
        auto options = test_options("stream_valve");
        options.create_slot = true;
        StreamRunner runner(options, coordinator, handler);
        REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
        REQUIRE_MESSAGE(runner.error().empty(), runner.error());
        first_generation = handler.sessions.at(0).generation;
    }
    // The worker is away while 3 MB of WAL are written.
    Lsn old_confirmed = slot_row(c, "stream_valve").confirmed_flush;
    make_wal(c, 3 << 20);
    Lsn written = current_wal_lsn(c);
    REQUIRE(written - old_confirmed > (2u << 20));

    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_valve");
    options.max_retained_wal = 1 << 20;
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    REQUIRE(handler.session_count() == 1);
    CHECK(handler.sessions[0].valve_fired);
    CHECK(handler.sessions[0].slot_created);
    CHECK(handler.sessions[0].start_lsn >= written);  // the new slot starts after the old backlog
    CHECK(valve_count(runner) == 1);
    if (handler.sessions[0].generation_from_server)
        CHECK(handler.sessions[0].generation > first_generation);
    else
        CHECK(handler.sessions[0].generation >= 1);
    // It recovers: the new slot keeps moving.
    make_wal(c, 256 << 10);
    CHECK(wait_for_confirmed(c, "stream_valve", current_wal_lsn(c), 30s));
    CHECK(valve_count(runner) == 1);
    runner.stop();
    drop_slot(c, "stream_valve");
}

TEST_CASE("the valve also fires when the server invalidated the slot (wal_status = lost)") {
    auto c = sql();
    drop_slot(c, "stream_lost");
    {
        DeliveryProgressCoordinator coordinator;
        RecordingHandler handler(coordinator);
        auto options = test_options("stream_lost");
        options.create_slot = true;
        StreamRunner runner(options, coordinator, handler);
        REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    }
    REQUIRE(invalidate_slot("stream_lost"));

    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_lost");  // no --create-slot: the valve recreates regardless
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    CHECK(handler.sessions.at(0).valve_fired);
    CHECK(valve_count(runner) == 1);
    CHECK(slot_row(c, "stream_lost").wal_status != "lost");
    runner.stop();
    drop_slot(c, "stream_lost");
}

TEST_CASE("a slot the server invalidates between the slot check and START_REPLICATION fires the valve") {
    auto c = sql();
    drop_slot(c, "stream_lost_start");
    exec1(c, "SELECT pg_create_logical_replication_slot('stream_lost_start', 'docsync')");
    DeliveryProgressCoordinator coordinator;
    InvalidatingHandler handler(coordinator, "stream_lost_start");
    StreamRunner runner(test_options("stream_lost_start"), coordinator, handler);
    REQUIRE(wait_until([&] { return (handler.session_count() >= 2 && runner.streaming()) || runner.done(); }, 90s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    REQUIRE(handler.invalidated);
    auto sessions = handler.with_lock([&] { return handler.sessions; });
    REQUIRE(sessions.size() == 2);
    CHECK_FALSE(sessions[0].valve_fired);  // the slot was fine when it was checked
    CHECK(sessions[1].valve_fired);
    CHECK(sessions[1].slot_created);
    CHECK(valve_count(runner) == 1);
    CHECK(slot_row(c, "stream_lost_start").wal_status != "lost");
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_lost_start");
}

TEST_CASE("a server that refuses new connections because it is shutting down is left at the first control check") {
    // A smart shutdown waits for the connection held below and meanwhile refuses new ones (57P03):
    // the control check's connection is refused, and the stream leaves at once rather than after
    // three failed checks.
    {
        auto c = sql();
        drop_slot(c, "stream_refused");
    }
    test::LogCapture log;
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_refused");
    options.create_slot = true;
    options.valve_interval = 3s;  // the first check comes after the shutdown began
    std::optional<pg::Connection> held = sql();
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    REQUIRE(std::system((pg_ctl_command("smart") + " -W stop >/dev/null").c_str()) == 0);
    bool left = wait_until([&] { return log.count("the server is shutting down; leaving the stream") > 0; }, 10s);
    int failed_checks = log.count("new connections to the server fail");
    // Let the server stop (fast, should the stream still hold it), then start it again.
    held.reset();
    [[maybe_unused]] int stopped = std::system((pg_ctl_command("fast") + " stop >/dev/null 2>&1").c_str());
    REQUIRE(std::system((pg_ctl_command("fast") + " start >/dev/null").c_str()) == 0);
    CHECK(left);
    CHECK(failed_checks == 0);
    REQUIRE(wait_until([&] { return handler.session_count() >= 2 && runner.streaming(); }, 60s));
    runner.stop();
    CHECK(runner.error().empty());
    auto c = sql();
    drop_slot(c, "stream_refused");
}

TEST_CASE("a long customer transaction pinning restart_lsn does not fire the valve") {
    auto c = sql();
    drop_slot(c, "stream_pinned");
    exec1(c, "CREATE TABLE IF NOT EXISTS stream_long(id int)");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_pinned");
    options.create_slot = true;
    // Above the decoding lag of a busy stream, well below what the open transaction pins.
    options.max_retained_wal = 4 << 20;
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());

    auto customer = sql();
    exec1(customer, "BEGIN");
    exec1(customer, "INSERT INTO stream_long VALUES (1)");
    Lsn txn_start = current_wal_lsn(c);
    for (int i = 0; i < 12; ++i) make_wal(c, 1 << 20);
    Lsn target = current_wal_lsn(c);
    CHECK(wait_for_confirmed(c, "stream_pinned", target, 30s));
    auto slot = slot_row(c, "stream_pinned");
    CHECK(slot.restart_lsn <= txn_start);  // pinned by the open transaction
    CHECK(target - slot.restart_lsn > (8u << 20));
    std::this_thread::sleep_for(1s);  // several valve polls
    CHECK(valve_count(runner) == 0);
    CHECK(handler.session_count() == 1);
    exec1(customer, "COMMIT");
    runner.stop();
    drop_slot(c, "stream_pinned");
}

TEST_CASE("request_restart starts a new session from the confirmed position and asks for the tables again") {
    auto c = sql();
    drop_slot(c, "stream_replan");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = test_options("stream_replan");
    options.create_slot = true;
    bool tables_option = plugin_emits_records();  // the plugin accepts `tables`
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE TABLE IF NOT EXISTS stream_busy(id bigserial PRIMARY KEY, pad text)");
    std::string oid = exec1(c, "SELECT 'stream_busy'::regclass::oid::text");
    std::atomic<int> asked{0};
    options.tables = [&]() -> std::optional<std::string> {  // called on the stream thread
        asked++;
        if (!tables_option) return std::nullopt;
        return oid;
    };
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    Lsn confirmed = slot_row(c, "stream_replan").confirmed_flush;
    runner.stream.request_restart();
    REQUIRE(wait_until([&] { return handler.session_count() == 2 && runner.streaming(); }, 30s));
    auto second = handler.with_lock([&] { return handler.sessions[1]; });
    CHECK(second.reconnect);
    CHECK_FALSE(second.slot_created);
    CHECK(second.start_lsn >= confirmed);
    CHECK(second.epoch == handler.with_lock([&] { return handler.sessions[0].epoch; }) + 1);
    CHECK(asked == 2);
    CHECK(runner.stream.stats().reconnects == 1);
    runner.stop();
    CHECK(runner.error().empty());
    drop_slot(c, "stream_replan");
}

TEST_CASE("the generation comes from docsync.advance_generation: raised for a new slot and by the valve, kept on reconnect") {
    auto admin = sql();
    if (exec1(admin, "SELECT count(*) FROM pg_database WHERE datname = 'stream_generation'") == "0")
        exec1(admin, "CREATE DATABASE stream_generation");
    auto c = pg::Connection::connect("dbname=stream_generation", pg::deadline_in(10s));
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE EXTENSION IF NOT EXISTS docsync");
    drop_slot(c, "stream_generation");
    exec1(c, "DELETE FROM docsync.worker_state WHERE slot = 'stream_generation'");

    auto run_once = [&](StreamOptions options, std::uint64_t floor) {
        options.dsn = "dbname=stream_generation";
        options.generation_floor = [floor] { return floor; };
        DeliveryProgressCoordinator coordinator;
        RecordingHandler handler(coordinator);
        StreamRunner runner(options, coordinator, handler);
        REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
        REQUIRE_MESSAGE(runner.error().empty(), runner.error());
        runner.stop();
        return handler.with_lock([&] { return handler.sessions.at(0); });
    };
    auto options = test_options("stream_generation");
    options.create_slot = true;
    auto first = run_once(options, 0);
    CHECK(first.generation_from_server);
    CHECK(first.slot_created);
    CHECK(first.generation == 1);
    auto again = run_once(options, 0);  // same slot, same server: unchanged
    CHECK_FALSE(again.slot_created);
    CHECK(again.generation == 1);
    auto floored = run_once(options, 5);  // the sink already holds generation 5
    CHECK(floored.generation == 5);
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE TABLE IF NOT EXISTS gen_busy(id bigserial, pad text)");
    exec1(c, "INSERT INTO gen_busy(pad) SELECT repeat('x', 1000) FROM generate_series(1, 3000)");
    options.max_retained_wal = 1 << 20;  // the valve fires at start: forced raise
    auto valve = run_once(options, 0);
    CHECK(valve.valve_fired);
    CHECK(valve.generation == 6);
    CHECK(exec1(c, "SELECT generation FROM docsync.worker_state WHERE slot = 'stream_generation'") == "6");
    drop_slot(c, "stream_generation");
}
