// The names a worker writes into a portable install's docsync.worker_status
// (status/portable_names.hpp): every state and recompute reason the worker has maps onto a value the
// table's CHECK constraints accept (sql/portable/40_status.sql, docs/portable.md).
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "status/portable_names.hpp"

using namespace docsync;

TEST_CASE("portable status: every worker state and recompute reason has a name the table accepts") {
    const std::set<std::string> states = {"starting", "connecting", "streaming", "reconnecting", "draining", "stopped"};
    for (auto s : {status::WorkerState::Starting, status::WorkerState::Streaming, status::WorkerState::Reconnecting,
                   status::WorkerState::Draining, status::WorkerState::ValveReset, status::WorkerState::Stopped,
                   status::WorkerState::Connecting})
        CHECK(states.count(status::portable_state_name(s)) == 1);
    CHECK(status::portable_state_name(status::WorkerState::Streaming) == "streaming");
    CHECK(status::portable_state_name(status::WorkerState::ValveReset) == "reconnecting");

    const std::set<std::string> reasons = {"startup", "gap", "valve", "definitions", "sink"};
    CHECK_FALSE(status::portable_recompute_name(DOCSYNC_RECOMPUTE_NONE).has_value());
    for (std::uint32_t r = DOCSYNC_RECOMPUTE_STARTUP; r <= DOCSYNC_RECOMPUTE_PUBLICATION; ++r) {
        auto name = status::portable_recompute_name(r);
        REQUIRE(name.has_value());
        CHECK(reasons.count(*name) == 1);
    }
    CHECK(*status::portable_recompute_name(DOCSYNC_RECOMPUTE_PUBLICATION) == "gap");
    CHECK(*status::portable_recompute_name(DOCSYNC_RECOMPUTE_SINK_RESET) == "sink");
    CHECK_FALSE(status::portable_recompute_name(DOCSYNC_RECOMPUTE_PUBLICATION + 1).has_value());
}
