// The engine before the stream's first session (EngineOptions::hold_computes): a recompute of every
// live doc asked for at start (a sink that lost docs, a gap the last worker left) flags its docs and
// waits until the session has set its generation and started its own recompute, which then
// computes each doc once, at that generation.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "engine/engine.hpp"
#include "engine_harness.hpp"

using namespace docsync;
using namespace docsync::test;

namespace {

// An engine with --live all over a sink that retains db:order:1 … db:order:N.
struct StartHarness {
    FakeClock clock;
    FakeRunner runner;
    FakePublisher publisher;
    Engine engine;

    StartHarness(int docs, bool hold)
        : engine(runner, publisher, clock, options(hold), [](std::uint64_t) {}) {
        for (int i = 1; i <= docs; ++i) {
            std::string channel = "db:order:" + std::to_string(i);
            publisher.retained.push_back(channel);
            runner.rows[channel] = "{\"id\":" + std::to_string(i) + "}";
        }
        engine.load_definitions(parse_definitions(kDefinitions));
    }
    static EngineOptions options(bool hold) {
        EngineOptions o = test_options();
        o.live_all = true;
        o.batch = 4;
        o.hold_computes = hold;
        return o;
    }
};

}  // namespace

TEST_CASE("a recompute asked for before the first session computes each doc once, at the session's generation") {
    StartHarness h(10, true);
    h.engine.start(0);
    // A sink found short at start: every live doc is flagged, as a gap that holds the waits.
    h.engine.recompute_all_live(RecomputeReason::SinkReset, true);
    CHECK(h.engine.recompute_progress().total == 10);
    CHECK(h.engine.recompute_progress().holds_waits());
    CHECK_FALSE(h.engine.run_once());  // nothing computed before the session's generation
    CHECK(h.runner.doc_calls.empty());
    CHECK(h.publisher.published.empty());

    // The first session: its generation, then its own recompute of every live doc (which keeps
    // the sink reset's gap open).
    h.engine.set_generation(7);
    h.engine.recompute_all_live(RecomputeReason::NewServer, true);
    h.engine.release_computes();
    while (h.engine.run_once()) {}
    RecomputeProgress walk = h.engine.recompute_progress();
    CHECK(walk.total == 10);
    CHECK(walk.done == 10);
    CHECK_FALSE(walk.holds_waits());
    CHECK(h.engine.stats().recomputes == 10);  // once each, not once per recompute asked for
    REQUIRE(h.publisher.published.size() == 10);
    for (const auto& p : h.publisher.published) CHECK(p.version.generation == 7);
}

TEST_CASE("compute threads held before the first session start once it has flagged every live doc") {
    StartHarness h(6, true);
    h.engine.start(2);
    h.engine.recompute_all_live(RecomputeReason::SinkReset, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(h.engine.stats().recomputes == 0);
    h.engine.set_generation(4);
    CHECK(h.engine.stats().recomputes == 0);  // the generation alone releases nothing
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    // docsync.status says why: the sink's loss, not merely a start
    CHECK(h.engine.recompute_progress().reason == RecomputeReason::SinkReset);
    CHECK(h.engine.recompute_progress().holds_waits());
    h.engine.release_computes();
    for (int i = 0; i < 500 && h.engine.recompute_progress().running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK_FALSE(h.engine.recompute_progress().running());
    h.engine.stop();
    CHECK(h.engine.stats().recomputes == 6);
    REQUIRE(h.publisher.published.size() == 6);
    for (const auto& p : h.publisher.published) CHECK(p.version.generation == 4);
}

TEST_CASE("without the hold (an engine driven without a stream) computes need no generation") {
    StartHarness h(3, false);
    h.engine.start(0);
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    CHECK(h.engine.recompute_progress().reason == RecomputeReason::Startup);
    while (h.engine.run_once()) {}
    CHECK(h.engine.stats().recomputes == 3);
    // Once a walk has computed docs, a new one says its own reason.
    h.engine.recompute_all_live(RecomputeReason::SinkReset, true);
    CHECK(h.engine.run_once());
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    CHECK(h.engine.recompute_progress().reason == RecomputeReason::Startup);
}
