// The stream reading PostgreSQL's built-in pgoutput (--plugin pgoutput): the worker creates the
// publication docsync_<slot> before the slot, with the watched tables whole (no column lists),
// keeps it in step with the watches at every session start, hands up the records the docsync
// plugin would, acknowledges as usual, and refuses what pgoutput cannot serve.
#include <doctest/doctest.h>

#include "stream_harness.hpp"

using namespace docsync;
using namespace docsync::testing;

namespace {

// pg_publication_tables' column list of `table` in the slot's publication ("" when not published).
std::string published_columns(pg::Connection& c, const std::string& slot, const std::string& table) {
    return exec1(c, "SELECT array_to_string(attnames, ',') FROM pg_publication_tables WHERE pubname = $1 AND tablename = $2",
                 {"docsync_" + slot, table});
}

struct Watch {
    std::mutex mutex;
    std::string tables;
    void set(std::string t) {
        std::lock_guard lock(mutex);
        tables = std::move(t);
    }
    std::optional<std::string> get() {
        std::lock_guard lock(mutex);
        return tables;
    }
};

std::vector<ChangeRecord> changes_of(RecordingHandler& handler, Oid relid) {
    return handler.with_lock([&] {
        std::vector<ChangeRecord> out;
        for (const auto& r : handler.records)
            if (auto* c = std::get_if<ChangeRecord>(&r); c && c->relid == relid) out.push_back(*c);
        return out;
    });
}

// A fresh start for `slot`: no slot, no publication docsync_<slot>, and `table` made anew by
// `create`; returns the table's oid.
std::string fresh_table(pg::Connection& c, const std::string& slot, const std::string& table, const std::string& create) {
    drop_slot(c, slot);
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "DROP PUBLICATION IF EXISTS docsync_" + slot);
    exec1(c, "DROP TABLE IF EXISTS " + table);
    exec1(c, create);
    return exec1(c, "SELECT '" + table + "'::regclass::oid::text");
}

// A stream of `slot` that creates it, reading pgoutput.
StreamOptions pgoutput_options(const std::string& slot) {
    auto options = test_options(slot);
    options.create_slot = true;
    options.plugin = "pgoutput";
    return options;
}

}  // namespace

TEST_CASE("--plugin pgoutput: a publication kept in step with the watches, the same records, acknowledgements") {
    const std::string slot = "stream_pgo";
    auto c = sql();
    const std::string oid = fresh_table(c, slot, "stream_pgo_t", "CREATE TABLE stream_pgo_t (id int PRIMARY KEY, skip text, v text)");
    const auto relid = static_cast<Oid>(std::stoul(oid));

    Watch watch;
    watch.set(oid + "(3)");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = pgoutput_options(slot);
    options.tables = [&watch] { return watch.get(); };
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    CHECK(exec1(c, "SELECT plugin FROM pg_replication_slots WHERE slot_name = $1", {slot}) == "pgoutput");
    // Published whole, with no column list, though the watch reads one column: the decoder projects.
    CHECK(published_columns(c, slot, "stream_pgo_t") == "id,skip,v");
    CHECK(exec1(c, "SELECT count(*) FROM pg_publication_rel WHERE prrelid = " + oid + " AND prattrs IS NULL") == "1");
    // The tables' owner may change the replica identity at any time: the application's UPDATE and
    // DELETE still run (PostgreSQL refuses them on a table whose column list misses the identity).
    exec1(c, "ALTER TABLE stream_pgo_t REPLICA IDENTITY FULL");
    CHECK_NOTHROW(exec1(c, "UPDATE stream_pgo_t SET v = v WHERE id = 0"));
    CHECK_NOTHROW(exec1(c, "DELETE FROM stream_pgo_t WHERE id = 0"));
    exec1(c, "ALTER TABLE stream_pgo_t REPLICA IDENTITY DEFAULT");

    exec1(c, "INSERT INTO stream_pgo_t VALUES (1, 's', 'one'), (2, 's', 'two')");
    exec1(c, "UPDATE stream_pgo_t SET v = 'uno' WHERE id = 1");
    exec1(c, "UPDATE stream_pgo_t SET skip = 'unpublished' WHERE id = 2");  // no watched column changed
    exec1(c, "DELETE FROM stream_pgo_t WHERE id = 2");
    REQUIRE(wait_until([&] { return handler.commit_count() == 4; }, 30s));
    auto changes = changes_of(handler, relid);
    REQUIRE(changes.size() == 5);
    CHECK(changes[0].op == ChangeOp::Insert);
    REQUIRE(changes[0].new_values.size() == 1);
    CHECK(changes[0].new_values[0].text == "one");
    CHECK(changes[2].op == ChangeOp::Update);
    CHECK(changes[2].new_values[0].text == "uno");
    CHECK(changes[2].old_values[0].kind == ValueKind::Unknown);
    CHECK(changes[3].new_values[0].text == "two");
    CHECK(changes[4].op == ChangeOp::Delete);
    Lsn last_end = handler.with_lock([&] { return handler.commits.back().end_lsn; });
    CHECK(wait_for_confirmed(c, slot, last_end, 30s));

    // A new session with the same watches leaves the publication alone (no catalog churn, and no
    // privilege needed), and so does one watching more columns of a table already published.
    const std::string pub_row = "SELECT xmin::text FROM pg_publication_rel WHERE prrelid = " + oid;
    const std::string before = exec1(c, pub_row);
    runner.stream.request_restart();
    REQUIRE(wait_until([&] { return handler.session_count() == 2; }, 30s));
    REQUIRE(wait_until([&] { return runner.streaming(); }, 30s));
    CHECK(exec1(c, pub_row) == before);
    watch.set(oid);
    runner.stream.request_restart();
    REQUIRE(wait_until([&] { return handler.session_count() == 3; }, 30s));
    REQUIRE(wait_until([&] { return runner.streaming(); }, 30s));
    CHECK(exec1(c, pub_row) == before);
    exec1(c, "UPDATE stream_pgo_t SET skip = 'now watched' WHERE id = 1");
    REQUIRE(wait_until([&] { return handler.commit_count() == 5; }, 30s));
    changes = changes_of(handler, relid);
    REQUIRE(changes.size() == 6);
    REQUIRE(changes[5].new_values.size() == 3);
    CHECK(changes[5].new_values[1].text == "now watched");
    CHECK(changes[5].old_values[0].kind == ValueKind::Same);
    runner.stop();
    CHECK(runner.error().empty());

    // The slot is a pgoutput slot: --plugin docsync is refused naming the fix, auto takes it.
    {
        DeliveryProgressCoordinator coordinator2;
        RecordingHandler handler2(coordinator2);
        auto wrong = options;
        wrong.plugin = "docsync";
        StreamRunner refused(wrong, coordinator2, handler2);
        REQUIRE(wait_until([&] { return refused.done(); }, 30s));
        CHECK(refused.error().find("not a docsync slot; pass another --slot or --plugin pgoutput") != std::string::npos);
    }
    {
        DeliveryProgressCoordinator coordinator3;
        RecordingHandler handler3(coordinator3);
        auto automatic = options;
        automatic.plugin = "auto";
        StreamRunner taken(automatic, coordinator3, handler3);
        REQUIRE(wait_until([&] { return taken.streaming() || taken.done(); }, 30s));
        CHECK(taken.error().empty());
        exec1(c, "INSERT INTO stream_pgo_t VALUES (3, 's', 'three')");
        CHECK(wait_until([&] {
            auto seen = changes_of(handler3, relid);
            return !seen.empty() && seen.back().new_values.size() == 3 && seen.back().new_values[2].text == "three";
        }, 30s));
    }
    drop_slot(c, slot);
    exec1(c, "DROP PUBLICATION docsync_" + slot);
    exec1(c, "DROP TABLE stream_pgo_t");
}

TEST_CASE("--plugin pgoutput refuses a watched table without a replica identity, naming the fix") {
    const std::string slot = "stream_pgo_none";
    auto c = sql();
    const std::string oid = fresh_table(c, slot, "stream_pgo_none_t", "CREATE TABLE stream_pgo_none_t (id int, v text)");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = pgoutput_options(slot);
    options.tables = [oid] { return std::optional<std::string>(oid); };
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.done(); }, 30s));
    CHECK(runner.error().find("table public.stream_pgo_none_t has no replica identity (no primary key)") != std::string::npos);
    CHECK(runner.error().find("REPLICA IDENTITY FULL, or stream with --plugin docsync") != std::string::npos);
    // Nothing was made: the application's UPDATEs of the table still work.
    CHECK_FALSE(slot_row(c, slot).exists);
    CHECK(exec1(c, "SELECT count(*) FROM pg_publication WHERE pubname = $1", {"docsync_" + slot}) == "0");
    exec1(c, "UPDATE stream_pgo_none_t SET v = 'x'");
    exec1(c, "DROP TABLE stream_pgo_none_t");
}

TEST_CASE("--plugin pgoutput without the right to set up the publication names the statement for an owner") {
    const std::string slot = "stream_pgo_owner";
    auto c = sql();
    const std::string oid = fresh_table(c, slot, "stream_pgo_owner_t", "CREATE TABLE stream_pgo_owner_t (id int PRIMARY KEY, v text)");
    exec1(c, "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stream_pgo_repl') THEN "
             "CREATE ROLE stream_pgo_repl LOGIN REPLICATION; END IF; END $$");
    exec1(c, "GRANT CREATE ON DATABASE " + exec1(c, "SELECT quote_ident(current_database())") + " TO stream_pgo_repl");
    // Where the extension is installed (another test of this database may have created it), the
    // worker's role gets what grant_replication gives, as in the README's setup.
    if (exec1(c, "SELECT count(*) FROM pg_extension WHERE extname = 'docsync'") == "1")
        exec1(c, "SELECT count(*) FROM docsync.grant_replication('stream_pgo_repl')");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = pgoutput_options(slot);
    options.dsn = "user=stream_pgo_repl";
    options.tables = [oid] { return std::optional<std::string>(oid + "(2)"); };
    {
        StreamRunner runner(options, coordinator, handler);
        REQUIRE(wait_until([&] { return runner.done(); }, 30s));
        const std::string error = runner.error();
        const std::string marker = "have an owner of the tables (or a superuser) run: ";
        REQUIRE_MESSAGE(error.find(marker) != std::string::npos, error);
        CHECK_FALSE(slot_row(c, slot).exists);
        // An owner runs it; then the worker's role needs no more rights.
        exec1(c, error.substr(error.find(marker) + marker.size()));
    }
    CHECK(exec1(c, "SELECT array_to_string(attnames, ',') FROM pg_publication_tables WHERE pubname = $1"
                   " AND schemaname = 'public' AND tablename = 'stream_pgo_owner_t'",
                {"docsync_" + slot}) == "id,v");
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    CHECK_MESSAGE(runner.error().empty(), runner.error());
    exec1(c, "INSERT INTO stream_pgo_owner_t VALUES (1, 'one')");
    CHECK(wait_until([&] { return handler.commit_count() == 1; }, 30s));
    runner.stop();
    drop_slot(c, slot);
    exec1(c, "DROP PUBLICATION docsync_" + slot);
    exec1(c, "DROP TABLE stream_pgo_owner_t");
    exec1(c, "REVOKE CREATE ON DATABASE " + exec1(c, "SELECT quote_ident(current_database())") + " FROM stream_pgo_repl");
}

TEST_CASE("--plugin pgoutput reports a partition's changes as its watched root, columns mapped by name") {
    const std::string slot = "stream_pgo_part";
    auto c = sql();
    const std::string oid = fresh_table(c, slot, "stream_pgo_part_t", "CREATE TABLE stream_pgo_part_t (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)");
    exec1(c, "CREATE TABLE stream_pgo_part_t1 (v text, id int NOT NULL)");
    exec1(c, "ALTER TABLE stream_pgo_part_t ATTACH PARTITION stream_pgo_part_t1 FOR VALUES FROM (0) TO (100)");
    DeliveryProgressCoordinator coordinator;
    RecordingHandler handler(coordinator);
    auto options = pgoutput_options(slot);
    options.tables = [oid] { return std::optional<std::string>(oid + "(2)"); };
    StreamRunner runner(options, coordinator, handler);
    REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
    REQUIRE_MESSAGE(runner.error().empty(), runner.error());
    exec1(c, "INSERT INTO stream_pgo_part_t VALUES (7, 'seven')");
    REQUIRE(wait_until([&] { return handler.commit_count() == 1; }, 30s));
    auto changes = changes_of(handler, static_cast<Oid>(std::stoul(oid)));
    REQUIRE(changes.size() == 1);
    REQUIRE(changes[0].new_values.size() == 1);
    CHECK(changes[0].new_values[0].text == "seven");
    runner.stop();
    drop_slot(c, slot);
    exec1(c, "DROP PUBLICATION docsync_" + slot);
    exec1(c, "DROP TABLE stream_pgo_part_t");
}

TEST_CASE("--plugin auto makes a docsync slot where the server may decode with it, else a pgoutput slot") {
    auto c = sql();
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE TABLE IF NOT EXISTS stream_pgo_auto_t (id int PRIMARY KEY)");
    const std::string oid = exec1(c, "SELECT 'stream_pgo_auto_t'::regclass::oid::text");
    auto plugin_made = [&](const std::string& slot, const std::string& dsn) {
        drop_slot(c, slot);
        exec1(c, "DROP PUBLICATION IF EXISTS docsync_" + slot);
        DeliveryProgressCoordinator coordinator;
        RecordingHandler handler(coordinator);
        auto options = test_options(slot);
        options.dsn = dsn;
        options.create_slot = true;
        options.plugin = "auto";
        options.tables = [oid] { return std::optional<std::string>(oid); };
        StreamRunner runner(options, coordinator, handler);
        REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
        CHECK_MESSAGE(runner.error().empty(), runner.error());
        runner.stop();
        std::string plugin = exec1(c, "SELECT plugin FROM pg_replication_slots WHERE slot_name = $1", {slot});
        drop_slot(c, slot);
        exec1(c, "DROP PUBLICATION IF EXISTS docsync_" + slot);
        return plugin;
    };
    CHECK(exec1(c, "SELECT current_setting('output_plugin_libraries', true) LIKE '%docsync%'") == "t");
    CHECK(plugin_made("stream_pgo_auto", "") == "docsync");
    // A server whose output_plugin_libraries leaves docsync out (set for this connection only).
    CHECK(plugin_made("stream_pgo_auto", "options='-c output_plugin_libraries=pgoutput,test_decoding'") == "pgoutput");
    exec1(c, "DROP TABLE stream_pgo_auto_t");
}

TEST_CASE("--plugin pgoutput streams a large transaction with protocol version 2; --pgoutput-streaming off reads version 1") {
    const std::string slot = "stream_pgo_big";
    auto c = sql();
    const std::string oid = fresh_table(c, slot, "stream_pgo_big_t", "CREATE TABLE stream_pgo_big_t (id int PRIMARY KEY, v text)");
    const auto relid = static_cast<Oid>(std::stoul(oid));
    // The walsender's command, as pg_stat_activity shows it.
    auto walsender_command = [&] {
        return exec1(c, "SELECT coalesce(max(a.query), '') FROM pg_stat_activity a JOIN pg_replication_slots s "
                        "ON s.active_pid = a.pid WHERE s.slot_name = $1", {slot});
    };
    for (bool streaming : {true, false}) {
        CAPTURE(streaming);
        DeliveryProgressCoordinator coordinator;
        RecordingHandler handler(coordinator);
        auto options = pgoutput_options(slot);
        options.dsn = "options='-c logical_decoding_work_mem=64kB'";  // the walsender streams past 64kB
        options.pgoutput_streaming = streaming;
        options.stream_memory = 16 * 1024;  // and the worker holds 16kB in memory, the rest in a file
        options.tables = [&oid] { return std::optional<std::string>(oid); };
        StreamRunner runner(options, coordinator, handler);
        REQUIRE(wait_until([&] { return runner.streaming() || runner.done(); }, 30s));
        REQUIRE_MESSAGE(runner.error().empty(), runner.error());
        REQUIRE(wait_until([&] { return !walsender_command().empty(); }, 10s));
        std::string command = walsender_command();
        CHECK_MESSAGE((command.find("\"proto_version\" '2', \"streaming\" 'on'") != std::string::npos) == streaming, command);
        CHECK_MESSAGE((command.find("\"proto_version\" '1'") != std::string::npos) == !streaming, command);
        std::size_t commits = handler.commit_count();
        std::size_t before = changes_of(handler, relid).size();
        exec1(c, "BEGIN");
        exec1(c, "INSERT INTO stream_pgo_big_t SELECT g, repeat('v', 100) FROM generate_series(1, 3000) g");
        exec1(c, "SAVEPOINT s");
        exec1(c, "UPDATE stream_pgo_big_t SET v = 'rolled back' WHERE id <= 2000");
        exec1(c, "SELECT pg_sleep(0.5)");  // streamed before its rollback
        exec1(c, "ROLLBACK TO SAVEPOINT s");
        exec1(c, "DELETE FROM stream_pgo_big_t WHERE id > 2000");
        exec1(c, "COMMIT");
        REQUIRE(wait_until([&] { return handler.commit_count() == commits + 1; }, 30s));
        auto changes = changes_of(handler, relid);
        CHECK(changes.size() - before == 3000 + 1000);
        for (std::size_t i = before; i < changes.size(); ++i)
            for (const auto& v : changes[i].new_values) CHECK(v.text != "rolled back");
        Lsn end = handler.with_lock([&] { return handler.commits.back().end_lsn; });
        CHECK(wait_for_confirmed(c, slot, end, 30s));
        runner.stop();
        CHECK(runner.error().empty());
        exec1(c, "TRUNCATE stream_pgo_big_t");
        drop_slot(c, slot);
    }
    exec1(c, "DROP PUBLICATION docsync_" + slot);
    exec1(c, "DROP TABLE stream_pgo_big_t");
}
