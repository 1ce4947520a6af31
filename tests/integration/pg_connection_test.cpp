// pg::Connection against the real server: results, SQLSTATEs, transient classification, deadlines.
#include <doctest/doctest.h>

#include <chrono>

#include "pg/connection.hpp"

using namespace std::chrono_literals;
using docsync::Error;
using docsync::pg::Connection;
using docsync::pg::deadline_in;

TEST_CASE("a query returns its rows and parameters travel as text, NULL included") {
    auto c = Connection::connect("", deadline_in(10s));
    auto r = c.exec("SELECT $1::int + 1, $2::text IS NULL", {"41", std::nullopt}, deadline_in(10s));
    REQUIRE(r.rows() == 1);
    CHECK(r.get(0, 0) == "42");
    CHECK(r.get(0, 1) == "t");
}

TEST_CASE("a server error carries its SQLSTATE and is permanent") {
    auto c = Connection::connect("", deadline_in(10s));
    try {
        c.exec("SELECT 1/0", deadline_in(10s));
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.sqlstate() == "22012");
        CHECK_FALSE(e.transient());
    }
    CHECK(c.exec("SELECT 1", deadline_in(10s)).rows() == 1);  // the connection is still usable
}

TEST_CASE("the client-side deadline cancels a long statement") {
    auto c = Connection::connect("", deadline_in(10s));
    auto started = std::chrono::steady_clock::now();
    try {
        c.exec("SELECT pg_sleep(30)", deadline_in(300ms));
        FAIL("expected a timeout");
    } catch (const Error& e) {
        CHECK(e.sqlstate() == "57014");
        CHECK(e.transient());
    }
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    CHECK(c.exec("SELECT 1", deadline_in(10s)).rows() == 1);
}

TEST_CASE("a pipeline answers every statement in order, in one exchange") {
    auto c = Connection::connect("", deadline_in(10s));
    auto steps = c.pipeline({{"BEGIN", {}},
                             {"SELECT $1::int * 2", {"21"}},
                             {"SELECT current_setting('transaction_isolation')", {}, true},
                             {"ROLLBACK", {}, true}},
                            deadline_in(10s));
    REQUIRE(steps.size() == 4);
    for (const auto& step : steps) CHECK_FALSE(step.error);
    CHECK(steps[1].result.get(0, 0) == "42");
    CHECK(steps[2].result.get(0, 0) == "read committed");
    CHECK(c.exec("SELECT 1", deadline_in(10s)).rows() == 1);  // out of pipeline mode again
}

TEST_CASE("a prepared statement is planned once and reused, one that fails to prepare is not kept") {
    auto c = Connection::connect("", deadline_in(10s));
    docsync::pg::Statement twice{"SELECT $1::int * 2", {"21"}, true, true};
    for (int i = 0; i < 3; ++i) {
        auto steps = c.pipeline({twice}, deadline_in(10s));
        REQUIRE_FALSE(steps[0].error);
        CHECK(steps[0].result.get(0, 0) == "42");
    }
    CHECK(c.prepared_count() == 1);
    CHECK(c.exec("SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT $1::int * 2'", deadline_in(10s))
              .get(0, 0) == "1");
    // A statement the server cannot prepare fails with the server's error and is not kept; in a
    // group after a failed statement, one is not prepared either.
    auto bad = c.pipeline({{"SELECT no_such_column FROM pg_class", {}, true, true}}, deadline_in(10s));
    REQUIRE(bad[0].error);
    CHECK(bad[0].error->sqlstate() == "42703");
    auto skipped = c.pipeline({{"SELECT 1/0", {}}, {"SELECT 3", {}, true, true}}, deadline_in(10s));
    REQUIRE(skipped[1].error);
    CHECK(c.prepared_count() == 1);
    auto again = c.pipeline({{"SELECT 3", {}, true, true}}, deadline_in(10s));
    REQUIRE_FALSE(again[0].error);
    CHECK(again[0].result.get(0, 0) == "3");
    CHECK(c.prepared_count() == 2);
}

TEST_CASE("DDL that changes a prepared statement's result is one transient failure, then it is prepared again") {
    auto admin = Connection::connect("", deadline_in(10s));
    admin.exec("DROP TABLE IF EXISTS prepared_ddl", deadline_in(10s));
    admin.exec("CREATE TABLE prepared_ddl (a int)", deadline_in(10s));
    admin.exec("INSERT INTO prepared_ddl VALUES (1)", deadline_in(10s));
    auto c = Connection::connect("", deadline_in(10s));
    docsync::pg::Statement all{"SELECT * FROM prepared_ddl", {}, true, true};
    auto before = c.pipeline({all}, deadline_in(10s));
    REQUIRE_FALSE(before[0].error);
    CHECK(before[0].result.columns() == 1);
    admin.exec("ALTER TABLE prepared_ddl ADD COLUMN b text DEFAULT 'x'", deadline_in(10s));
    auto changed = c.pipeline({all}, deadline_in(10s));
    REQUIRE(changed[0].error);
    CHECK(changed[0].error->transient());
    CHECK(std::string(changed[0].error->what()).find("prepared again") != std::string::npos);
    auto after = c.pipeline({all}, deadline_in(10s));
    REQUIRE_FALSE(after[0].error);
    CHECK(after[0].result.columns() == 2);
    CHECK(after[0].result.get(0, 1) == "x");
    // A session that lost its prepared statements (DEALLOCATE ALL, as a pooler's reset does).
    c.exec("DEALLOCATE ALL", deadline_in(10s));
    auto gone = c.pipeline({all}, deadline_in(10s));
    REQUIRE(gone[0].error);
    CHECK(gone[0].error->transient());
    auto back = c.pipeline({all}, deadline_in(10s));
    CHECK_FALSE(back[0].error);
    // A query's own 0A000 is no reason to retry it for ever: once prepared afresh, it stands.
    docsync::pg::Statement unsupported{"SELECT CASE WHEN a > 0 THEN generate_series(1, 2) END FROM prepared_ddl",
                                       {}, true, true};
    auto own = c.pipeline({unsupported}, deadline_in(10s));
    REQUIRE(own[0].error);
    CHECK(own[0].error->sqlstate() == "0A000");
    CHECK_FALSE(own[0].error->transient());
    admin.exec("DROP TABLE prepared_ddl", deadline_in(10s));
}

TEST_CASE("a failed statement skips the rest of its group, and the next group runs") {
    auto c = Connection::connect("", deadline_in(10s));
    auto steps = c.pipeline({{"BEGIN", {}},
                             {"SELECT 1/0", {}},
                             {"SELECT 'not run'", {}, true},
                             {"ROLLBACK", {}},
                             {"SELECT pg_advisory_unlock_all()", {}, true}},
                            deadline_in(10s));
    REQUIRE(steps[1].error);
    CHECK(steps[1].error->sqlstate() == "22012");
    REQUIRE(steps[2].error);
    CHECK(steps[2].error->sqlstate().empty());
    CHECK_FALSE(steps[3].error);
    CHECK_FALSE(steps[4].error);
    CHECK(c.exec("SELECT pg_current_xact_id_if_assigned() IS NULL", deadline_in(10s)).get(0, 0) == "t");
}

TEST_CASE("the client-side deadline cancels a pipeline's long statement, and its cleanup group still runs") {
    auto c = Connection::connect("", deadline_in(10s));
    auto started = std::chrono::steady_clock::now();
    auto steps = c.pipeline({{"BEGIN", {}},
                             {"SELECT pg_advisory_lock(42), pg_sleep(30)", {}, true},
                             {"ROLLBACK", {}},
                             {"SELECT pg_advisory_unlock_all()", {}, true}},
                            deadline_in(300ms));
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    REQUIRE(steps[1].error);
    CHECK(steps[1].error->sqlstate() == "57014");
    CHECK(steps[1].error->transient());
    CHECK_FALSE(steps[2].error);
    CHECK_FALSE(steps[3].error);
    CHECK(c.exec("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
                 deadline_in(10s))
              .get(0, 0) == "0");
}

TEST_CASE("a statement that starts a COPY ends a pipeline with an error instead of hanging it") {
    auto c = Connection::connect("", deadline_in(10s));
    try {
        c.pipeline({{"COPY (SELECT 1) TO STDOUT", {}, true}}, deadline_in(10s));
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.sqlstate() == "0A000");
        CHECK(e.transient());  // the connection is dropped and replaced
    }
}

TEST_CASE("a pipeline must end with a sync") {
    auto c = Connection::connect("", deadline_in(10s));
    CHECK_THROWS_AS(c.pipeline({{"SELECT 1", {}}}, deadline_in(10s)), Error);
    CHECK(c.exec("SELECT 1", deadline_in(10s)).rows() == 1);
}

TEST_CASE("a terminated session is a transient error") {
    auto c = Connection::connect("", deadline_in(10s));
    auto other = Connection::connect("", deadline_in(10s));
    std::string pid(c.exec("SELECT pg_backend_pid()", deadline_in(10s)).get(0, 0));
    other.exec("SELECT pg_terminate_backend($1::int)", {pid}, deadline_in(10s));
    try {
        for (int i = 0; i < 50; ++i) c.exec("SELECT pg_sleep(0.05)", deadline_in(10s));
        FAIL("expected the connection to be gone");
    } catch (const Error& e) {
        CHECK(e.transient());
    }
}

TEST_CASE("connecting to nothing fails quickly with a clear message") {
    CHECK_THROWS_AS(Connection::connect("host=127.0.0.1 port=1 connect_timeout=2", deadline_in(5s)), Error);
}

TEST_CASE("a statement that starts a COPY is an error, ended at once, and the connection stays usable") {
    auto c = Connection::connect("", deadline_in(10s));
    c.exec("CREATE TEMP TABLE copy_target (v int)", deadline_in(10s));
    // COPY … TO STDOUT streamed a million rows, and a COPY … FROM STDIN waited for data that never
    // came: each would spin or hang past every deadline had the result not been ended.
    for (const char* sql : {"COPY (SELECT g FROM generate_series(1, 1000000) g) TO STDOUT", "COPY copy_target FROM STDIN"}) {
        CAPTURE(sql);
        auto started = std::chrono::steady_clock::now();
        try {
            c.exec(sql, deadline_in(10s));
            FAIL("expected an error");
        } catch (const Error& e) {
            CHECK(e.sqlstate() == "0A000");
            CHECK_FALSE(e.transient());
            CHECK(std::string(e.what()).find("COPY") != std::string::npos);
        }
        CHECK(std::chrono::steady_clock::now() - started < 8s);
        CHECK(c.exec("SELECT count(*) FROM copy_target", deadline_in(10s)).get(0, 0) == "0");
    }
}
