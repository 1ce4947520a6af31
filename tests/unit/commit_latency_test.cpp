// Commit → publish latency (progress/commit_latency.hpp): per completed ticket, the wall time since
// its commit, in the histogram's buckets.
#include <doctest/doctest.h>

#include "progress/commit_latency.hpp"

using docsync::CommitLatency;
using namespace std::chrono_literals;

namespace {

// A commit time in the stream's form for a wall-clock moment.
std::int64_t pg_time(std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() -
           CommitLatency::kPgEpochOffsetUs;
}

}  // namespace

TEST_CASE("a completed ticket counts the time since its commit, unknown and repeated tickets do not") {
    CommitLatency latency;
    auto commit = std::chrono::system_clock::now();
    latency.committed(1, pg_time(commit));
    latency.committed(2, pg_time(commit));
    latency.completed(1, commit + 3ms);     // 0.003 s: the 0.005 bucket
    latency.completed(2, commit + 2s);      // the 2.5 bucket
    latency.completed(2, commit + 5s);      // already counted
    latency.completed(7, commit + 1s);      // never committed here
    auto h = latency.histogram();
    CHECK(h.count == 2);
    CHECK(h.sum == doctest::Approx(2.003));
    CHECK(h.counts[2] == 1);  // bounds 0.001, 0.0025, 0.005
    CHECK(h.counts[10] == 1);  // … 1, 2.5
}

TEST_CASE("clock skew never counts a negative latency, and a new session forgets open tickets") {
    CommitLatency latency;
    auto commit = std::chrono::system_clock::now();
    latency.committed(1, pg_time(commit + 1s));  // the server's clock is ahead
    latency.completed(1, commit);
    CHECK(latency.histogram().counts[0] == 1);
    CHECK(latency.histogram().sum == 0);
    latency.committed(2, pg_time(commit));
    latency.forget_all();
    latency.completed(2, commit + 1s);
    CHECK(latency.histogram().count == 1);
}
