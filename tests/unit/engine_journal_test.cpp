// The live journal seam (EngineOptions::journal, docs/design.md "sink checks"): with --live all the
// engine names every doc it starts keeping current before its first compute, loads what earlier
// workers named together with what the sink holds, and forgets what it stops keeping.
#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>

#include "engine/engine.hpp"
#include "engine_harness.hpp"

using namespace docsync;
using namespace docsync::test;

namespace {

class FakeJournal final : public LiveJournal {
public:
    std::vector<std::string> stored;
    std::vector<std::string> named_channels;
    std::vector<std::string> forgotten_channels;
    std::vector<std::string> load() override { return stored; }
    void named(const std::string& channel) override { named_channels.push_back(channel); }
    void forgotten(const std::string& channel) override { forgotten_channels.push_back(channel); }
};

}  // namespace

TEST_CASE("with --live all the journal's docs join the sink's, and a doc is journaled when a change first names it") {
    FakeJournal journal;
    journal.stored = {"db:order:5", "db:order:1", "db:gone:1"};
    EngineOptions options = test_options();
    options.live_all = true;
    options.journal = &journal;
    FakeClock clock;
    FakeRunner runner;
    FakePublisher publisher;
    publisher.retained = {"db:order:1", "db:order:2"};
    for (const char* id : {"1", "2", "5", "9"}) runner.rows[std::string("db:order:") + id] = R"({"id":1})";
    Engine engine(runner, publisher, clock, options, [](std::uint64_t) {});
    engine.load_definitions(parse_definitions(kDefinitions));
    engine.on_relation(relation(kOrders, "public", "orders", {{1, "id"}, {2, "status"}}));
    engine.start(0);
    // db:order:5 is in no sink (never published, or lost): still live, and recomputed.
    CHECK(engine.stats().live_docs == 3);
    CHECK(journal.named_channels == std::vector<std::string>{"db:order:2"});  // the sink's, not journaled yet
    CHECK(journal.forgotten_channels == std::vector<std::string>{"db:gone:1"});  // no such query
    engine.recompute_all_live(RecomputeReason::Startup, false);
    while (engine.run_once()) {}
    CHECK(publisher.last("db:order:5"));

    // A change names a new doc: journaled at once, before any compute, and once only.
    engine.on_begin(BeginRecord{500, 0x100, 0});
    engine.on_change(insert_order("9"));
    engine.on_change(update_order_status("9"));
    engine.on_commit(CommitRecord{0x100, 0x130}, 1);
    CHECK(journal.named_channels == std::vector<std::string>{"db:order:2", "db:order:9"});
    CHECK_FALSE(publisher.last("db:order:9"));
    while (engine.run_once()) {}
    CHECK(publisher.last("db:order:9"));
    engine.on_begin(BeginRecord{501, 0x200, 0});
    engine.on_change(update_order_status("9"));
    engine.on_commit(CommitRecord{0x200, 0x230}, 2);
    while (engine.run_once()) {}
    CHECK(journal.named_channels.size() == 2);
}

TEST_CASE("with --live subscribers nothing is journaled") {
    FakeJournal journal;
    journal.stored = {"db:order:5"};
    EngineOptions options = test_options();
    options.journal = &journal;
    FakeClock clock;
    FakeRunner runner;
    FakePublisher publisher;
    Engine engine(runner, publisher, clock, options, [](std::uint64_t) {});
    engine.load_definitions(parse_definitions(kDefinitions));
    engine.on_relation(relation(kOrders, "public", "orders", {{1, "id"}, {2, "status"}}));
    engine.start(0);
    CHECK(engine.stats().live_docs == 0);
    engine.sync_live({"db:order:7"}, true);
    CHECK(journal.named_channels.empty());
}

TEST_CASE("a tombstone leaves the live journal, and a row that names the doc again journals it again") {
    FakeJournal journal;
    EngineOptions options = test_options();
    options.live_all = true;
    options.journal = &journal;
    FakeClock clock;
    FakeRunner runner;
    FakePublisher publisher;
    Engine engine(runner, publisher, clock, options, [](std::uint64_t) {});
    engine.load_definitions(parse_definitions(kDefinitions));
    engine.on_relation(relation(kOrders, "public", "orders", {{1, "id"}, {2, "status"}}));
    engine.start(0);
    runner.rows["db:order:9"] = R"({"id":9})";
    engine.on_begin(BeginRecord{500, 0x100, 0});
    engine.on_change(insert_order("9"));
    engine.on_commit(CommitRecord{0x100, 0x130}, 1);
    while (engine.run_once()) {}
    CHECK(journal.named_channels == std::vector<std::string>{"db:order:9"});
    CHECK(journal.forgotten_channels.empty());

    runner.rows.erase("db:order:9");  // the row is deleted: a tombstone
    engine.on_begin(BeginRecord{501, 0x200, 0});
    engine.on_change(update_order_status("9"));
    engine.on_commit(CommitRecord{0x200, 0x230}, 2);
    while (engine.run_once()) {}
    CHECK(publisher.last("db:order:9"));
    CHECK(journal.forgotten_channels == std::vector<std::string>{"db:order:9"});

    // Named again by a row before its compute runs (the compute may be held; the valve may fire).
    runner.rows["db:order:9"] = R"({"id":9})";
    engine.on_begin(BeginRecord{502, 0x300, 0});
    engine.on_change(insert_order("9"));
    CHECK(journal.named_channels == std::vector<std::string>{"db:order:9", "db:order:9"});
    engine.on_commit(CommitRecord{0x300, 0x330}, 3);
    while (engine.run_once()) {}
    CHECK(journal.named_channels.size() == 2);
    CHECK(journal.forgotten_channels.size() == 1);
}
