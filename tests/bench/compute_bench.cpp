// What a compute costs in network round trips, side by side in one run on one pool connection over
// loopback TCP, the same order doc (an order joined with its items) each time:
//   - exchange:  the executor's compute as it runs (Executor::run_doc): BEGIN, the snapshot check and
//                the doc query, then ROLLBACK and pg_advisory_unlock_all(), in one pipelined exchange;
//   - statements: the same five statements sent one exchange each (five round trips), the way a
//                compute is written without a pipeline.
// Prints docs/s and the mean per compute for each, and the ratio. Both run the same SQL, so the
// difference is the round trips and the wake-ups they cost the worker and the server.
//   tests/bench/compute.sh [computes (default 20000)]
//   bench-compute_bench DSN COMPUTES   (DSN: a reader of tests/bench/compute.sh's tables)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "executor/executor.hpp"
#include "pg/connection.hpp"

using namespace std::chrono;
using docsync::DocQuery;
using docsync::SqlArgs;
using docsync::pg::deadline_in;

namespace {

constexpr int kOrders = 1000;

const char* kDocSql =
    "SELECT jsonb_build_object('id', o.id, 'status', o.status, 'total', o.total, 'items',"
    " (SELECT jsonb_agg(jsonb_build_object('id', i.id, 'qty', i.qty, 'price', i.unit_price) ORDER BY i.id)"
    "    FROM order_items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1";

double per_second(int computes, steady_clock::duration took) {
    return computes / duration<double>(took).count();
}

void report(const char* what, int computes, steady_clock::duration took) {
    std::printf("%-11s %8.0f docs/s  %7.1f us per compute\n", what, per_second(computes, took),
                duration<double, std::micro>(took).count() / computes);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s DSN COMPUTES\n", argv[0]);
        return 2;
    }
    std::string dsn = argv[1];
    int computes = std::atoi(argv[2]);

    docsync::ExecutorOptions options;
    options.pool_dsn = dsn;
    options.pool_size = 1;
    docsync::Executor executor(options);
    DocQuery query{.name = "order", .sql = kDocSql, .params = {"id"}};

    auto conn = docsync::pg::Connection::connect(dsn, deadline_in(10s));
    auto by_statements = [&](const SqlArgs& args) {
        auto deadline = deadline_in(10s);
        conn.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", deadline);
        conn.exec("SELECT pg_catalog.pg_current_snapshot()::text, pg_catalog.pg_is_in_recovery(),"
                  " CASE WHEN $1::text IS NOT NULL THEN pg_catalog.set_config('search_path', $1, true) END,"
                  " pg_catalog.pg_current_wal_lsn()",
                  {std::nullopt}, deadline);
        auto r = conn.exec(kDocSql, args, deadline);
        if (r.rows() != 1) std::abort();
        conn.exec("ROLLBACK", deadline);
        conn.exec("SELECT pg_catalog.pg_advisory_unlock_all()", deadline);
    };
    auto by_exchange = [&](const SqlArgs& args) {
        auto out = executor.run_doc(query, args, {});
        if (out.kind != docsync::OutcomeKind::Ok || !out.doc) std::abort();
    };

    // Warm both connections' caches, then alternate rounds so drift on a shared machine hits both.
    for (int i = 1; i <= 200; ++i) {
        by_statements({std::to_string(i % kOrders + 1)});
        by_exchange({std::to_string(i % kOrders + 1)});
    }
    steady_clock::duration statements{}, exchange{};
    constexpr int kRounds = 10;
    for (int round = 0; round < kRounds; ++round) {
        auto t0 = steady_clock::now();
        for (int i = 0; i < computes / kRounds; ++i) by_statements({std::to_string(i % kOrders + 1)});
        auto t1 = steady_clock::now();
        for (int i = 0; i < computes / kRounds; ++i) by_exchange({std::to_string(i % kOrders + 1)});
        auto t2 = steady_clock::now();
        statements += t1 - t0;
        exchange += t2 - t1;
    }
    int ran = computes / kRounds * kRounds;
    report("statements", ran, statements);
    report("exchange", ran, exchange);
    std::printf("exchange / statements: %.2fx the docs/s\n",
                per_second(ran, exchange) / per_second(ran, statements));
    return 0;
}
