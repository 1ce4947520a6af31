// The recompute engine with a fake Runner, Publisher and Clock: mapping changes to docs, per-key
// coalescing, ticket completion, visibility retries, failure outcomes, liveness and reloads.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "engine/engine.hpp"
#include "engine_harness.hpp"

using namespace docsync;
using namespace docsync::test;
using namespace std::chrono_literals;

TEST_CASE("a change to a live doc is computed, published with its version, and completes its ticket") {
    Harness h;
    h.engine.set_generation(5);
    h.runner.rows["db:order:42"] = R"({"id":42})";
    h.engine.sync_live({"db:order:42"}, true);
    h.drain();  // the first poll computes the newly live doc once
    REQUIRE(h.publisher.count("db:order:42") == 1);

    Lsn end = h.txn({update_order_status("42")}, 11);
    CHECK_FALSE(h.is_complete(11));  // not before the compute
    CHECK(h.engine.dirty_depth() == 1);
    CHECK(h.drain() == 1);
    CHECK(h.is_complete(11));
    auto last = h.publisher.last("db:order:42");
    REQUIRE(last);
    CHECK(last->doc == std::optional<std::string>(R"({"id":42})"));
    CHECK(last->version == DocVersion{5, end});
    CHECK(h.runner.doc_calls.back().need.xids == std::vector<std::uint64_t>{h.next_xid - 1});
    CHECK(h.runner.doc_calls.back().need.max_end_lsn == end);
    CHECK(h.engine.dirty_depth() == 0);
}

TEST_CASE("the time doc queries take is counted per query, for the mean compute time in status") {
    Harness h;
    h.runner.during_doc = [&](const DocQuery&, const SqlArgs&) { h.clock.advance(std::chrono::milliseconds(30)); };
    h.engine.sync_live({"db:order:1", "db:order:2"}, true);
    h.drain();
    auto stats = h.engine.stats();
    REQUIRE(stats.queries.size() >= 1);
    CHECK(stats.queries[0].name == "order");
    CHECK(stats.queries[0].recomputes == 2);
    CHECK(stats.queries[0].compute_ns == 60'000'000u);
}

TEST_CASE("a transaction that dirties no live doc completes at once") {
    Harness h;
    h.txn({update_order_status("7")}, 1);  // doc 7 is not live
    CHECK(h.is_complete(1));
    h.txn({}, 2);
    CHECK(h.is_complete(2));
    CHECK(h.drain() == 0);
    CHECK(h.runner.doc_calls.empty());
    CHECK(h.engine.stats().txns_completed == 2);
}

TEST_CASE("a doc dropped while a transaction that changed it is open does not hold the ticket") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.engine.on_begin(BeginRecord{900, 0x500, 0});
    h.engine.on_change(update_order_status("1"));
    h.engine.sync_live({}, true);  // the last subscriber left
    h.engine.on_commit(CommitRecord{0x500, 0x530}, 1);
    CHECK(h.is_complete(1));
    CHECK(h.drain() == 0);
    CHECK(h.engine.stats().txns_completed == 1);
}

TEST_CASE("a row that moves from one doc to another dirties both") {
    Harness h;
    h.engine.sync_live({"db:order:5", "db:order:7", "db:order:9"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.txn({move_item("5", "7")}, 1);
    h.drain();
    std::set<SqlArgs> computed;
    for (const auto& c : h.runner.doc_calls) computed.insert(c.args);
    CHECK(computed == std::set<SqlArgs>{{"5"}, {"7"}});
    CHECK(h.is_complete(1));
}

TEST_CASE("a DELETE reaches the doc its old row named, a NULL key has its own doc") {
    Harness h;
    h.engine.sync_live({"db:order:5", "db:order:%00"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.txn({ChangeRecord{ChangeOp::Delete, kItems, {}, {text("1"), text("5")}}}, 1);
    h.txn({ChangeRecord{ChangeOp::Insert, kItems, {text("2"), null_value()}, {}}}, 2);
    h.drain();
    REQUIRE(h.runner.doc_calls.size() == 2);
    CHECK(h.runner.doc_calls[0].args == SqlArgs{"5"});
    CHECK(h.runner.doc_calls[1].args == SqlArgs{std::nullopt});
    CHECK(h.is_complete(1));
    CHECK(h.is_complete(2));
}

TEST_CASE("unknown mapping values and TRUNCATE dirty every live doc of the query, never nothing") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:2", "db:user:1"}, true);
    h.drain();
    auto computed_after = [&](const std::vector<ChangeRecord>& changes, std::uint64_t ticket) {
        h.runner.doc_calls.clear();
        h.txn(changes, ticket);
        h.drain();
        std::set<std::string> out;
        for (const auto& c : h.runner.doc_calls) out.insert(build_channel(c.query, c.args));
        return out;
    };
    const std::set<std::string> all_orders{"db:order:1", "db:order:2"};
    // The old value of a non-identity mapping column was not logged.
    CHECK(computed_after({ChangeRecord{ChangeOp::Update, kItems, {text("1"), text("1")}, {same(), unknown()}}}, 1) ==
          all_orders);
    // A DELETE without the old key.
    CHECK(computed_after({ChangeRecord{ChangeOp::Delete, kItems, {}, {text("1"), unknown()}}}, 2) == all_orders);
    // An unchanged TOAST key whose old value is not logged.
    CHECK(computed_after({ChangeRecord{ChangeOp::Update, kItems, {text("1"), toast()}, {same(), same()}}}, 3) ==
          all_orders);
    // A column the plugin marked unknown in an INSERT.
    CHECK(computed_after({ChangeRecord{ChangeOp::Insert, kItems, {text("1"), unknown()}, {}}}, 4) == all_orders);
    // Values missing from the record altogether.
    CHECK(computed_after({ChangeRecord{ChangeOp::Insert, kItems, {text("1")}, {}}}, 5) == all_orders);
    // TRUNCATE.
    h.runner.doc_calls.clear();
    BeginRecord b{h.next_xid++, 0x9000, 0};
    h.engine.on_begin(b);
    h.engine.on_truncate(TruncateRecord{false, false, {kOrders}});
    h.engine.on_commit(CommitRecord{0x9000, 0x9030}, 6);
    h.drain();
    CHECK(h.runner.doc_calls.size() == 2);
    for (std::uint64_t t = 1; t <= 6; ++t) CHECK(h.is_complete(t));
    CHECK(h.engine.stats().broadcasts >= 6);
}

TEST_CASE("an unchanged TOAST key resolves from the logged old value") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:2"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.txn({ChangeRecord{ChangeOp::Update, kItems, {text("1"), toast()}, {same(), text("2")}}}, 1);
    h.drain();
    REQUIRE(h.runner.doc_calls.size() == 1);
    CHECK(h.runner.doc_calls[0].args == SqlArgs{"2"});
}

TEST_CASE("N changes to one hot doc cost one compute per round, not N") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    for (std::uint64_t t = 1; t <= 5000; ++t) h.txn({update_order_status("1")}, t);
    CHECK(h.engine.stats().waiting_txns == 5000);
    CHECK(h.drain() == 1);
    CHECK(h.runner.doc_calls.size() == 1);
    CHECK(h.runner.doc_calls[0].need.xids.size() == 5000);
    std::lock_guard<std::mutex> lock(h.completed_mutex);
    CHECK(h.completed.size() == 5000);
    CHECK(std::is_sorted(h.completed.begin(), h.completed.end()));
}

TEST_CASE("changes during a compute schedule exactly one more round, and their tickets wait for it") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.txn({update_order_status("1")}, 1);
    int inside = 0;
    h.runner.during_doc = [&](const DocQuery&, const SqlArgs&) {
        if (inside++ > 0) return;
        for (std::uint64_t t = 2; t <= 50; ++t) h.txn({update_order_status("1")}, t);  // while it runs
        CHECK_FALSE(h.engine.run_once());  // the doc is in flight: no second compute of it
    };
    CHECK(h.engine.run_once());
    CHECK(h.is_complete(1));
    CHECK_FALSE(h.is_complete(2));  // the running compute started before these changes
    CHECK(h.drain() == 1);
    CHECK(h.runner.doc_calls.size() == 2);
    for (std::uint64_t t = 2; t <= 50; ++t) CHECK(h.is_complete(t));
}

TEST_CASE("a compute that cannot see what it completes is retried and holds its tickets") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.runner.doc_script = {OutcomeKind::NotVisible, OutcomeKind::NotVisible};
    Lsn end = h.txn({update_order_status("1")}, 1);
    std::uint64_t xid = h.next_xid - 1;
    CHECK(h.drain() == 1);
    CHECK_FALSE(h.is_complete(1));
    CHECK(h.drain() == 0);  // backing off
    h.clock.advance(100ms);
    CHECK(h.drain() == 1);
    CHECK_FALSE(h.is_complete(1));
    h.clock.advance(100ms);
    CHECK(h.drain() == 1);
    CHECK(h.is_complete(1));
    REQUIRE(h.runner.doc_calls.size() == 3);
    for (const auto& c : h.runner.doc_calls) {
        CHECK(c.need.xids == std::vector<std::uint64_t>{xid});
        CHECK(c.need.max_end_lsn == end);
    }
    CHECK(h.engine.stats().not_visible_retries == 2);
    CHECK(h.publisher.count("db:order:1") == 2);
}

TEST_CASE("transient failures of the query or the sink hold the slot until a retry succeeds") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.runner.doc_script = {OutcomeKind::Transient};
    h.txn({update_order_status("1")}, 1);
    h.drain();
    CHECK_FALSE(h.is_complete(1));
    h.publisher.fail_next = 1;
    h.clock.advance(1s);
    h.drain();
    CHECK_FALSE(h.is_complete(1));  // the sink failed
    h.clock.advance(1s);
    h.drain();
    CHECK(h.is_complete(1));
    CHECK(h.engine.stats().transient_retries == 2);
}

TEST_CASE("the last transient failure is kept for status, naming the doc or table and the cause") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    CHECK(h.engine.stats().last_transient_error.empty());
    h.publisher.fail_next = 1;
    h.txn({update_order_status("1")}, 1);
    h.drain();
    CHECK(h.engine.stats().last_transient_error == "publishing db:order:1 failed: sink unavailable");
    h.clock.advance(1s);
    h.runner.doc_script = {OutcomeKind::Transient};
    h.drain();
    CHECK(h.engine.stats().last_transient_error ==
          "computing db:order:1 failed: scripted failure of query \"order\"");
    h.clock.advance(1s);
    h.drain();
    CHECK(h.is_complete(1));
    h.runner.keys_script = {OutcomeKind::Transient};
    h.txn({ChangeRecord{ChangeOp::Update, kProducts, {text("7")}, {same()}}}, 2);
    h.drain();
    auto stats = h.engine.stats();
    CHECK(stats.last_transient_error == "keys lookup on public.products failed: scripted keys failure");
    CHECK(stats.transient_retries == 3);
    CHECK_FALSE(h.is_complete(2));
}

TEST_CASE("retries back off by doubling from the first wait up to the cap the options set") {
    EngineOptions options = test_options();
    options.transient_backoff = 100ms;
    options.transient_backoff_cap = 2;  // 100 ms, then 200 ms from the second retry on
    options.not_visible_backoff = 5ms;
    options.not_visible_backoff_cap = 1;  // never doubles
    Harness h(options);
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.runner.doc_script = {OutcomeKind::Transient, OutcomeKind::Transient, OutcomeKind::Transient,
                           OutcomeKind::NotVisible, OutcomeKind::NotVisible};
    h.txn({update_order_status("1")}, 1);
    CHECK(h.drain() == 1);  // fails: retried after 100 ms
    h.clock.advance(100ms);
    CHECK(h.drain() == 1);  // fails: 200 ms
    h.clock.advance(200ms);
    CHECK(h.drain() == 1);  // fails: 400 ms doubled, but capped at 200 ms
    h.clock.advance(199ms);
    CHECK(h.drain() == 0);
    h.clock.advance(1ms);
    CHECK(h.drain() == 1);  // not visible: 5 ms, though three failures came before it
    h.clock.advance(5ms);
    CHECK(h.drain() == 1);  // not visible again: still 5 ms
    h.clock.advance(5ms);
    CHECK(h.drain() == 1);
    CHECK(h.is_complete(1));
}

TEST_CASE("a doc the sink refuses for good is a recorded outcome, not a held slot") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.publisher.refuse_next = 1;
    h.txn({update_order_status("1")}, 1);
    h.drain();
    CHECK(h.is_complete(1));
    auto stats = h.engine.stats();
    CHECK(stats.permanent_failures == 1);
    CHECK(stats.transient_retries == 0);
    CHECK(stats.queries[0].last_error.find("the sink refused the doc") != std::string::npos);
}

TEST_CASE("a permanent failure is recorded, completes its tickets and is retried off the ack path") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.runner.doc_script = {OutcomeKind::Permanent, OutcomeKind::Permanent};
    h.txn({update_order_status("1")}, 1);
    h.drain();
    CHECK(h.is_complete(1));
    auto stats = h.engine.stats();
    CHECK(stats.permanent_failures == 1);
    REQUIRE(stats.queries.size() == 2);
    CHECK(stats.queries[0].name == "order");
    CHECK(stats.queries[0].permanent_failures == 1);
    CHECK(stats.queries[0].last_channel == "db:order:1");
    CHECK(stats.queries[0].last_sqlstate == "22012");
    CHECK(stats.queries[0].last_error.find("\"order\"") != std::string::npos);
    CHECK_FALSE(stats.queries[0].last_error_cleared);
    // A new change does not wait for the backoff: it gets a prompt compute (which fails again).
    h.txn({update_order_status("1")}, 2);
    CHECK(h.drain() == 1);
    CHECK(h.is_complete(2));
    std::size_t calls = h.runner.doc_calls.size();
    CHECK(h.drain() == 0);  // the retry waits for its backoff
    h.clock.advance(10s);
    CHECK(h.drain() == 1);  // the retry succeeds
    CHECK(h.runner.doc_calls.size() == calls + 1);
    CHECK(h.publisher.count("db:order:1") == 2);
    CHECK(h.engine.dirty_depth() == 0);
    // the doc of the last error published since: its cause is gone (docsync.status: recovered)
    CHECK(h.engine.stats().queries[0].last_error_cleared);
}

TEST_CASE("reverse-index changes queue keys lookups whose docs complete the transaction") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:2", "db:order:3"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.runner.keys[{"77"}] = {{"1"}, {"3"}, {"404"}};  // 404 is not live
    h.txn({ChangeRecord{ChangeOp::Update, kProducts, {text("77")}, {same()}}}, 1);
    CHECK(h.engine.stats().keys_queued == 1);
    CHECK(h.engine.dirty_depth() == 1);
    CHECK(h.runner.keys_calls.empty());  // nothing ran on the stream thread
    h.drain();
    CHECK(h.runner.keys_calls == std::vector<SqlArgs>{{"77"}});
    std::set<SqlArgs> computed;
    for (const auto& c : h.runner.doc_calls) computed.insert(c.args);
    CHECK(computed == std::set<SqlArgs>{{"1"}, {"3"}});
    CHECK(h.is_complete(1));
}

TEST_CASE("a storm of changes to one reverse-indexed row costs a few lookups, not one per change") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:3"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.runner.keys[{"77"}] = {{"1"}, {"3"}};
    // 200 transactions before a thread is free: one queued lookup on behalf of all of them.
    for (std::uint64_t t = 1; t <= 200; ++t)
        h.txn({ChangeRecord{ChangeOp::Update, kProducts, {text("77")}, {same()}}}, t);
    CHECK(h.engine.stats().keys_queued == 1);
    // 100 more while that lookup runs: they wait for exactly one more round.
    std::uint64_t next_ticket = 201;
    h.runner.during_keys = [&](const SqlArgs&) {
        if (next_ticket > 201) return;
        for (int i = 0; i < 100; ++i)
            h.txn({ChangeRecord{ChangeOp::Update, kProducts, {text("77")}, {same()}}}, next_ticket++);
    };
    h.drain();
    CHECK(h.runner.keys_calls == std::vector<SqlArgs>{{"77"}, {"77"}});
    for (std::uint64_t t = 1; t < next_ticket; ++t) CHECK(h.is_complete(t));
    // the docs it names were computed, and far fewer times than there were changes
    CHECK(h.runner.doc_calls.size() >= 2);
    CHECK(h.runner.doc_calls.size() <= 4);
    // other key values are other lookups
    h.runner.during_keys = nullptr;
    h.txn({ChangeRecord{ChangeOp::Update, kProducts, {text("78")}, {same()}}}, 500);
    h.txn({ChangeRecord{ChangeOp::Update, kProducts, {text("77")}, {same()}}}, 501);
    CHECK(h.engine.stats().keys_queued == 2);
    h.drain();
    CHECK(h.is_complete(500));
    CHECK(h.is_complete(501));
}

TEST_CASE("a keys lookup that fails permanently recomputes every live doc of the query") {
    EngineOptions options = test_options();
    options.max_keys = 2;
    Harness h(options);
    h.engine.sync_live({"db:order:1", "db:order:2", "db:order:3"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    h.runner.keys[{"77"}] = {{"1"}, {"2"}, {"3"}};  // over the cap
    h.txn({ChangeRecord{ChangeOp::Insert, kProducts, {text("77")}, {}}}, 1);
    h.drain();
    CHECK(h.runner.doc_calls.size() == 3);
    CHECK(h.is_complete(1));
    auto stats = h.engine.stats();
    CHECK(stats.queries[0].permanent_failures == 1);
    CHECK(stats.queries[0].last_channel == "keys:public.products");
}

TEST_CASE("a keys lookup that cannot see its transaction yet is retried and holds the ticket") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.runner.keys[{"77"}] = {{"1"}};
    h.runner.keys_script = {OutcomeKind::NotVisible};
    h.txn({ChangeRecord{ChangeOp::Insert, kProducts, {text("77")}, {}}}, 1);
    h.drain();
    CHECK_FALSE(h.is_complete(1));
    h.clock.advance(1s);
    h.drain();
    CHECK(h.is_complete(1));
}

TEST_CASE("tickets complete in stream order, only after every doc they dirtied") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:2"}, true);
    h.drain();
    h.runner.doc_script = {OutcomeKind::Transient};  // the first compute (doc 1) fails
    h.txn({update_order_status("1")}, 1);
    h.txn({update_order_status("2")}, 2);
    h.drain();
    CHECK_FALSE(h.is_complete(1));
    CHECK_FALSE(h.is_complete(2));  // done, but behind an earlier transaction still waiting
    h.clock.advance(1s);
    h.drain();
    CHECK(h.is_complete(1));
    CHECK(h.is_complete(2));
}

TEST_CASE("liveness: polls lease, incomplete polls only add, warm and touch survive a stale poll") {
    EngineOptions options = test_options();
    options.lease = 60s;
    options.touch_grace = 10s;
    Harness h(options);
    h.engine.sync_live({"db:order:1", "db:order:2"}, true);
    CHECK(h.engine.stats().live_docs == 2);
    CHECK(h.engine.dirty_depth() == 2);  // newly live docs are computed once
    h.drain();
    h.engine.sync_live({"db:order:1"}, false);  // incomplete: drops nothing
    CHECK(h.engine.stats().live_docs == 2);
    h.engine.sync_live({"db:order:1"}, true);  // complete: 2 is dropped
    CHECK(h.engine.stats().live_docs == 1);
    h.runner.doc_calls.clear();
    h.txn({update_order_status("2")}, 1);
    CHECK(h.is_complete(1));  // no live doc
    CHECK(h.drain() == 0);

    h.engine.warm("db:order:3");
    h.engine.touch("db:order:4");
    h.engine.touch("db:order:1");  // already live and current: renewed, not recomputed
    CHECK(h.drain() == 2);
    h.engine.sync_live({"db:order:1"}, true);  // a poll that predates the new subscribers
    CHECK(h.engine.stats().live_docs == 3);
    h.clock.advance(11s);
    h.engine.sync_live({"db:order:1"}, true);
    CHECK(h.engine.stats().live_docs == 1);
    // Leases expire when polls stop listing a channel.
    h.clock.advance(61s);
    h.engine.sync_live({}, false);
    CHECK(h.engine.stats().live_docs == 0);
    // Garbage channels are ignored.
    h.engine.sync_live({"nonsense", "db:ghost:1", "db:order:1:2"}, true);
    CHECK(h.engine.stats().live_docs == 0);
}

TEST_CASE("a doc that becomes live again is recomputed: it may have missed changes") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.engine.sync_live({}, true);
    h.txn({update_order_status("1")}, 1);  // missed
    h.engine.touch("db:order:1");
    CHECK(h.drain() == 1);
    CHECK(h.publisher.count("db:order:1") == 2);
}

TEST_CASE("with --live all every doc is live, starting from what the sink holds") {
    EngineOptions options = test_options();
    options.live_all = true;
    FakeClock clock;
    FakeRunner runner;
    FakePublisher publisher;
    publisher.retained = {"db:order:1", "db:order:2", "db:gone:1"};
    std::vector<std::uint64_t> completed;
    Engine engine(runner, publisher, clock, options, [&](std::uint64_t t) { completed.push_back(t); });
    engine.load_definitions(parse_definitions(kDefinitions));
    engine.on_relation(relation(kOrders, "public", "orders", {{1, "id"}, {2, "status"}}));
    engine.start(0);
    CHECK(engine.stats().live_docs == 2);
    engine.recompute_all_live(RecomputeReason::Startup, false);
    int n = 0;
    while (engine.run_once()) ++n;
    CHECK(n == 2);
    engine.on_begin(BeginRecord{500, 0x100, 0});
    engine.on_change(insert_order("9"));
    engine.on_commit(CommitRecord{0x100, 0x130}, 1);
    CHECK(completed.empty());
    while (engine.run_once()) {}
    CHECK(completed == std::vector<std::uint64_t>{1});
    CHECK(publisher.last("db:order:9"));
    CHECK(engine.stats().live_docs == 3);
    engine.sync_live({}, true);  // polls never drop docs in this mode
    CHECK(engine.stats().live_docs == 3);
}

TEST_CASE("with --live all, warm computes a doc and keeps it live, touch computes only a doc not kept yet") {
    EngineOptions options = test_options();
    options.live_all = true;
    FakeClock clock;
    FakeRunner runner;
    FakePublisher publisher;
    publisher.retained = {"db:order:1"};
    Engine engine(runner, publisher, clock, options, [](std::uint64_t) {});
    engine.load_definitions(parse_definitions(kDefinitions));
    engine.start(0);
    engine.recompute_all_live(RecomputeReason::Startup, false);
    while (engine.run_once()) {}
    CHECK(publisher.count("db:order:1") == 1);

    engine.warm("db:order:2");   // not in the sink: computed, live from now on
    engine.touch("db:order:3");  // not kept yet: computed like a warm
    engine.touch("db:order:1");  // kept current already: nothing to do
    int n = 0;
    while (engine.run_once()) ++n;
    CHECK(n == 2);
    CHECK(publisher.count("db:order:2") == 1);
    CHECK(publisher.count("db:order:3") == 1);
    CHECK(publisher.count("db:order:1") == 1);
    CHECK(engine.stats().live_docs == 3);
    clock.advance(600s);  // no lease or grace expires in this mode
    engine.sync_live({}, true);
    CHECK(engine.stats().live_docs == 3);
    engine.warm("db:order:1");  // a warm always computes
    CHECK(engine.run_once());
    CHECK(publisher.count("db:order:1") == 2);
}

TEST_CASE("a doc's version is the later of the commits it completes and its compute's snapshot") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    // A recompute handles no commit: before, it published (generation, 0/0), which a sink keeping
    // the newest version refused in favour of the older doc it held.
    h.runner.snapshot_lsn = 0x5000;
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    h.drain();
    REQUIRE(h.publisher.last("db:order:1"));
    CHECK(h.publisher.last("db:order:1")->version.lsn == 0x5000);
    // A change: the snapshot is at least as late as the commit it completes, so versions only grow.
    h.runner.snapshot_lsn = 0x6100;
    h.engine.on_begin(BeginRecord{600, 0x6000, 0});
    h.engine.on_change(insert_order("1"));
    h.engine.on_commit(CommitRecord{0x6000, 0x6030}, 7);
    h.drain();
    CHECK(h.publisher.last("db:order:1")->version.lsn == 0x6100);
    // A snapshot read from a standby behind the commit never lowers the version below the commit.
    h.runner.snapshot_lsn = 0x10;
    h.engine.on_begin(BeginRecord{601, 0x7000, 0});
    h.engine.on_change(insert_order("1"));
    h.engine.on_commit(CommitRecord{0x7000, 0x7030}, 8);
    h.drain();
    CHECK(h.publisher.last("db:order:1")->version.lsn == 0x7030);
}

TEST_CASE("the recompute of every live doc reports done of total, retries are not done, outcomes are") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:2", "db:order:3", "db:order:4"}, true);
    h.drain();
    CHECK(h.engine.stats().recompute.reason == RecomputeReason::None);
    h.clock.advance(1000ms);
    h.engine.recompute_all_live(RecomputeReason::Valve, true);
    auto p = h.engine.stats().recompute;
    CHECK(p.reason == RecomputeReason::Valve);
    CHECK(p.total == 4);
    CHECK(p.done == 0);
    CHECK(p.finished_ns == 0);
    CHECK(p.started_ns == std::chrono::duration_cast<std::chrono::nanoseconds>(h.clock.now().time_since_epoch()).count());
    // One published, one failed for good (an outcome), one retried (not yet done).
    h.runner.doc_script = {OutcomeKind::Ok, OutcomeKind::Permanent, OutcomeKind::Transient};
    REQUIRE(h.engine.run_once());
    CHECK(h.engine.stats().recompute.done == 1);
    REQUIRE(h.engine.run_once());
    CHECK(h.engine.stats().recompute.done == 2);
    REQUIRE(h.engine.run_once());
    CHECK(h.engine.stats().recompute.done == 2);
    h.clock.advance(200ms);  // the transient retry is due
    CHECK(h.engine.stats().recompute.finished_ns == 0);
    h.drain();
    p = h.engine.stats().recompute;
    CHECK(p.done == 4);
    CHECK(p.total == 4);
    CHECK(p.finished_ns == std::chrono::duration_cast<std::chrono::nanoseconds>(h.clock.now().time_since_epoch()).count());
    // A new walk starts the count again; with no live doc it is done at once.
    h.engine.sync_live({}, true);
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    p = h.engine.stats().recompute;
    CHECK(p.reason == RecomputeReason::Startup);
    CHECK(p.total == 0);
    CHECK(p.finished_ns != 0);
}

TEST_CASE("a recompute that covers a gap holds read-your-writes waits until it finishes, across restarts of it") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:2"}, true);
    h.drain();
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    CHECK_FALSE(h.engine.recompute_progress().holds_waits());  // a start that continues the stream
    h.drain();
    h.engine.recompute_all_live(RecomputeReason::Valve, true);
    auto p = h.engine.recompute_progress();
    CHECK(p.gap);
    CHECK(p.holds_waits());
    CHECK(p.total == 2);
    // Restarted before it finished by a recompute that covers no gap of its own: the gap stays open.
    REQUIRE(h.engine.run_once());
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    CHECK(h.engine.recompute_progress().holds_waits());
    h.drain();
    p = h.engine.recompute_progress();
    CHECK(p.finished_ns != 0);
    CHECK(p.gap);
    CHECK_FALSE(p.holds_waits());
    // Closed: the next recompute that covers no gap holds nothing.
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    CHECK_FALSE(h.engine.recompute_progress().gap);
}

TEST_CASE("a doc dropped during the recompute of every live doc counts as done, and a restart counts anew") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:order:2", "db:order:3"}, true);
    h.drain();
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    REQUIRE(h.engine.run_once());
    CHECK(h.engine.stats().recompute.done == 1);
    h.engine.sync_live({"db:order:1"}, true);  // 2 and 3 are no longer live, still queued
    CHECK(h.engine.stats().recompute.finished_ns == 0);
    h.drain();
    auto p = h.engine.stats().recompute;
    CHECK(p.done == 3);
    CHECK(p.finished_ns != 0);
    // A walk restarted while one of its computes runs: the earlier compute does not count for it.
    h.engine.sync_live({"db:order:1", "db:order:2"}, true);
    h.drain();
    h.engine.recompute_all_live(RecomputeReason::Startup, false);
    h.runner.during_doc = [&](const DocQuery&, const SqlArgs&) {
        h.runner.during_doc = nullptr;
        h.engine.recompute_all_live(RecomputeReason::Valve, true);
    };
    REQUIRE(h.engine.run_once());
    p = h.engine.stats().recompute;
    CHECK(p.reason == RecomputeReason::Valve);
    CHECK(p.total == 2);
    CHECK(p.done == 0);
    h.drain();
    p = h.engine.stats().recompute;
    CHECK(p.done == 2);
    CHECK(p.finished_ns != 0);
}

TEST_CASE("a definitions transaction completes only after the recomputes its reload causes") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:user:1"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    bool definitions = false;
    h.txn({ChangeRecord{ChangeOp::Insert, kQueryDefs, {text("order")}, {}}}, 1, &definitions);
    CHECK(definitions);
    CHECK_FALSE(h.is_complete(1));
    h.txn({update_order_status("99")}, 2);  // unrelated, later: completes on its own
    CHECK(h.is_complete(2));
    std::string changed = kDefinitions;
    changed.replace(changed.find("SELECT doc FROM orders"), 22, "SELECT doc2 FROM orders");
    h.engine.load_definitions(parse_definitions(changed));
    CHECK_FALSE(h.is_complete(1));
    h.drain();
    CHECK(h.is_complete(1));
    REQUIRE(h.runner.doc_calls.size() == 1);  // only the changed query's live doc
    CHECK(h.runner.doc_calls[0].query == "order");
    // Reloading the same definitions again recomputes nothing.
    h.engine.load_definitions(parse_definitions(changed));
    CHECK(h.drain() == 0);
    // Dropping a query drops its live docs.
    h.engine.load_definitions(parse_definitions(R"({"generation": 4, "queries": [{"name": "user",
        "sql": "SELECT 1", "params": ["user_id"], "search_path": "public"}], "watches": []})"));
    CHECK(h.engine.stats().live_docs == 1);
}

TEST_CASE("a docsync.definitions message asks for a reload, a changed fingerprint recomputes that query only") {
    Harness h;
    h.engine.sync_live({"db:order:1", "db:user:1"}, true);
    h.drain();
    h.runner.doc_calls.clear();
    // DDL: no definition row changes, only the transactional message docsync.next_generation() emits.
    BeginRecord b{h.next_xid++, h.next_lsn, 0};
    h.engine.on_begin(b);
    h.engine.on_message(MessageRecord{true, "docsync.definitions", "12"});
    CHECK(h.engine.on_commit(CommitRecord{h.next_lsn, h.next_lsn + 0x30}, 1));
    h.next_lsn += 0x100;
    // Other prefixes, and non-transactional messages, are not definitions.
    h.engine.on_begin(BeginRecord{h.next_xid++, h.next_lsn, 0});
    h.engine.on_message(MessageRecord{true, "docsync.other", "x"});
    h.engine.on_message(MessageRecord{false, "docsync.definitions", "13"});
    // Nor is one docsync did not emit: any role may call pg_logical_emit_message, and docsync's
    // messages carry the new generation.
    for (const char* content : {"x", "", "0", "12a", " 12", "-1", "123456789012345678901"})
        h.engine.on_message(MessageRecord{true, "docsync.definitions", content});
    CHECK_FALSE(h.engine.on_commit(CommitRecord{h.next_lsn, h.next_lsn + 0x30}, 2));
    h.next_lsn += 0x100;
    // The reload: only the query whose dependencies changed (ALTER TABLE … TYPE) is recomputed.
    std::string altered = kDefinitions;
    altered.replace(altered.find(R"("search_path": "public"},)"), 25, R"("search_path": "public", "fingerprint": "f2"},)");
    h.engine.load_definitions(parse_definitions(altered));
    h.drain();
    REQUIRE(h.runner.doc_calls.size() == 1);
    CHECK(h.runner.doc_calls[0].query == "order");
    CHECK(h.is_complete(1));
    h.engine.load_definitions(parse_definitions(altered));
    CHECK(h.drain() == 0);
}

TEST_CASE("definitions_message_generation reads only a positive decimal generation") {
    CHECK(definitions_message_generation("12") == std::optional<std::uint64_t>(12));
    CHECK(definitions_message_generation("9223372036854775807") == std::optional<std::uint64_t>(9223372036854775807ULL));
    CHECK_FALSE(definitions_message_generation("x"));
    CHECK_FALSE(definitions_message_generation(""));
    CHECK_FALSE(definitions_message_generation("0"));
    CHECK_FALSE(definitions_message_generation("1e3"));
}

TEST_CASE("a stream reset forgets waiting transactions but keeps the docs dirty") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    h.txn({update_order_status("1")}, 1);
    h.engine.reset_stream();
    CHECK(h.engine.stats().waiting_txns == 0);
    CHECK(h.engine.dirty_depth() == 1);
    h.txn({update_order_status("1")}, 2);  // replayed by the new epoch
    h.drain();
    CHECK_FALSE(h.is_complete(1));
    CHECK(h.is_complete(2));
}

TEST_CASE("worker threads compute concurrently, never the same doc twice at once") {
    Harness h;
    std::vector<std::string> live;
    for (int i = 0; i < 50; ++i) live.push_back("db:order:" + std::to_string(i));
    h.engine.sync_live(live, true);
    std::atomic<int> running{0}, max_running{0};
    std::mutex seen_mutex;
    std::set<SqlArgs> busy;
    bool overlap = false;
    h.runner.during_doc = [&](const DocQuery&, const SqlArgs& args) {
        {
            std::lock_guard<std::mutex> lock(seen_mutex);
            if (!busy.insert(args).second) overlap = true;
        }
        int r = ++running;
        int m = max_running.load();
        while (r > m && !max_running.compare_exchange_weak(m, r)) {}
        std::this_thread::sleep_for(1ms);
        --running;
        std::lock_guard<std::mutex> lock(seen_mutex);
        busy.erase(args);
    };
    h.engine.start(4);
    for (std::uint64_t t = 1; t <= 400; ++t) h.txn({update_order_status(std::to_string(t % 50))}, t);
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
        {
            std::lock_guard<std::mutex> lock(h.completed_mutex);
            if (h.completed.size() == 400) break;
        }
        std::this_thread::sleep_for(5ms);
    }
    h.engine.stop();
    std::lock_guard<std::mutex> lock(h.completed_mutex);
    CHECK(h.completed.size() == 400);
    CHECK_FALSE(overlap);
    CHECK(max_running.load() > 1);
}

TEST_CASE("memory per waiting transaction stays small on a hot key") {
    Harness h;
    h.engine.sync_live({"db:order:1"}, true);
    h.drain();
    ChangeRecord change = update_order_status("1");
    for (std::uint64_t t = 1; t <= 200000; ++t) {
        h.engine.on_begin(BeginRecord{t + 10, t * 16, 0});
        h.engine.on_change(change);
        h.engine.on_commit(CommitRecord{t * 16, t * 16 + 8}, t);
    }
    auto stats = h.engine.stats();
    CHECK(stats.waiting_txns == 200000);
    CHECK(stats.dirty_depth() == 1);
    CHECK(h.drain() == 1);
    CHECK(h.engine.stats().waiting_txns == 0);
    std::lock_guard<std::mutex> lock(h.completed_mutex);
    CHECK(h.completed.size() == 200000);
}

TEST_CASE("a hot doc's rounds start at least min_round_interval apart, a quiet doc computes at once") {
    EngineOptions options = test_options();
    options.min_round_interval = 100ms;
    Harness h(options);
    h.engine.sync_live({"db:order:1", "db:order:2"}, true);
    CHECK(h.drain() == 2);
    h.runner.doc_calls.clear();
    h.clock.advance(30ms);
    h.txn({update_order_status("1")}, 1);
    CHECK(h.drain() == 0);  // doc 1 started 30 ms ago
    CHECK_FALSE(h.is_complete(1));
    h.clock.advance(70ms);
    CHECK(h.drain() == 1);
    CHECK(h.is_complete(1));
    for (std::uint64_t t = 2; t <= 100; ++t) {
        h.clock.advance(2ms);
        h.txn({update_order_status("1")}, t);
        h.drain();
    }
    CHECK(h.runner.doc_calls.size() == 2);  // 200 ms of changes: one more round so far
    h.clock.advance(200ms);
    h.drain();
    CHECK(h.runner.doc_calls.size() == 3);
    for (std::uint64_t t = 2; t <= 100; ++t) CHECK(h.is_complete(t));
    // A doc that has been quiet for longer than the interval computes at once.
    h.txn({update_order_status("2")}, 101);
    CHECK(h.drain() == 1);
    CHECK(h.is_complete(101));
}
