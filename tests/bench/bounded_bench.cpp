// What the server-side bounds cost (worker/executor/bounded_forms.hpp): a batch of the shop's order
// docs computed by its batched form as the extension builds it (docsync.batch_sql), against the same
// form inside doc_form's bounds (each doc printed once and measured, at most 2 × batch + 1 rows), on
// one connection over loopback TCP, the statements prepared, alternating rounds so drift on a shared
// machine hits both. Prints docs/s for each and the ratio; every batch must return its docs.
//   tests/bench/bounded.sh [batches per form (default 2000)] [batch (default 128)]
//   bench-bounded_bench DSN BATCHES BATCH   (DSN: tests/bench/bounded.sh's database)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "executor/batch_forms.hpp"
#include "executor/bounded_forms.hpp"
#include "pg/connection.hpp"

using namespace std::chrono;
using docsync::SqlArgs;
using docsync::pg::deadline_in;

namespace {

constexpr int kOrders = 100000;

double per_second(long docs, steady_clock::duration took) { return docs / duration<double>(took).count(); }

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s DSN BATCHES BATCH\n", argv[0]);
        return 2;
    }
    std::string dsn = argv[1];
    int batches = std::atoi(argv[2]);
    int batch = std::atoi(argv[3]);
    auto conn = docsync::pg::Connection::connect(dsn, deadline_in(10s));
    std::string raw = std::string(conn.exec("SELECT docsync.stored_batch_sql('order')", deadline_in(10s)).get(0, 0));
    std::string bounded = docsync::bounded_forms::doc_form(raw, 2, 1 << 20, 2 * static_cast<std::size_t>(batch) + 1);
    unsigned seed = 7;
    auto run = [&](const std::string& sql, int first) {
        std::vector<SqlArgs> args;
        for (int i = 0; i < batch; ++i) args.push_back({std::to_string((first + i * 7919) % kOrders + 1)});
        docsync::pg::Statement statement{sql, docsync::batch_forms::batch_params(args), true, true};
        auto steps = conn.pipeline({statement}, deadline_in(30s));
        if (steps[0].error || steps[0].result.rows() != batch) {
            std::fprintf(stderr, "a batch failed: %s\n", steps[0].error ? steps[0].error->what() : "wrong rows");
            std::exit(1);
        }
    };
    for (int i = 0; i < 50; ++i) {
        run(raw, i);
        run(bounded, i);
    }
    steady_clock::duration took_raw{}, took_bounded{};
    constexpr int kRounds = 10;
    for (int round = 0; round < kRounds; ++round) {
        auto t0 = steady_clock::now();
        for (int i = 0; i < batches / kRounds; ++i) run(raw, static_cast<int>(seed = seed * 1103515245 + 12345) & 0xffff);
        auto t1 = steady_clock::now();
        for (int i = 0; i < batches / kRounds; ++i) run(bounded, static_cast<int>(seed = seed * 1103515245 + 12345) & 0xffff);
        auto t2 = steady_clock::now();
        took_raw += t1 - t0;
        took_bounded += t2 - t1;
    }
    long docs = static_cast<long>(batches / kRounds * kRounds) * batch;
    std::printf("batched form         %8.0f docs/s\n", per_second(docs, took_raw));
    std::printf("within its bounds    %8.0f docs/s\n", per_second(docs, took_bounded));
    std::printf("bounded / unbounded: %.3fx the docs/s (%ld docs each, batches of %d)\n",
                per_second(docs, took_bounded) / per_second(docs, took_raw), docs, batch);
    return 0;
}
