// Batched computes (--batch) with the fake Runner: which docs and keys lookups go into one
// statement, the halving of a failed statement down to the doc at fault, and per-doc outcomes,
// visibility, coalescing and tickets surviving batching.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "engine_harness.hpp"

using namespace docsync;
using namespace docsync::test;

namespace {

EngineOptions batch_options(std::size_t batch) {
    EngineOptions options = test_options();
    options.batch = batch;
    return options;
}

std::vector<std::string> orders(int first, int last) {
    std::vector<std::string> out;
    for (int i = first; i <= last; ++i) out.push_back("db:order:" + std::to_string(i));
    return out;
}

std::size_t sum(const std::vector<std::size_t>& sizes) { return std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}); }

const QueryStats& stats_of(const EngineStats& stats, const std::string& name) {
    for (const auto& q : stats.queries)
        if (q.name == name) return q;
    FAIL("no stats for " << name);
    return stats.queries.front();
}

}  // namespace

TEST_CASE("docs of one query dirty at once are computed --batch at a time, never mixed with another query's") {
    Harness h(batch_options(4));
    auto live = orders(1, 10);
    live.push_back("db:user:1");
    live.push_back("db:user:2");
    h.engine.sync_live(live, true);  // twelve newly live docs: each is computed once
    h.drain();
    CHECK(sum(h.runner.doc_batch_sizes) == 12);
    for (auto size : h.runner.doc_batch_sizes) CHECK(size <= 4);
    // ten orders need three statements at the least, two users one: nothing more
    CHECK(h.runner.doc_batch_sizes.size() == 4);
    // a statement computes one query's docs: its calls, in order, share the statement's query
    std::size_t at = 0;
    for (std::size_t b = 0; b < h.runner.doc_batches.size(); ++b) {
        for (std::size_t k = 0; k < h.runner.doc_batch_sizes[b]; ++k, ++at)
            CHECK(h.runner.doc_calls[at].query == h.runner.doc_batches[b].query);
    }
    for (const auto& channel : live) CHECK(h.publisher.count(channel) == 1);
}

TEST_CASE("a batched form the runner set aside is named in its query's stats, for the status file") {
    Harness h(batch_options(4));
    h.engine.sync_live(orders(1, 2), true);
    h.drain();
    CHECK(stats_of(h.engine.stats(), "order").batch_set_aside.empty());
    h.runner.set_aside["order"] = "doc query \"order\": its batched form failed where each doc alone runs";
    CHECK(stats_of(h.engine.stats(), "order").batch_set_aside == h.runner.set_aside["order"]);
    CHECK(stats_of(h.engine.stats(), "user").batch_set_aside.empty());
}

TEST_CASE("--batch 1 computes each doc in a statement of its own") {
    Harness h(batch_options(1));
    h.engine.sync_live(orders(1, 5), true);
    h.drain();
    CHECK(h.runner.doc_batch_sizes == std::vector<std::size_t>(5, 1));
}

TEST_CASE("a failed statement is halved down to the doc at fault: only it records the failure, the rest publish") {
    Harness h(batch_options(8));
    h.engine.sync_live(orders(1, 8), true);
    h.drain();
    h.runner.doc_batch_sizes.clear();
    h.runner.failing_docs = {"db:order:6"};
    std::vector<ChangeRecord> changes;
    for (int i = 1; i <= 8; ++i) changes.push_back(update_order_status(std::to_string(i)));
    h.txn(changes, 1);
    h.drain();
    // 8 fails; 4 (1–4) publishes; 4 (5–8) fails; 2 (5–6) fails; 2 (7–8) publishes; 5 and 6 alone
    CHECK(h.runner.doc_batch_sizes == std::vector<std::size_t>{8, 4, 4, 2, 1, 1, 2});
    for (int i = 1; i <= 8; ++i) CHECK(h.publisher.count("db:order:" + std::to_string(i)) == (i == 6 ? 1u : 2u));
    auto stats = h.engine.stats();
    CHECK(stats.permanent_failures == 1);
    CHECK(stats_of(stats, "order").last_channel == "db:order:6");
    CHECK(h.is_complete(1));  // a recorded outcome completes the transaction like a publish
}

TEST_CASE("a batch sees the union of what its docs complete, not visible yet, every doc waits and none publishes") {
    Harness h(batch_options(4));
    h.engine.sync_live(orders(1, 3), true);
    h.drain();
    h.runner.doc_batches.clear();
    Lsn first = h.txn({update_order_status("1")}, 1);
    Lsn second = h.txn({update_order_status("2"), update_order_status("3")}, 2);
    // The statement's snapshot misses a commit: the executor reports that for each of its docs (the
    // fake computes doc by doc, so each is scripted).
    h.runner.doc_script = {OutcomeKind::NotVisible, OutcomeKind::NotVisible, OutcomeKind::NotVisible};
    CHECK(h.engine.run_once());
    REQUIRE(h.runner.doc_batches.size() == 1);
    const Visibility& need = h.runner.doc_batches[0].need;
    CHECK(std::set<std::uint64_t>(need.xids.begin(), need.xids.end()).size() == 2);
    CHECK(need.max_end_lsn == second);
    CHECK(need.max_end_lsn > first);
    for (int i = 1; i <= 3; ++i) CHECK(h.publisher.count("db:order:" + std::to_string(i)) == 1);  // the first compute only
    CHECK_FALSE(h.is_complete(1));
    CHECK_FALSE(h.is_complete(2));
    CHECK(h.engine.stats().not_visible_retries == 3);
    h.clock.advance(10ms);
    h.drain();
    for (int i = 1; i <= 3; ++i) CHECK(h.publisher.count("db:order:" + std::to_string(i)) == 2);
    CHECK(h.is_complete(1));
    CHECK(h.is_complete(2));
}

TEST_CASE("a change during a batched compute is one more round for that doc only") {
    Harness h(batch_options(4));
    h.engine.sync_live(orders(1, 4), true);
    h.drain();
    bool once = false;
    h.runner.during_doc = [&](const DocQuery&, const SqlArgs& args) {
        if (args[0] == "3" && !once) {
            once = true;
            h.txn({update_order_status("3")}, 2);  // arrives while the batch computes
        }
    };
    std::vector<ChangeRecord> changes;
    for (int i = 1; i <= 4; ++i) changes.push_back(update_order_status(std::to_string(i)));
    h.txn(changes, 1);
    h.drain();
    for (int i = 1; i <= 4; ++i) CHECK(h.publisher.count("db:order:" + std::to_string(i)) == (i == 3 ? 3u : 2u));
    CHECK(h.is_complete(1));
    CHECK(h.is_complete(2));
}

TEST_CASE("one transaction changing many reverse-indexed rows runs its keys lookups --batch at a time") {
    Harness h(batch_options(4));
    h.engine.sync_live(orders(1, 10), true);
    h.drain();
    h.runner.doc_calls.clear();
    std::vector<ChangeRecord> changes;
    for (int p = 1; p <= 10; ++p) {
        h.runner.keys[{std::to_string(100 + p)}] = {{std::to_string(p)}};
        changes.push_back(ChangeRecord{ChangeOp::Update, kProducts, {text(std::to_string(100 + p))}, {same()}});
    }
    h.runner.failing_keys = {{"107"}};
    h.txn(changes, 1);
    h.drain();
    CHECK(h.runner.keys_calls.size() == 10);  // each lookup ran once, 107 alone at last
    CHECK(h.runner.keys_batch_sizes.front() == 4);
    for (auto size : h.runner.keys_batch_sizes) CHECK(size <= 4);
    // the failed lookup recomputes every live doc of the query instead: never nothing
    for (int i = 1; i <= 10; ++i) CHECK(h.publisher.count("db:order:" + std::to_string(i)) >= 2);
    CHECK(h.engine.stats().permanent_failures == 1);
    CHECK(h.is_complete(1));
}
