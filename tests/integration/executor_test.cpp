// The read-only executor against the real server: the doc and keys contracts, hostile doc queries,
// the pool role check, the visibility check on a primary and on a hot standby, lost connections.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.hpp"
#include "engine/definitions.hpp"
#include "executor/definitions_reader.hpp"
#include "executor/executor.hpp"
#include "executor_support.hpp"
#include "pg/connection.hpp"

using namespace docsync;
using namespace docsync::test;
using namespace std::chrono_literals;

namespace {

struct Fixture {
    pg::Connection db = admin();
    Fixture() {
        sql1(db, "SET client_min_messages = warning");
        sql1(db, "DROP SCHEMA IF EXISTS exec_t CASCADE");
        sql1(db, "CREATE SCHEMA exec_t");
        sql1(db, "CREATE TABLE exec_t.orders (id int PRIMARY KEY, status text)");
        sql1(db, "INSERT INTO exec_t.orders SELECT g, 'new' FROM generate_series(1, 10) g");
        sql1(db, "CREATE TABLE exec_t.items (id int PRIMARY KEY, order_id int, product_id int)");
        sql1(db, "INSERT INTO exec_t.items VALUES (1, 1, 77), (2, 2, 77), (3, 3, 78), (4, NULL, 77)");
    }
    ~Fixture() {
        try {
            sql1(db, "DROP SCHEMA IF EXISTS exec_t CASCADE");
        } catch (...) {
        }
    }
};

DocQuery doc_query(std::string sql, std::string search_path = "exec_t") {
    return DocQuery{"order", std::move(sql), {"order_id"}, std::move(search_path)};
}

const char* kOrderDoc = "SELECT jsonb_build_object('id', id, 'status', status) FROM orders WHERE id = $1";

}  // namespace

TEST_CASE("run_doc returns the doc, null for no row, with the stored search_path set locally") {
    Fixture f;
    Executor ex(executor_options());
    auto out = ex.run_doc(doc_query(kOrderDoc), {"3"}, {});
    REQUIRE(out.kind == OutcomeKind::Ok);
    CHECK(out.doc == std::optional<std::string>(R"({"id": 3, "status": "new"})"));
    auto none = ex.run_doc(doc_query(kOrderDoc), {"999"}, {});
    CHECK(none.kind == OutcomeKind::Ok);
    CHECK_FALSE(none.doc);
    auto null_value = ex.run_doc(doc_query("SELECT NULL::jsonb WHERE $1::int > 0"), {"1"}, {});
    CHECK(null_value.kind == OutcomeKind::Ok);
    CHECK_FALSE(null_value.doc);
    // SET LOCAL: the session's own search_path is untouched afterwards.
    auto path = ex.run_doc(doc_query("SELECT to_jsonb(current_setting('search_path')) WHERE $1::int > 0", ""), {"1"}, {});
    REQUIRE(path.kind == OutcomeKind::Ok);
    CHECK(path.doc->find("exec_t") == std::string::npos);
    // The transaction is REPEATABLE READ READ ONLY.
    auto iso = ex.run_doc(doc_query("SELECT jsonb_build_array(current_setting('transaction_isolation'), "
                                    "current_setting('transaction_read_only')) WHERE $1::int > 0"),
                          {"1"}, {});
    REQUIRE(iso.kind == OutcomeKind::Ok);
    CHECK(*iso.doc == R"(["repeatable read", "on"])");
}

TEST_CASE("doc contract violations are permanent outcomes that name the query") {
    Fixture f;
    Executor ex(executor_options());
    auto two_rows = ex.run_doc(doc_query("SELECT to_jsonb(id) FROM orders WHERE id <= $1"), {"2"}, {});
    CHECK(two_rows.kind == OutcomeKind::Permanent);
    CHECK(two_rows.error.find("\"order\"") != std::string::npos);
    CHECK(two_rows.error.find("more than one row") != std::string::npos);
    auto two_columns = ex.run_doc(doc_query("SELECT to_jsonb(id), status FROM orders WHERE id = $1"), {"2"}, {});
    CHECK(two_columns.kind == OutcomeKind::Permanent);
    CHECK(two_columns.error.find("exactly one column") != std::string::npos);
    auto not_json = ex.run_doc(doc_query("SELECT status FROM orders WHERE id = $1"), {"2"}, {});
    CHECK(not_json.kind == OutcomeKind::Permanent);
    CHECK(not_json.error.find("not valid JSON") != std::string::npos);
    auto big = ex.run_doc(doc_query("SELECT to_jsonb(repeat('x', 10 * 1024 * 1024)) WHERE $1::int > 0"), {"1"}, {});
    CHECK(big.kind == OutcomeKind::Permanent);
    CHECK(big.error.find("--max-doc-bytes") != std::string::npos);
    CHECK(big.error.find("10485762 bytes") != std::string::npos);
    auto none = ex.run_doc(doc_query("SELECT to_jsonb(id) FROM orders WHERE id = $1 AND false"), {"1"}, {});
    CHECK(none.kind == OutcomeKind::Ok);
    CHECK_FALSE(none.doc);
    auto null_doc = ex.run_doc(doc_query("SELECT NULL::jsonb WHERE $1::int > 0"), {"1"}, {});
    CHECK(null_doc.kind == OutcomeKind::Ok);
    CHECK_FALSE(null_doc.doc);
    // An error's text is the query's to make as long as it likes (an input function quotes its
    // input): the worker keeps 4 kB of it.
    auto long_error = ex.run_doc(doc_query("SELECT to_jsonb((repeat('x', 10 * 1024 * 1024) || $1)::int)"), {"1"}, {});
    CHECK(long_error.kind == OutcomeKind::Permanent);
    CHECK(long_error.error.size() < 8 * 1024);
    CHECK(long_error.error.find("bytes in all)") != std::string::npos);
    // Notices too: at most 100 a minute are printed, each cut to 4 kB.
    std::fflush(stderr);
    int saved = ::dup(2);
    std::string captured = "/tmp/docsync-notices-" + std::to_string(::getpid());
    int file = ::open(captured.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    REQUIRE(file >= 0);
    ::dup2(file, 2);
    auto noisy = ex.run_doc(doc_query("SELECT to_jsonb(count(pg_terminate_backend(0) IS NULL)) "
                                      "FROM generate_series(1, 5000 + $1::int)"),
                            {"1"}, {});
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    ::close(file);
    struct stat st {};
    ::stat(captured.c_str(), &st);
    ::unlink(captured.c_str());
    CHECK(noisy.kind == OutcomeKind::Ok);
    CHECK(st.st_size < 100 * 1024);
    auto error = ex.run_doc(doc_query("SELECT to_jsonb(1 / 0) WHERE $1::int > 0"), {"1"}, {});
    CHECK(error.kind == OutcomeKind::Permanent);
    CHECK(error.sqlstate == "22012");
    CHECK(error.error.find("\"order\"") != std::string::npos);
    // The pool is still healthy.
    CHECK(ex.run_doc(doc_query(kOrderDoc), {"1"}, {}).kind == OutcomeKind::Ok);
}

TEST_CASE("hostile doc queries cannot write, unpin the session, run long or keep locks") {
    Fixture f;
    ExecutorOptions o = executor_options();
    o.pool_size = 1;  // every compute reuses the one session
    Executor ex(o);
    auto write = ex.run_doc(doc_query("WITH w AS (INSERT INTO orders VALUES (100, 'evil') RETURNING id) "
                                      "SELECT to_jsonb(id) FROM w WHERE $1::int > 0"),
                            {"1"}, {});
    CHECK(write.kind == OutcomeKind::Permanent);
    // refused as a read-only transaction's write, or before it runs: a data-modifying WITH is not
    // at the top level of the statement the worker sends (bounded_forms.hpp)
    CHECK((write.sqlstate == "25006" || write.sqlstate == "0A000"));
    auto unpin = ex.run_doc(doc_query("WITH s AS (SELECT set_config('default_transaction_read_only', 'off', false)), "
                                      "w AS (INSERT INTO orders VALUES (101, 'evil') RETURNING id) "
                                      "SELECT to_jsonb(id) FROM w, s WHERE $1::int > 0"),
                            {"1"}, {});
    CHECK(unpin.kind == OutcomeKind::Permanent);
    auto unpin2 = ex.run_doc(doc_query("SELECT to_jsonb(set_config('default_transaction_read_only', 'off', false) "
                                       "|| set_config('statement_timeout', '0', false)) WHERE $1::int > 0"),
                             {"1"}, {});
    CHECK(unpin2.kind == OutcomeKind::Ok);  // allowed inside the transaction, undone by its ROLLBACK
    auto pinned = ex.run_doc(doc_query("SELECT jsonb_build_array(current_setting('default_transaction_read_only'), "
                                       "current_setting('statement_timeout')) WHERE $1::int > 0"),
                             {"1"}, {});
    REQUIRE(pinned.kind == OutcomeKind::Ok);
    CHECK(*pinned.doc == R"(["on", "1500ms"])");
    auto read_write = ex.run_doc(doc_query("SELECT to_jsonb(set_config('transaction_read_only', 'off', true)) "
                                           "WHERE $1::int > 0"),
                                 {"1"}, {});
    CHECK(read_write.kind == OutcomeKind::Permanent);
    CHECK(sql1(f.db, "SELECT count(*) FROM exec_t.orders WHERE id >= 100") == "0");

    auto started = std::chrono::steady_clock::now();
    auto sleep = ex.run_doc(doc_query("SELECT to_jsonb(pg_sleep(30)::text) WHERE $1::int > 0"), {"1"}, {});
    CHECK(sleep.kind == OutcomeKind::Transient);  // the environment's: it holds the slot
    CHECK(sleep.sqlstate == "57014");
    CHECK(sleep.error.find("timed out") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - started < 10s);

    auto lock = ex.run_doc(doc_query("SELECT to_jsonb(pg_advisory_lock(4242)::text) WHERE $1::int > 0"), {"1"}, {});
    CHECK(lock.kind == OutcomeKind::Ok);
    CHECK(sql1(f.db, "SELECT pg_try_advisory_lock(4242)") == "t");  // released by the compute
    sql1(f.db, "SELECT pg_advisory_unlock(4242)");
    CHECK(ex.run_doc(doc_query(kOrderDoc), {"1"}, {}).kind == OutcomeKind::Ok);
}

TEST_CASE("a refused definition or a statement that is not a SELECT never reaches the server") {
    Fixture f;
    Executor ex(executor_options("", true));
    auto refused = doc_query(kOrderDoc);
    refused.refused = "doc query \"order\" reads what its definer alice may not: permission denied for table orders";
    auto out = ex.run_doc(refused, {"1"}, {});
    CHECK(out.kind == OutcomeKind::Permanent);
    CHECK(out.error.find("is refused: doc query \"order\" reads what its definer alice may not") != std::string::npos);
    for (const char* sql : {"COPY (SELECT 1) TO STDOUT", "  /* x */ DELETE FROM orders RETURNING to_jsonb(id)",
                            "SET ROLE postgres"}) {
        CAPTURE(sql);
        auto o = ex.run_doc(doc_query(sql), {"1"}, {});
        CHECK(o.kind == OutcomeKind::Permanent);
        CHECK(o.error.find("is not a SELECT") != std::string::npos);
    }
    KeysQuery keys{"order", "SELECT 1", "exec_t", "exec_t.items", "its definer no longer exists"};
    auto k = ex.run_keys(keys, {"1"}, 10, {});
    CHECK(k.kind == OutcomeKind::Permanent);
    CHECK(k.error.find("is refused: its definer no longer exists") != std::string::npos);
    CHECK(ex.run_doc(doc_query("(SELECT to_jsonb($1::int))"), {"1"}, {}).kind == OutcomeKind::Ok);
}

TEST_CASE("run_keys returns each row's values and refuses to truncate at the cap") {
    Fixture f;
    Executor ex(executor_options());
    KeysQuery keys{"order", "SELECT order_id FROM items WHERE product_id = $1 ORDER BY id", "exec_t", "exec_t.products"};
    auto out = ex.run_keys(keys, {"77"}, 10, {});
    REQUIRE(out.kind == OutcomeKind::Ok);
    CHECK(out.keys == std::vector<SqlArgs>{{"1"}, {"2"}, {std::nullopt}});
    auto capped = ex.run_keys(keys, {"77"}, 2, {});
    CHECK(capped.kind == OutcomeKind::Permanent);
    CHECK(capped.keys.empty());
    CHECK(capped.error.find("--max-keys") != std::string::npos);
    CHECK(capped.error.find("exec_t.products") != std::string::npos);
    auto none = ex.run_keys(keys, {"1"}, 2, {});
    CHECK(none.kind == OutcomeKind::Ok);
    CHECK(none.keys.empty());
}

TEST_CASE("on a primary a compute waits until its snapshot sees every transaction it completes") {
    Fixture f;
    Executor ex(executor_options());
    auto writer = admin();
    writer.exec("BEGIN", pg::deadline_in(10s));
    writer.exec("UPDATE exec_t.orders SET status = 'paid' WHERE id = 5", pg::deadline_in(10s));
    std::uint64_t xid = std::stoull(sql1(writer, "SELECT pg_current_xact_id()::text"));
    Visibility need{{xid}, 0};
    // Still running: not in the snapshot.
    CHECK(ex.run_doc(doc_query(kOrderDoc), {"5"}, need).kind == OutcomeKind::NotVisible);
    CHECK(ex.run_keys(KeysQuery{"order", "SELECT 1", "", "t"}, {}, 10, need).kind == OutcomeKind::NotVisible);
    // A transaction past the snapshot's xmax.
    CHECK(ex.run_doc(doc_query(kOrderDoc), {"5"}, Visibility{{xid + 1000}, 0}).kind == OutcomeKind::NotVisible);
    writer.exec("COMMIT", pg::deadline_in(10s));
    auto out = ex.run_doc(doc_query(kOrderDoc), {"5"}, need);
    REQUIRE(out.kind == OutcomeKind::Ok);
    CHECK(out.doc == std::optional<std::string>(R"({"id": 5, "status": "paid"})"));
}

TEST_CASE("while snapshot checks fail, computes check first and run no doc query until one passes") {
    Fixture f;
    sql1(f.db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    Executor ex(executor_options());
    auto writer = admin();
    writer.exec("BEGIN", pg::deadline_in(10s));
    writer.exec("UPDATE exec_t.orders SET status = 'held' WHERE id = 6", pg::deadline_in(10s));
    std::uint64_t xid = std::stoull(sql1(writer, "SELECT pg_current_xact_id()::text"));
    // An alias pg_stat_statements keeps as written, to count this query's runs by.
    auto probe = doc_query("SELECT jsonb_build_object('id', id) AS check_first_probe FROM orders WHERE id = $1");
    auto runs = [&] {
        return sql1(f.db, "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%check_first_probe%'");
    };
    sql1(f.db, "SELECT pg_stat_statements_reset()");
    for (int i = 0; i < 5; ++i) CHECK(ex.run_doc(probe, {"6"}, {{xid}, 0}).kind == OutcomeKind::NotVisible);
    CHECK(runs() == "1");  // the first compute's, sent with its check in one exchange; none after it
    writer.exec("COMMIT", pg::deadline_in(10s));
    CHECK(ex.run_doc(probe, {"6"}, {{xid}, 0}).kind == OutcomeKind::Ok);  // checked first, then run
    CHECK(ex.run_doc(probe, {"6"}, {{xid}, 0}).kind == OutcomeKind::Ok);  // one exchange again
    CHECK(runs() == "3");
}

TEST_CASE("a lost pool connection is a transient outcome and is replaced") {
    Fixture f;
    ExecutorOptions o = executor_options();
    o.pool_size = 1;
    o.application_name = "docsync-exec-test-lost";
    Executor ex(o);
    REQUIRE(ex.run_doc(doc_query(kOrderDoc), {"1"}, {}).kind == OutcomeKind::Ok);
    CHECK(sql1(f.db, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = "
                     "'docsync-exec-test-lost'") == "1");
    std::this_thread::sleep_for(100ms);
    auto lost = ex.run_doc(doc_query(kOrderDoc), {"1"}, {});
    CHECK(lost.kind == OutcomeKind::Transient);
    OutcomeKind kind = OutcomeKind::Transient;
    for (int i = 0; i < 50 && kind != OutcomeKind::Ok; ++i) {
        std::this_thread::sleep_for(50ms);
        kind = ex.run_doc(doc_query(kOrderDoc), {"1"}, {}).kind;
    }
    CHECK(kind == OutcomeKind::Ok);
    CHECK(sql1(f.db, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'docsync-exec-test-lost'") == "1");
}

TEST_CASE("the pool role must be harmless unless --allow-unsafe-pool") {
    Fixture f;
    // The test cluster's own user is a superuser.
    try {
        Executor ex(executor_options("", false));
        FAIL("a superuser pool was accepted");
    } catch (const Error& e) {
        std::string m = e.what();
        CHECK(m.find("is a superuser") != std::string::npos);
        CHECK(m.find("--allow-unsafe-pool") != std::string::npos);
    }
    CHECK_NOTHROW(Executor(executor_options("", true)));

    ensure_reader_role(f.db, "docsync_exec_reader");
    sql1(f.db, "GRANT USAGE ON SCHEMA exec_t TO docsync_exec_reader");
    sql1(f.db, "GRANT SELECT ON exec_t.orders TO docsync_exec_reader");
    {
        Executor ex(executor_options("user=docsync_exec_reader", false));
        auto out = ex.run_doc(doc_query(kOrderDoc), {"2"}, {});
        CHECK(out.kind == OutcomeKind::Ok);
        auto denied = ex.run_doc(doc_query("SELECT to_jsonb(count(*)) FROM items WHERE $1::int > 0"), {"1"}, {});
        CHECK(denied.kind == OutcomeKind::Permanent);
        CHECK(denied.sqlstate == "42501");
    }
    ensure_reader_role(f.db, "docsync_exec_signaller");
    sql1(f.db, "GRANT pg_signal_backend TO docsync_exec_signaller");
    sql1(f.db, "ALTER ROLE docsync_exec_signaller BYPASSRLS");
    try {
        Executor ex(executor_options("user=docsync_exec_signaller", false));
        FAIL("an unsafe pool role was accepted");
    } catch (const Error& e) {
        std::string m = e.what();
        CHECK(m.find("pg_signal_backend") != std::string::npos);
        CHECK(m.find("BYPASSRLS") != std::string::npos);
        CHECK(m.find("docsync_exec_signaller") != std::string::npos);
    }
    // memberships are followed, and the message names the path
    ensure_reader_role(f.db, "docsync_exec_deep");
    sql1(f.db, "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'docsync_exec_mid') THEN "
               "CREATE ROLE docsync_exec_mid; END IF; END$$");
    sql1(f.db, "GRANT postgres TO docsync_exec_mid");
    sql1(f.db, "GRANT docsync_exec_mid TO docsync_exec_deep");
    try {
        Executor ex(executor_options("user=docsync_exec_deep", false));
        FAIL("a pool role two memberships from a superuser was accepted");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find(
                  "docsync_exec_deep is a member of docsync_exec_mid, which is a member of postgres, a superuser") !=
              std::string::npos);
    }
    sql1(f.db, "REVOKE docsync_exec_mid FROM docsync_exec_deep");
    sql1(f.db, "REVOKE postgres FROM docsync_exec_mid");
    // an owner bypasses grants: a pool role that owns a table is refused
    sql1(f.db, "CREATE TABLE exec_t.owned (id int)");
    sql1(f.db, "ALTER TABLE exec_t.owned OWNER TO docsync_exec_deep");
    try {
        Executor ex(executor_options("user=docsync_exec_deep", false));
        FAIL("a pool role that owns a table was accepted");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("docsync_exec_deep owns table exec_t.owned") != std::string::npos);
    }
    sql1(f.db, "DROP TABLE exec_t.owned");
    CHECK_NOTHROW(Executor(executor_options("user=docsync_exec_deep", false)));
    sql1(f.db, "REVOKE ALL ON SCHEMA exec_t FROM docsync_exec_reader");
    sql1(f.db, "REVOKE ALL ON exec_t.orders FROM docsync_exec_reader");
    sql1(f.db, "DROP ROLE docsync_exec_reader");
    sql1(f.db, "DROP ROLE docsync_exec_signaller");
    sql1(f.db, "DROP ROLE docsync_exec_deep");
    sql1(f.db, "DROP ROLE docsync_exec_mid");
}

TEST_CASE("on a hot standby a compute starts only after replay passed what it completes") {
    Fixture f;
    const char* primary = std::getenv("DOCSYNC_CLUSTER_DIR");
    REQUIRE_MESSAGE(primary, "DOCSYNC_CLUSTER_DIR is not set: run with the dev cluster's environment");
    std::string standby = run_command(std::string(DOCSYNC_SOURCE_DIR) + "/packaging/dev-cluster.sh standby '" +
                                      primary + "' 2>/dev/null");
    REQUIRE_MESSAGE(!standby.empty(), "could not create a standby");
    struct StopStandby {
        std::string dir;
        ~StopStandby() { run_command(std::string(DOCSYNC_SOURCE_DIR) + "/packaging/dev-cluster.sh stop '" + dir + "'"); }
    } stop{standby};
    std::string port = run_command(". '" + standby + "/cluster.env' && echo $PGPORT");
    std::string dsn = "host=" + standby + "/socket port=" + port;
    Executor ex(executor_options(dsn));
    CHECK(ex.standby());
    // A portable install's computes borrow their reader role by a GRANT, which a standby cannot run.
    ExecutorOptions lend = executor_options(dsn);
    lend.lend_reader = true;
    CHECK_THROWS_WITH_AS([&] { Executor refused(lend); }(), doctest::Contains("--pool-dsn reaches a hot standby, but a portable install computes on the primary"), Error);
    // Wait for the fixture's tables to be replayed.
    std::uint64_t lsn = *parse_lsn(sql1(f.db, "SELECT pg_current_wal_lsn()::text"));
    OutcomeKind kind = OutcomeKind::NotVisible;
    for (int i = 0; i < 200 && kind == OutcomeKind::NotVisible; ++i) {
        kind = ex.run_doc(doc_query(kOrderDoc), {"1"}, Visibility{{}, lsn}).kind;
        if (kind == OutcomeKind::NotVisible) std::this_thread::sleep_for(50ms);
    }
    CHECK(kind == OutcomeKind::Ok);
    // A position replay has not reached is not visible, whatever the (empty) xip says.
    CHECK(ex.run_doc(doc_query(kOrderDoc), {"1"}, Visibility{{}, lsn + (1ull << 32)}).kind == OutcomeKind::NotVisible);
    // A change committed on the primary becomes visible once replayed.
    sql1(f.db, "UPDATE exec_t.orders SET status = 'shipped' WHERE id = 1");
    std::uint64_t end = *parse_lsn(sql1(f.db, "SELECT pg_current_wal_lsn()::text"));
    DocOutcome out;
    for (int i = 0; i < 200; ++i) {
        out = ex.run_doc(doc_query(kOrderDoc), {"1"}, Visibility{{}, end});
        if (out.kind != OutcomeKind::NotVisible) break;
        std::this_thread::sleep_for(50ms);
    }
    REQUIRE(out.kind == OutcomeKind::Ok);
    CHECK(out.doc == std::optional<std::string>(R"({"id": 1, "status": "shipped"})"));
}

TEST_CASE("definitions are read from the extension, with a clear error when it is missing") {
    auto db = admin();
    sql1(db, "SET client_min_messages = warning");
    sql1(db, "DROP DATABASE IF EXISTS docsync_exec_nodefs");
    sql1(db, "CREATE DATABASE docsync_exec_nodefs");
    {
        auto other = pg::Connection::connect("dbname=docsync_exec_nodefs", pg::deadline_in(10s));
        try {
            read_definitions(other, pg::deadline_in(10s));
            FAIL("expected an error");
        } catch (const Error& e) {
            CHECK(std::string(e.what()).find("CREATE EXTENSION docsync") != std::string::npos);
        }
        // A stand-in with contract B's shape (docs/design.md), in a database without the extension.
        sql1(other, "CREATE SCHEMA docsync");
        sql1(other, R"(CREATE FUNCTION docsync.worker_definitions() RETURNS jsonb LANGUAGE sql AS $$
            SELECT '{"generation": 2, "queries": [{"name": "order", "sql": "SELECT 1", "params": ["id"],
              "search_path": "public"}], "watches": [{"query": "order", "relid": 16384, "schema": "public",
              "table": "orders", "columns": [{"name": "id", "attnum": 1}], "keys_sql": null, "keys_args": [],
              "allow_broadcast": false, "broadcast": false, "read_columns": null}]}'::jsonb $$)");
        auto defs = read_definitions(other, pg::deadline_in(10s));
        CHECK(defs.generation == 2);
        CHECK(plugin_tables(defs) == "16384(1)");
        sql1(other, R"(CREATE OR REPLACE FUNCTION docsync.worker_definitions() RETURNS jsonb LANGUAGE sql AS
            $$ SELECT '{"generation": 2}'::jsonb $$)");
        CHECK_THROWS_AS(read_definitions(other, pg::deadline_in(10s)), Error);
        // A replication role without EXECUTE on it is told the grant recipe; a role that may not
        // replicate either is the reader role given as --dsn, and is told the roles look swapped.
        sql1(other, "REVOKE ALL ON FUNCTION docsync.worker_definitions() FROM PUBLIC");
        sql1(other, "DROP ROLE IF EXISTS docsync_exec_nodefs_role");
        sql1(other, "CREATE ROLE docsync_exec_nodefs_role REPLICATION");
        sql1(other, "GRANT USAGE ON SCHEMA docsync TO docsync_exec_nodefs_role");
        sql1(other, "SET ROLE docsync_exec_nodefs_role");
        try {
            read_definitions(other, pg::deadline_in(10s));
            FAIL("expected an error");
        } catch (const Error& e) {
            CHECK(e.sqlstate() == "42501");
            CHECK(std::string(e.what()).find("docsync.grant_replication(") != std::string::npos);
        }
        sql1(other, "RESET ROLE");
        sql1(other, "ALTER ROLE docsync_exec_nodefs_role NOREPLICATION");
        sql1(other, "SET ROLE docsync_exec_nodefs_role");
        try {
            read_definitions(other, pg::deadline_in(10s));
            FAIL("expected an error");
        } catch (const Error& e) {
            CHECK(e.sqlstate() == "42501");
            CHECK(std::string(e.what()).find("look swapped") != std::string::npos);
        }
        sql1(other, "RESET ROLE");
    }
    sql1(db, "DROP DATABASE docsync_exec_nodefs");
    sql1(db, "DROP ROLE IF EXISTS docsync_exec_nodefs_role");
}

TEST_CASE("after definitions_changed, no compute uses a statement prepared before it") {
    // A table created in an earlier schema of the search_path shadows the one a prepared statement
    // was planned with; PostgreSQL does not re-plan the statement for it.
    Fixture f;
    sql1(f.db, "DROP SCHEMA IF EXISTS exec_s CASCADE");
    sql1(f.db, "CREATE SCHEMA exec_s");
    sql1(f.db, "GRANT USAGE ON SCHEMA exec_s TO PUBLIC");
    auto options = executor_options();
    options.pool_size = 1;
    Executor ex(options);
    auto query = doc_query(kOrderDoc, "exec_s, exec_t");
    auto before = ex.run_doc(query, {"3"}, {});
    REQUIRE(before.kind == OutcomeKind::Ok);
    CHECK(*before.doc == R"({"id": 3, "status": "new"})");
    sql1(f.db, "CREATE TABLE exec_s.orders (id int PRIMARY KEY, status text)");
    sql1(f.db, "INSERT INTO exec_s.orders VALUES (3, 'shadow')");
    sql1(f.db, "GRANT SELECT ON exec_s.orders TO PUBLIC");
    ex.definitions_changed();
    auto after = ex.run_doc(query, {"3"}, {});
    REQUIRE(after.kind == OutcomeKind::Ok);
    CHECK(*after.doc == R"({"id": 3, "status": "shadow"})");
    sql1(f.db, "DROP SCHEMA exec_s CASCADE");
}
