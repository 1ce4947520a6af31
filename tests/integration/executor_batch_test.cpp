// Batched computes against the real server: the extension's batched form of a doc query, run by
// the executor for many docs in one statement, gives each doc exactly what computing it alone gives,
// for queries that use a param several times, with casts and in subqueries; and a batch is checked
// once for what all of its docs complete.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/seams.hpp"
#include "executor/executor.hpp"
#include "executor_support.hpp"
#include "pg/connection.hpp"
#include "../unit/log_capture.hpp"

using namespace docsync;
using namespace docsync::test;
using namespace std::chrono_literals;

namespace {

struct Fixture {
    pg::Connection db = admin();
    Fixture() {
        sql1(db, "SET client_min_messages = warning");
        sql1(db, "DROP SCHEMA IF EXISTS exec_b CASCADE");
        sql1(db, "CREATE SCHEMA exec_b");
        sql1(db, "CREATE TABLE exec_b.customers (id int PRIMARY KEY, name text)");
        sql1(db, "INSERT INTO exec_b.customers SELECT g, 'customer ' || g FROM generate_series(1, 3) g");
        sql1(db, "CREATE TABLE exec_b.orders (id int PRIMARY KEY, customer_id int, status text)");
        sql1(db, "INSERT INTO exec_b.orders SELECT g, 1 + g % 3, 'new' FROM generate_series(1, 12) g");
        sql1(db, "CREATE TABLE exec_b.items (id int PRIMARY KEY, order_id int, qty int)");
        sql1(db, "INSERT INTO exec_b.items SELECT g, 1 + g % 8, g % 4 FROM generate_series(1, 30) g");
        sql1(db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    }
    ~Fixture() {
        try {
            sql1(db, "DROP SCHEMA IF EXISTS exec_b CASCADE");
        } catch (...) {
        }
    }
    DocQuery query(const std::string& name, const std::string& sql, std::vector<std::string> params) {
        DocQuery q{name, sql, std::move(params), "exec_b"};
        q.batch_sql = batch_sql(db, sql, "exec_b");
        return q;
    }
    std::int64_t calls(const std::string& marker) {
        return std::stoll(sql1(db, "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query LIKE '%" +
                                       marker + "%' AND query NOT LIKE '%pg_stat_statements%'"));
    }
};

}  // namespace

TEST_CASE("a batched compute gives each doc what computing it alone gives: repeated params, casts, subqueries") {
    Fixture f;
    Executor ex(executor_options());
    std::vector<DocQuery> queries = {
        f.query("repeated",
                "SELECT jsonb_build_object('id', $1::int, 'twice', $1::int * 2, 'status',"
                " (SELECT status FROM orders WHERE id = $1)) AS batch_marker_repeated WHERE $1::int % 5 <> 0",
                {"id"}),
        f.query("casts",
                "SELECT jsonb_build_object('order', o.id, 'customer', $2::text) AS batch_marker_casts FROM orders o"
                " WHERE o.id = CAST($1 AS bigint) AND o.customer_id::text = $2",
                {"id", "customer"}),
        f.query("subqueries",
                "SELECT jsonb_build_object('id', o.id, 'items', (SELECT coalesce(jsonb_agg(i.qty ORDER BY i.id), '[]')"
                " FROM items i WHERE i.order_id = $1), 'big', EXISTS (SELECT FROM items WHERE order_id = $1 AND qty > 2),"
                " 'customer', c.name) AS batch_marker_subqueries FROM orders o JOIN LATERAL (SELECT name FROM customers"
                " WHERE id = o.customer_id) c ON true WHERE o.id IN (SELECT $1)",
                {"id"}),
        f.query("cte",
                "WITH o AS (SELECT * FROM orders WHERE id = $1), n AS (SELECT count(*) AS n FROM items, o"
                " WHERE items.order_id = o.id) SELECT jsonb_build_object('o', to_jsonb(o), 'n', n.n)"
                " AS batch_marker_cte FROM o, n",
                {"id"}),
    };
    for (const auto& q : queries) {
        INFO(q.name);
        REQUIRE_FALSE(q.batch_sql.empty());
        std::vector<SqlArgs> args;
        for (int id = 1; id <= 13; ++id) {
            SqlArgs a{std::to_string(id)};
            if (q.params.size() == 2) a.push_back(std::to_string(1 + id % 3));
            args.push_back(a);
        }
        args.push_back(q.params.size() == 2 ? SqlArgs{"2", "nobody"} : SqlArgs{"999"});
        sql1(f.db, "SELECT pg_stat_statements_reset()");
        auto batch = ex.run_docs(q, args, {});
        CHECK(f.calls("batch_marker_" + q.name) == 1);  // one statement for every doc
        REQUIRE_FALSE(batch.split);
        REQUIRE(batch.outcomes.size() == args.size());
        int docs = 0;
        for (std::size_t i = 0; i < args.size(); ++i) {
            auto alone = ex.run_doc(q, args[i], {});
            INFO("doc " << i);
            CHECK(batch.outcomes[i].kind == OutcomeKind::Ok);
            CHECK(alone.kind == OutcomeKind::Ok);
            CHECK(batch.outcomes[i].doc == alone.doc);
            CHECK(batch.outcomes[i].snapshot_lsn > 0);
            docs += alone.doc.has_value();
        }
        CHECK(docs >= 8);  // the comparison is not of empty results
    }
}

namespace {

// This process's resident set, or its peak since reset_peak_rss(), in kB (/proc/self/status).
long rss_kb(const std::string& field) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
    return -1;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace

TEST_CASE("a doc over --max-doc-bytes is measured on the server and never reaches the worker") {
    // libpq holds a statement's whole result before anything reads it: a 64 MB doc received, then
    // refused, would raise this process's peak by at least that much.
    Fixture f;
    ExecutorOptions o = executor_options();
    o.pool_size = 1;
    o.statement_timeout = 60s;  // the server takes its time to make the doc
    Executor ex(o);
    auto q = f.query("big",
                     "SELECT CASE WHEN o.id = 2 THEN to_jsonb(repeat('x', 64 * 1024 * 1024)) "
                     "ELSE jsonb_build_object('id', o.id) END FROM orders o WHERE o.id = $1",
                     {"id"});
    REQUIRE(ex.run_doc(q, {"1"}, {}).kind == OutcomeKind::Ok);  // the connection is made
    reset_peak_rss();
    long before = rss_kb("VmRSS");
    REQUIRE(before > 0);
    auto big = ex.run_doc(q, {"2"}, {});
    long peak = rss_kb("VmHWM");
    INFO(big.error);
    CHECK(big.kind == OutcomeKind::Permanent);
    CHECK(big.error.find("67108866 bytes, over --max-doc-bytes (1048576)") != std::string::npos);
    INFO("peak " << peak << " kB, " << before << " kB before");
    CHECK(peak - before < 32 * 1024);
    // The same in a batch: the doc over the cap fails alone, and is not received either.
    reset_peak_rss();
    before = rss_kb("VmRSS");
    auto batch = ex.run_docs(q, {{"1"}, {"2"}, {"3"}}, {});
    peak = rss_kb("VmHWM");
    INFO(batch.error);
    REQUIRE(batch.outcomes.size() == 3);
    CHECK(batch.outcomes[0].kind == OutcomeKind::Ok);
    CHECK(batch.outcomes[1].kind == OutcomeKind::Permanent);
    CHECK(batch.outcomes[1].error.find("67108866 bytes") != std::string::npos);
    CHECK(batch.outcomes[2].kind == OutcomeKind::Ok);
    INFO("batch: peak " << peak << " kB, " << before << " kB before");
    CHECK(peak - before < 32 * 1024);
    // A key row is bounded too (its record's text: every column, whatever the query names them),
    // alone and batched.
    KeysQuery keys{"big",
                   "SELECT 'c'::text AS docsync_k, repeat('k', 64 * 1024 * 1024) || $1::text UNION ALL SELECT 'c', $1::text",
                   "exec_b", "exec_b.orders"};
    keys.batch_sql = batch_sql(f.db, keys.sql, "exec_b");
    reset_peak_rss();
    before = rss_kb("VmRSS");
    auto wide = ex.run_keys(keys, {"1"}, 100, {});
    auto wide_batch = ex.run_keys_batch(keys, {{"1"}, {"2"}}, 100, {});
    peak = rss_kb("VmHWM");
    INFO(wide.error);
    CHECK(wide.kind == OutcomeKind::Permanent);
    CHECK(wide.error.find("a key row of 67108869 bytes, over 4096") != std::string::npos);
    CHECK((wide_batch.split || (!wide_batch.outcomes.empty() && wide_batch.outcomes[0].kind == OutcomeKind::Permanent)));
    INFO("keys: peak " << peak << " kB, " << before << " kB before");
    CHECK(peak - before < 32 * 1024);
    // Batched lookups hold no more than one lookup may (--max-keys + 1 rows of 4 kB): 16 lookups of
    // 1 000 keys of 4 000 bytes, 64 MB together, run apart instead, each within its own bound.
    KeysQuery many{"big", "SELECT $1::text || g AS k, repeat('k', 4000) AS pad FROM generate_series(1, 1000) g",
                   "exec_b", "exec_b.orders"};
    many.batch_sql = batch_sql(f.db, many.sql, "exec_b");
    REQUIRE_FALSE(many.batch_sql.empty());
    std::vector<SqlArgs> sets;
    for (int i = 0; i < 16; ++i) sets.push_back({std::to_string(i)});
    reset_peak_rss();
    before = rss_kb("VmRSS");
    auto many_batch = ex.run_keys_batch(many, sets, 1000, {});
    peak = rss_kb("VmHWM");
    INFO(many_batch.error);
    CHECK(many_batch.split);
    CHECK(many_batch.error.find("over 4100096 in one statement") != std::string::npos);
    INFO("many keys: peak " << peak << " kB, " << before << " kB before");
    CHECK(peak - before < 32 * 1024);
    // One lookup holds its 1 000 keys; a batch within the bound runs whole.
    auto one = ex.run_keys(many, {"7"}, 1000, {});
    CHECK(one.kind == OutcomeKind::Ok);
    CHECK(one.keys.size() == 1000);
    KeysQuery small{"small", "SELECT $1::text || g AS k FROM generate_series(1, 1000) g", "exec_b", "exec_b.orders"};
    small.batch_sql = batch_sql(f.db, small.sql, "exec_b");
    auto small_batch = ex.run_keys_batch(small, sets, 1000, {});
    CHECK_FALSE(small_batch.split);
    REQUIRE(small_batch.outcomes.size() == sets.size());
    for (const auto& lookup : small_batch.outcomes) CHECK(lookup.keys.size() == 1000);
}

TEST_CASE("in a batch, a doc whose query raises, returns two rows or is over --max-doc-bytes fails alone") {
    Fixture f;
    ExecutorOptions o = executor_options();
    o.max_doc_bytes = 1000;
    Executor ex(o);
    auto q = f.query("mixed",
                     "SELECT CASE WHEN o.id = 7 THEN to_jsonb(repeat('x', 2000)) ELSE jsonb_build_object('id', o.id) END"
                     " FROM orders o, generate_series(1, CASE WHEN o.id = 5 THEN 2 ELSE 1 END) WHERE o.id = $1",
                     {"id"});
    std::vector<SqlArgs> args;
    for (int id = 1; id <= 8; ++id) args.push_back({std::to_string(id)});
    auto batch = ex.run_docs(q, args, {});
    REQUIRE_FALSE(batch.split);
    REQUIRE(batch.outcomes.size() == 8);
    for (int id = 1; id <= 8; ++id) {
        const auto& out = batch.outcomes[static_cast<std::size_t>(id - 1)];
        INFO(id << ": " << out.error);
        if (id == 5) {
            CHECK(out.kind == OutcomeKind::Permanent);
            CHECK(out.error.find("more than one row") != std::string::npos);
        } else if (id == 7) {
            CHECK(out.kind == OutcomeKind::Permanent);
            CHECK(out.error.find("--max-doc-bytes") != std::string::npos);
        } else {
            CHECK(out.kind == OutcomeKind::Ok);
            CHECK(out.doc == std::optional<std::string>("{\"id\": " + std::to_string(id) + "}"));
        }
    }
    // A query error fails the statement as a whole: the engine splits it (engine tests, and the
    // end-to-end test in executor_engine_test.cpp).
    auto raising = f.query("raising", "SELECT to_jsonb(10 / (o.id - 3)) FROM orders o WHERE o.id = $1", {"id"});
    auto failed = ex.run_docs(raising, args, {});
    CHECK(failed.split);
    CHECK(failed.error.find("division by zero") != std::string::npos);
    auto without = ex.run_docs(raising, {{"1"}, {"2"}, {"4"}}, {});
    REQUIRE(without.outcomes.size() == 3);
    CHECK(without.outcomes[2].doc == std::optional<std::string>("10"));
}

TEST_CASE("a batch that needs a transaction not yet visible runs no doc and is retried whole") {
    Fixture f;
    Executor ex(executor_options());
    auto q = f.query("order", "SELECT jsonb_build_object('id', id, 'status', status) FROM orders WHERE id = $1", {"id"});
    auto writer = admin();
    writer.exec("BEGIN", pg::deadline_in(10s));
    writer.exec("UPDATE exec_b.orders SET status = 'paid' WHERE id = 5", pg::deadline_in(10s));
    std::uint64_t xid = std::stoull(sql1(writer, "SELECT pg_current_xact_id()::text"));
    std::vector<SqlArgs> args{{"4"}, {"5"}, {"6"}};
    auto early = ex.run_docs(q, args, Visibility{{xid}, 0});
    REQUIRE(early.outcomes.size() == 3);
    for (const auto& out : early.outcomes) {
        CHECK(out.kind == OutcomeKind::NotVisible);
        CHECK_FALSE(out.doc);
    }
    writer.exec("COMMIT", pg::deadline_in(10s));
    auto later = ex.run_docs(q, args, Visibility{{xid}, 0});
    REQUIRE(later.outcomes.size() == 3);
    CHECK(later.outcomes[1].doc == std::optional<std::string>(R"({"id": 5, "status": "paid"})"));
}

TEST_CASE("a batched form the server cannot run falls back to one doc per statement, for good") {
    Fixture f;
    LogCapture log;
    Executor ex(executor_options());
    auto q = f.query("limited", "SELECT to_jsonb(id) AS batch_marker_limited FROM orders WHERE id = $1", {"id"});
    // What a batched form the server refuses looks like (the extension leaves a form out where it
    // knows of none; this one stands for one it does not know of).
    q.batch_sql = "SELECT no_such_function($1)";
    std::vector<SqlArgs> args{{"1"}, {"2"}};
    auto out = ex.run_docs(q, args, {});
    REQUIRE(out.outcomes.size() == 2);
    CHECK(out.outcomes[0].doc == std::optional<std::string>("1"));
    CHECK(out.outcomes[1].doc == std::optional<std::string>("2"));
    CHECK(log.count("doc query \"limited\" cannot run batched") == 1);
    sql1(f.db, "SELECT pg_stat_statements_reset()");
    out = ex.run_docs(q, args, {});
    CHECK(out.outcomes.size() == 2);
    CHECK(f.calls("batch_marker_limited") == 2);
    CHECK(log.count("cannot run batched") == 1);  // not tried again: it would fail and say so again
}

TEST_CASE("a batched form refused for a privilege the docs alone do not need is set aside once, not halved each time") {
    Fixture f;
    LogCapture log;
    Executor ex(executor_options());
    // what a batched form naming a type in a schema the pool may not use meets: 42501 for the
    // statement, while each doc alone (its param types inferred) runs
    sql1(f.db, "CREATE FUNCTION exec_b.denied(int[]) RETURNS SETOF int LANGUAGE plpgsql AS "
               "$$BEGIN RAISE EXCEPTION 'permission denied for schema types' USING ERRCODE = '42501'; END$$");
    auto q = f.query("denied", "SELECT to_jsonb(id) AS batch_marker_denied FROM orders WHERE id = $1", {"id"});
    q.batch_sql = "SELECT ord, 1, to_jsonb(x) FROM exec_b.denied($1::int[]) WITH ORDINALITY AS d(x, ord)";
    std::vector<SqlArgs> args{{"1"}, {"2"}, {"3"}, {"4"}};
    auto out = ex.run_docs(q, args, {});
    REQUIRE(out.outcomes.size() == 4);
    CHECK_FALSE(out.split);
    for (std::size_t i = 0; i < 4; ++i) CHECK(out.outcomes[i].doc == std::optional<std::string>(std::to_string(i + 1)));
    CHECK(log.count("doc query \"denied\" cannot run batched") == 1);
    CHECK(ex.batched_forms_set_aside() == 1);  // docsync_batched_forms_set_aside
    sql1(f.db, "SELECT pg_stat_statements_reset()");
    out = ex.run_docs(q, args, {});
    CHECK(out.outcomes.size() == 4);
    CHECK(f.calls("exec_b.denied") == 0);  // the batched form is not tried again
    CHECK(log.count("cannot run batched") == 1);
    // docsync.queries shows why (through the status file), naming the fix for a privilege
    auto set_aside = ex.batched_forms_set_aside_by_query();
    REQUIRE(set_aside.count("denied") == 1);
    CHECK(set_aside["denied"].find("doc query \"denied\": batched form set aside") == 0);
    CHECK(set_aside["denied"].find("SQLSTATE 42501") != std::string::npos);
    CHECK(set_aside["denied"].find("docsync.grant_reader") != std::string::npos);
    // a definitions reload (grant_reader raises the generation when it grants) tries the form again
    ex.definitions_changed();
    CHECK(ex.batched_forms_set_aside_by_query().empty());
    CHECK(ex.batched_forms_set_aside() == 0);
    sql1(f.db, "CREATE OR REPLACE FUNCTION exec_b.denied(ids int[]) RETURNS SETOF int LANGUAGE sql AS "
               "$$SELECT unnest(ids)$$");
    sql1(f.db, "SELECT pg_stat_statements_reset()");
    out = ex.run_docs(q, args, {});
    REQUIRE(out.outcomes.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(out.outcomes[i].doc == std::optional<std::string>(std::to_string(i + 1)));
    CHECK(f.calls("exec_b.denied") == 1);  // batched again: one statement for the four docs
    CHECK(f.calls("batch_marker_denied") == 0);
    CHECK(ex.batched_forms_set_aside_by_query().empty());
}

TEST_CASE("batched keys lookups give each key what its lookup alone gives, with --max-keys per lookup") {
    Fixture f;
    Executor ex(executor_options());
    const std::string sql = "SELECT id AS batch_marker_keys FROM orders WHERE customer_id = $1 ORDER BY id";
    KeysQuery q{"order", sql, "exec_b", "exec_b.customers", "", batch_sql(f.db, sql, "exec_b")};
    REQUIRE_FALSE(q.batch_sql.empty());
    std::vector<SqlArgs> args{{"1"}, {"2"}, {"3"}, {"99"}};
    sql1(f.db, "SELECT pg_stat_statements_reset()");
    auto batch = ex.run_keys_batch(q, args, 4, {});
    CHECK(f.calls("batch_marker_keys") == 1);
    REQUIRE(batch.outcomes.size() == 4);
    for (std::size_t i = 0; i < args.size(); ++i) {
        INFO(i);
        auto alone = ex.run_keys(q, args[i], 4, {});
        CHECK(batch.outcomes[i].kind == alone.kind);
        std::set<SqlArgs> got(batch.outcomes[i].keys.begin(), batch.outcomes[i].keys.end());
        std::set<SqlArgs> want(alone.keys.begin(), alone.keys.end());
        CHECK(got == want);
    }
    CHECK(batch.outcomes[3].keys.empty());  // a customer with no orders names no doc
    // Customer 1 has four orders (3, 6, 9, 12): over a cap of 3 it fails alone, never truncated.
    auto capped = ex.run_keys_batch(q, {{"1"}, {"99"}}, 3, {});
    REQUIRE(capped.outcomes.size() == 2);
    CHECK(capped.outcomes[0].kind == OutcomeKind::Permanent);
    CHECK(capped.outcomes[0].error.find("--max-keys") != std::string::npos);
    CHECK(capped.outcomes[0].keys.empty());
    CHECK(capped.outcomes[1].kind == OutcomeKind::Ok);
}
