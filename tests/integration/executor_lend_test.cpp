// The executor over a portable install (docs/portable.md, compute_as): each compute borrows its
// definer's reader role by a GRANT in its own transaction, so the computes of one reader role take
// turns, in the executor rather than on the server (ExecutorOptions::lend_reader).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>

#include "executor/executor.hpp"
#include "executor_support.hpp"
#include "pg/connection.hpp"

using namespace docsync;
using namespace docsync::test;
using namespace std::chrono_literals;

namespace {

const char* kLendDb = "docsync_exec_lend";

// A database with the portable install (sql/docsync-portable.sql, built here), two definers with a
// slow doc query each, and grant_reader run for the pool role docsync_lend_pool.
struct PortableFixture {
    pg::Connection admin_db = admin();
    std::optional<pg::Connection> db;
    PortableFixture() {
        sql1(admin_db, "SET client_min_messages = warning");
        drop();
        sql1(admin_db, std::string("CREATE DATABASE ") + kLendDb);
        const char* bindir = std::getenv("DOCSYNC_PG_BINDIR");
        std::string psql = bindir ? std::string(bindir) + "/psql" : std::string("psql");
        std::string source = DOCSYNC_SOURCE_DIR;
        std::string script = "/tmp/docsync-exec-lend-" + std::to_string(::getpid()) + ".sql";
        std::string done = run_command("cd '" + source + "' && python3 sql/portable/build.py '" + script +
                                       "' --forms sql/portable sql/parts/*.sql && '" + psql +
                                       "' -X -q -v ON_ERROR_STOP=1 -d " + kLendDb + " -f '" + script +
                                       "' >/dev/null 2>&1 && echo installed; rm -f '" + script + "'");
        REQUIRE_MESSAGE(done == "installed", "the portable install failed");
        db.emplace(pg::Connection::connect(std::string("dbname=") + kLendDb, pg::deadline_in(10s)));
        sql1(*db, "SET client_min_messages = warning");
        for (const char* role : {"docsync_lend_pool", "docsync_lend_a", "docsync_lend_b"})
            ensure_reader_role(*db, role);
        sql1(*db, "CREATE TABLE t (id int PRIMARY KEY)");
        sql1(*db, "INSERT INTO t VALUES (1), (2)");
        sql1(*db, "GRANT docsync_admin TO docsync_lend_a, docsync_lend_b");
        sql1(*db, "GRANT USAGE ON SCHEMA docsync TO docsync_lend_a, docsync_lend_b");
        sql1(*db, "GRANT SELECT ON t TO docsync_lend_a, docsync_lend_b");
        for (const char* definer : {"docsync_lend_a", "docsync_lend_b"}) {
            sql1(*db, std::string("SET ROLE ") + definer);
            std::string name = std::string("slow_") + (definer + std::string(definer).size() - 1);
            sql1(*db, "SELECT docsync.define_query('" + name + "', 'SELECT to_jsonb(pg_catalog.pg_sleep(1.2) IS NULL) "
                      "FROM t WHERE id = $1', ARRAY['id'])");
            sql1(*db, "SELECT docsync.watch('" + name + "', 't', params => ARRAY['id'])");
            sql1(*db, "RESET ROLE");
        }
        sql1(*db, "SELECT count(*) FROM docsync.grant_reader('docsync_lend_pool')");
    }
    ~PortableFixture() {
        try {
            if (db) sql1(*db, "SELECT docsync._before_drop()");
            db.reset();
            drop();
            for (const char* role : {"docsync_lend_pool", "docsync_lend_a", "docsync_lend_b"})
                sql1(admin_db, std::string("DROP ROLE IF EXISTS ") + role);
        } catch (...) {
        }
    }
    void drop() { sql1(admin_db, std::string("DROP DATABASE IF EXISTS ") + kLendDb + " WITH (FORCE)"); }
};

DocQuery slow_query(const std::string& reader_role) {
    DocQuery q{"slow", "SELECT to_jsonb(pg_catalog.pg_sleep(1.2) IS NULL) FROM t WHERE id = $1", {"id"}, "public, pg_temp"};
    q.reader_role = reader_role;
    return q;
}

}  // namespace

TEST_CASE("portable: the computes of one reader role take turns in the executor, two reader roles run side by side") {
    PortableFixture f;
    ExecutorOptions options = executor_options(std::string("dbname=") + kLendDb + " user=docsync_lend_pool", false);
    options.check_reader = true;
    options.lend_reader = true;
    options.statement_timeout = 1500ms;  // one compute (1.2 s); its pipeline's deadline 2 s, not two computes
    Executor ex(options);
    auto both = [&](const std::string& first, const std::string& second) {
        DocOutcome a, b;
        auto started = std::chrono::steady_clock::now();
        std::thread t([&] { a = ex.run_doc(slow_query(first), {"1"}, {}); });
        b = ex.run_doc(slow_query(second), {"2"}, {});
        t.join();
        INFO("first: " << a.error << "; second: " << b.error);
        CHECK(a.kind == OutcomeKind::Ok);
        CHECK(b.kind == OutcomeKind::Ok);
        CHECK(a.doc == std::optional<std::string>("false"));
        return std::chrono::steady_clock::now() - started;
    };
    // Two lendings of one reader role wait for each other (pg_auth_members is unique on role and
    // member): on the server the second would wait with its statement timeout running and time
    // out; here it waits its turn first.
    auto one_role = both("docsync_reader_docsync_lend_a", "docsync_reader_docsync_lend_a");
    CHECK(one_role >= 2400ms);
    // Two reader roles: no turns, no wait.
    auto two_roles = both("docsync_reader_docsync_lend_a", "docsync_reader_docsync_lend_b");
    CHECK(two_roles < 2000ms);
    // The transaction is read-only from compute_as on, and the pool role a member of no reader role
    // after it.
    DocQuery ro{"ro", "SELECT to_jsonb(current_setting('transaction_read_only')) FROM t WHERE id = $1", {"id"},
                "public, pg_temp"};
    ro.reader_role = "docsync_reader_docsync_lend_a";
    auto out = ex.run_doc(ro, {"1"}, {});
    REQUIRE(out.kind == OutcomeKind::Ok);
    CHECK(out.doc == std::optional<std::string>("\"on\""));
    CHECK(sql1(*f.db, "SELECT count(*) FROM pg_auth_members WHERE member = 'docsync_lend_pool'::regrole") == "0");
}

TEST_CASE("portable: a doc query that replaces the pool's prepared statements never runs as another reader role") {
    PortableFixture f;
    // Prepared statements outlive the compute's ROLLBACK, and a query may PREPARE and DEALLOCATE: this
    // one replaces every statement on its connection whose text is the victim's doc query.
    sql1(*f.db, R"(CREATE FUNCTION public.replace_statements() RETURNS int LANGUAGE plpgsql AS $f$
        DECLARE s record; n int := 0;
        BEGIN
          FOR s IN SELECT name FROM pg_catalog.pg_prepared_statements
                    WHERE statement = 'SELECT to_jsonb(id) FROM t WHERE id = $1' LOOP
            EXECUTE pg_catalog.format('DEALLOCATE %I', s.name);
            EXECUTE pg_catalog.format('PREPARE %I(int) AS SELECT to_jsonb(''replaced''::text) WHERE $1 IS NOT NULL', s.name);
            n := n + 1;
          END LOOP;
          RETURN n;
        END $f$)");
    ExecutorOptions options = executor_options(std::string("dbname=") + kLendDb + " user=docsync_lend_pool", false);
    options.pool_size = 1;  // one connection: every compute on the session the other one left
    options.check_reader = true;
    options.lend_reader = true;
    Executor ex(options);
    DocQuery victim{"victim", "SELECT to_jsonb(id) FROM t WHERE id = $1", {"id"}, "public, pg_temp"};
    victim.reader_role = "docsync_reader_docsync_lend_a";
    DocQuery replacer{"replacer", "SELECT to_jsonb(public.replace_statements()) FROM t WHERE id = $1", {"id"},
                      "public, pg_temp"};
    replacer.reader_role = "docsync_reader_docsync_lend_b";
    for (int round = 0; round < 3; ++round) {
        auto v = ex.run_doc(victim, {"1"}, {});
        REQUIRE(v.kind == OutcomeKind::Ok);
        CHECK(v.doc == std::optional<std::string>("1"));  // its own query, as its own reader role
        auto r = ex.run_doc(replacer, {"1"}, {});
        REQUIRE(r.kind == OutcomeKind::Ok);
        CHECK(r.doc == std::optional<std::string>("0"));  // the worker left no statement of its own prepared
    }
}

TEST_CASE("portable: a doc query cannot act as the pool role, not even for a moment") {
    PortableFixture f;
    // Each switches to the session's own role (the pool role), notes who it is there, and switches
    // back before the query ends, where the worker's reader check would see nothing amiss.
    sql1(*f.db, R"(CREATE FUNCTION public.as_pool_by_set_config() RETURNS text LANGUAGE plpgsql AS $f$
        DECLARE me text := current_user; there text;
        BEGIN
          PERFORM pg_catalog.set_config('role', 'none', true);
          there := current_user;
          PERFORM pg_catalog.set_config('role', me, true);
          RETURN there;
        END $f$)");
    sql1(*f.db, R"(CREATE FUNCTION public.as_pool_by_reset() RETURNS text LANGUAGE plpgsql AS $f$
        DECLARE me text := current_user; there text;
        BEGIN
          RESET ROLE;
          there := current_user;
          EXECUTE pg_catalog.format('SET LOCAL ROLE %I', me);
          RETURN there;
        END $f$)");
    ExecutorOptions options = executor_options(std::string("dbname=") + kLendDb + " user=docsync_lend_pool", false);
    options.check_reader = true;
    options.lend_reader = true;
    Executor ex(options);
    for (const char* fn : {"as_pool_by_set_config", "as_pool_by_reset"}) {
        DocQuery q{"sneak", std::string("SELECT to_jsonb(public.") + fn + "()) FROM t WHERE id = $1", {"id"},
                   "public, pg_temp"};
        q.reader_role = "docsync_reader_docsync_lend_a";
        auto out = ex.run_doc(q, {"1"}, {});
        INFO(std::string(fn) << ": " << out.error << " " << (out.doc ? *out.doc : std::string("(no doc)")));
        CHECK(out.kind == OutcomeKind::Permanent);
        CHECK_FALSE(out.doc);
        CHECK(out.error.find("cannot set parameter \"role\" within security-definer function") != std::string::npos);
    }
    // Docs and keys as the reader role still compute: a param that needs quoting, no row, NULL and
    // an empty text.
    DocQuery plain{"plain", "SELECT jsonb_build_object('id', id, 'who', current_user, 'p', $2::text) FROM t WHERE id = $1",
                   {"id", "p"}, "public, pg_temp"};
    plain.reader_role = "docsync_reader_docsync_lend_a";
    auto out = ex.run_doc(plain, {"2", std::string("a'b\"c, (x) \\ y")}, {});
    INFO(out.error);
    REQUIRE(out.kind == OutcomeKind::Ok);
    CHECK(out.doc == std::optional<std::string>(R"({"p": "a'b\"c, (x) \\ y", "id": 2, "who": "docsync_reader_docsync_lend_a"})"));
    auto none = ex.run_doc(plain, {"3", std::nullopt}, {});
    CHECK(none.kind == OutcomeKind::Ok);
    CHECK_FALSE(none.doc);
    KeysQuery keys_query{"plain", "SELECT id, NULL::text, ''::text FROM t WHERE id >= $1 ORDER BY id", "public, pg_temp",
                         "public.t", "", "", "docsync_reader_docsync_lend_a"};
    auto keys = ex.run_keys(keys_query, {"1"}, 100, {});
    INFO(keys.error);
    REQUIRE(keys.kind == OutcomeKind::Ok);
    CHECK(keys.keys == std::vector<SqlArgs>{{"1", std::nullopt, ""}, {"2", std::nullopt, ""}});
}
