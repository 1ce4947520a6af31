// The cache of last-published docs (publish/patcher.hpp): which base a patch is made from, when there
// is none, what the sink's outcome does to the cache, and the memory bound.
#include <doctest/doctest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "envelope/envelope.hpp"
#include "publish/patcher.hpp"

using docsync::DocVersion;
using docsync::publish::PatchOutcome;
using docsync::publish::PatchPlan;
using docsync::publish::Patcher;
using docsync::publish::PatcherOptions;
namespace patch = docsync::patch;

namespace {

// A doc of about `size` bytes whose field "v" is `v`.
std::string doc(int v, std::size_t size = 2000, char fill = 'x') {
    return R"({"v":)" + std::to_string(v) + R"(,"pad":")" + std::string(size, fill) + "\"}";
}

// Stands in for docsync::patch::diff: a short patch naming what it was made from, so that a test
// sees which base a plan used; `big` makes one as long as the doc.
struct FakeDiffer {
    std::vector<std::pair<std::string, std::string>>* calls;
    bool big = false;
    std::optional<patch::Patch> operator()(std::string_view from, std::string_view to) const {
        calls->emplace_back(from, to);
        std::string value = big ? std::string(to.size(), 'p') : "1";
        return patch::Patch{patch::Form::JsonPatch, R"([{"op":"replace","path":"/v","value":")" + value + "\"}]"};
    }
};

struct Fixture {
    std::vector<std::pair<std::string, std::string>> calls;
    Patcher patcher;
    explicit Fixture(PatcherOptions options = {}, bool big = false) : patcher(options, FakeDiffer{&calls, big}) {}

    PatchPlan publish(const std::string& channel, const std::optional<std::string>& text, DocVersion version,
                      PatchOutcome outcome = PatchOutcome::WholeSent) {
        PatchPlan plan = patcher.plan(channel, text, version);
        if (outcome == PatchOutcome::WholeSent && plan.patch) outcome = PatchOutcome::PatchSent;
        patcher.record(channel, plan, outcome);
        return plan;
    }
};

}  // namespace

TEST_CASE("a patch is made from the doc published before, at its version, once the sink took it") {
    Fixture f;
    auto first = f.publish("db:board:7", doc(1), {3, 100});
    CHECK_FALSE(first.patch);
    CHECK(first.reason == PatchPlan::Reason::NoBase);
    CHECK(f.calls.empty());
    auto second = f.publish("db:board:7", doc(2), {3, 200});
    REQUIRE(second.patch);
    CHECK(second.base == DocVersion{3, 100});
    CHECK(f.calls.back().first == doc(1));
    CHECK(f.calls.back().second == doc(2));
    CHECK(*second.patch == R"({"channel":"db:board:7","patch":[{"op":"replace","path":"/v","value":"1"}],)"
                           R"("base_generation":3,"base_lsn":"0/64","generation":3,"lsn":"0/C8"})");
    CHECK(second.whole == docsync::publish::make_envelope("db:board:7", doc(2), {3, 200}));
    // The next one is made from the second.
    auto third = f.publish("db:board:7", doc(3), {4, 5});
    REQUIRE(third.patch);
    CHECK(third.base == DocVersion{3, 200});
    auto counters = f.patcher.counters();
    CHECK(counters.patches == 2);
    CHECK(counters.whole_no_base == 1);
    CHECK(counters.bytes_saved == second.whole.size() - second.patch->size() + third.whole.size() - third.patch->size());
    CHECK(counters.cache_entries == 1);
}

TEST_CASE("the cache holds compact text: a doc written with spaces is its envelope's doc") {
    Fixture f;
    f.publish("db:a:1", "{ \"v\" : 1, \"pad\" : \"" + std::string(2000, 'x') + "\" }", {1, 1});
    f.publish("db:a:1", doc(2), {1, 2});
    REQUIRE(f.calls.size() == 1);
    CHECK(f.calls[0].first == doc(1));
}

TEST_CASE("a base is never a version at or after the new one") {
    Fixture f;
    f.publish("db:a:1", doc(1), {1, 100});
    CHECK_FALSE(f.patcher.plan("db:a:1", doc(2), {1, 100}).patch);  // the same version
    CHECK_FALSE(f.patcher.plan("db:a:1", doc(2), {1, 50}).patch);   // older
    CHECK_FALSE(f.patcher.plan("db:a:1", doc(2), {0, 500}).patch);  // an older generation
    CHECK(f.patcher.plan("db:a:1", doc(2), {2, 1}).patch);
}

TEST_CASE("a version published with two texts is never a base; with one text twice it is") {
    Fixture f;
    f.publish("db:a:1", doc(1), {1, 100});
    f.publish("db:a:1", doc(1), {1, 100});  // the same doc again (an audit's republish)
    CHECK(f.patcher.plan("db:a:1", doc(2), {1, 200}).patch);
    f.publish("db:a:1", doc(9), {1, 100});  // another text at that version: a reader may hold either
    auto plan = f.patcher.plan("db:a:1", doc(2), {1, 200});
    CHECK_FALSE(plan.patch);
    CHECK(plan.reason == PatchPlan::Reason::NoBase);
    // Publishing a newer version makes a base again.
    f.publish("db:a:1", doc(2), {1, 200});
    CHECK(f.patcher.plan("db:a:1", doc(3), {1, 300}).patch);
}

TEST_CASE("a doc taken at the version the sink held is a base only when the entry held that very text") {
    // The sink (Redis's script's 3) already held this version: readers that took it keep theirs.
    Fixture f(PatcherOptions{4000, 64});
    f.publish("db:a:1", doc(1), {1, 100});
    f.publish("db:b:1", doc(1), {1, 100});  // evicts db:a:1's entry (one 2 kB entry fits)
    REQUIRE(f.patcher.counters().cache_entries == 1);
    // Another text at 1/100 while the entry is gone: readers may hold the first, so no base.
    f.publish("db:a:1", doc(9), {1, 100}, PatchOutcome::WholeSentEqual);
    auto plan = f.patcher.plan("db:a:1", doc(2), {1, 200});
    CHECK_FALSE(plan.patch);
    CHECK(plan.reason == PatchPlan::Reason::NoBase);
    // The same after a failure, a doc below --patch-min-bytes and a tombstone dropped the entry.
    for (int way = 0; way < 3; ++way) {
        CAPTURE(way);
        Fixture g(PatcherOptions{64ull << 20, 64});
        if (way == 0) g.publish("db:a:1", doc(1), {1, 100}, PatchOutcome::Failed);
        if (way == 1) g.publish("db:a:1", doc(1, 10), {1, 100});
        if (way == 2) g.publish("db:a:1", std::nullopt, {1, 100});
        g.publish("db:a:1", doc(9), {1, 100}, PatchOutcome::WholeSentEqual);
        CHECK_FALSE(g.patcher.plan("db:a:1", doc(2), {1, 200}).patch);
    }
    // Equal to an older entry's version only in the sink: the entry knows not what readers hold.
    Fixture h;
    h.publish("db:a:1", doc(1), {1, 50});
    h.publish("db:a:1", doc(9), {1, 100}, PatchOutcome::WholeSentEqual);
    CHECK_FALSE(h.patcher.plan("db:a:1", doc(2), {1, 200}).patch);
    // Another text while the entry holds the first: never a base, as before.
    Fixture k;
    k.publish("db:a:1", doc(1), {1, 100});
    k.publish("db:a:1", doc(9), {1, 100}, PatchOutcome::WholeSentEqual);
    CHECK_FALSE(k.patcher.plan("db:a:1", doc(2), {1, 200}).patch);
    // Two threads: the sink took the first text (1) then the second (3), recorded the other way round.
    Fixture m;
    m.publish("db:a:1", doc(9), {1, 100}, PatchOutcome::WholeSentEqual);
    m.publish("db:a:1", doc(1), {1, 100}, PatchOutcome::WholeSent);
    CHECK_FALSE(m.patcher.plan("db:a:1", doc(2), {1, 200}).patch);
    // A newer version makes a base again.
    m.publish("db:a:1", doc(2), {1, 200});
    CHECK(m.patcher.plan("db:a:1", doc(3), {1, 300}).patch);
}

TEST_CASE("the same text again at the version the entry holds keeps it a base") {
    Fixture f;
    f.publish("db:a:1", doc(1), {1, 100});
    f.publish("db:a:1", doc(1), {1, 100}, PatchOutcome::WholeSentEqual);  // an audit's republish
    auto plan = f.patcher.plan("db:a:1", doc(2), {1, 200});
    REQUIRE(plan.patch);
    CHECK(plan.base == DocVersion{1, 100});
    // An entry already marked (two texts at its version) stays no base, whatever text comes again.
    f.publish("db:a:1", doc(9), {1, 100}, PatchOutcome::WholeSentEqual);
    f.publish("db:a:1", doc(1), {1, 100}, PatchOutcome::WholeSentEqual);
    CHECK_FALSE(f.patcher.plan("db:a:1", doc(2), {1, 200}).patch);
}

TEST_CASE("docs below --patch-min-bytes are sent whole and leave no base behind") {
    Fixture f(PatcherOptions{64ull << 20, 500});
    auto small = f.publish("db:a:1", doc(1, 100), {1, 1});
    CHECK(small.reason == PatchPlan::Reason::Small);
    CHECK(f.patcher.counters().cache_entries == 0);
    f.publish("db:a:1", doc(2, 1000), {1, 2});
    CHECK(f.patcher.counters().cache_entries == 1);
    // A small doc after a big one: the big one is no longer what the sink holds.
    f.publish("db:a:1", doc(3, 100), {1, 3});
    CHECK(f.patcher.counters().cache_entries == 0);
    CHECK_FALSE(f.publish("db:a:1", doc(4, 1000), {1, 4}).patch);
}

TEST_CASE("a stale refusal changes nothing; a failure and a tombstone drop the entry") {
    Fixture f;
    f.publish("db:a:1", doc(1), {1, 100});
    f.publish("db:a:1", doc(2), {1, 200}, PatchOutcome::Stale);
    auto plan = f.patcher.plan("db:a:1", doc(3), {1, 300});
    REQUIRE(plan.patch);
    CHECK(plan.base == DocVersion{1, 100});  // not the refused doc

    f.publish("db:a:1", doc(3), {1, 300}, PatchOutcome::Failed);
    CHECK_FALSE(f.patcher.plan("db:a:1", doc(4), {1, 400}).patch);

    f.publish("db:a:1", doc(4), {1, 400});
    CHECK(f.patcher.plan("db:a:1", doc(5), {1, 500}).patch);
    auto tomb = f.publish("db:a:1", std::nullopt, {1, 500});
    CHECK(tomb.reason == PatchPlan::Reason::Tombstone);
    CHECK_FALSE(f.patcher.plan("db:a:1", doc(6), {1, 600}).patch);
    CHECK(f.patcher.counters().cache_entries == 0);
    CHECK(f.patcher.counters().cache_bytes == 0);
}

TEST_CASE("an older doc taken after a newer one (two threads) does not replace it") {
    Fixture f;
    f.publish("db:a:1", doc(1), {1, 100});
    auto newer = f.patcher.plan("db:a:1", doc(3), {1, 300});
    auto older = f.patcher.plan("db:a:1", doc(2), {1, 200});
    f.patcher.record("db:a:1", newer, PatchOutcome::PatchSent);
    f.patcher.record("db:a:1", older, PatchOutcome::WholeSent);
    auto plan = f.patcher.plan("db:a:1", doc(4), {1, 400});
    REQUIRE(plan.patch);
    CHECK(plan.base == DocVersion{1, 300});
}

TEST_CASE("a patch not at most half the whole envelope is not sent") {
    Fixture f({}, true);
    f.publish("db:a:1", doc(1), {1, 1});
    auto plan = f.publish("db:a:1", doc(2), {1, 2});
    CHECK_FALSE(plan.patch);
    CHECK(plan.reason == PatchPlan::Reason::NotSmaller);
    CHECK(f.patcher.counters().whole_not_smaller == 1);
    // It is still the base of the next one.
    CHECK(f.patcher.plan("db:a:1", doc(3), {1, 3}).base_text);
}

TEST_CASE("a diff that runs out of memory (or throws anything else) sends the doc whole; the cache goes on") {
    int calls = 0;
    Patcher patcher({}, [&](std::string_view, std::string_view) -> std::optional<patch::Patch> {
        if (++calls == 1) throw std::bad_alloc();
        throw std::length_error("basic_string::_M_create");
    });
    patcher.record("db:board:7", patcher.plan("db:board:7", doc(1), {3, 100}), PatchOutcome::WholeSent);
    for (int v = 2; v <= 3; ++v) {
        PatchPlan plan;
        REQUIRE_NOTHROW(plan = patcher.plan("db:board:7", doc(v), {3, 100u * v}));
        CHECK_FALSE(plan.patch);
        CHECK(plan.reason == PatchPlan::Reason::NotSmaller);
        CHECK(plan.whole == docsync::publish::make_envelope("db:board:7", doc(v), {3, 100u * v}));
        patcher.record("db:board:7", plan, PatchOutcome::WholeSent);
    }
    CHECK(calls == 2);
    CHECK(patcher.counters().whole_not_smaller == 2);
    CHECK(patcher.counters().cache_entries == 1);
}

TEST_CASE("the cache stays within --patch-memory, evicting the least recently published") {
    const std::size_t one = Patcher::entry_bytes(std::string("db:a:1").size(), doc(1).size());
    CHECK(one > doc(1).size() + 100);  // the nodes are counted, not only the text
    Fixture f(PatcherOptions{3 * one + one / 2, 1024});
    f.publish("db:a:1", doc(1), {1, 1});
    f.publish("db:a:2", doc(1), {1, 1});
    f.publish("db:a:3", doc(1), {1, 1});
    CHECK(f.patcher.counters().cache_entries == 3);
    f.publish("db:a:1", doc(2), {1, 2});  // db:a:1 is now the most recent
    f.publish("db:a:4", doc(1), {1, 1});  // evicts db:a:2
    auto counters = f.patcher.counters();
    CHECK(counters.cache_entries == 3);
    CHECK(counters.cache_bytes <= 3 * one + one / 2);
    CHECK_FALSE(f.patcher.plan("db:a:2", doc(2), {1, 2}).patch);
    CHECK(f.patcher.plan("db:a:1", doc(3), {1, 3}).patch);
    CHECK(f.patcher.plan("db:a:3", doc(2), {1, 2}).patch);
    CHECK(f.patcher.plan("db:a:4", doc(2), {1, 2}).patch);
    // A doc larger than the whole budget is not kept at all.
    f.publish("db:a:5", doc(1, 4 * one), {1, 1});
    CHECK(f.patcher.counters().cache_bytes <= 3 * one + one / 2);
    CHECK_FALSE(f.patcher.plan("db:a:5", doc(2, 4 * one), {1, 2}).patch);
}

TEST_CASE("claim: a patch is written only when the channel's last write is still its base") {
    Fixture f;
    auto first = f.patcher.plan("db:a:1", doc(1), {1, 1});
    CHECK_FALSE(f.patcher.claim("db:a:1", first));
    auto a = f.patcher.plan("db:a:1", doc(2), {1, 2});
    auto b = f.patcher.plan("db:a:1", doc(3), {1, 3});
    REQUIRE(a.patch);
    REQUIRE(b.patch);
    // b is written first: its base is the last write, a's base no longer is.
    CHECK(f.patcher.claim("db:a:1", b));
    CHECK_FALSE(f.patcher.claim("db:a:1", a));
    auto c = f.patcher.plan("db:a:1", doc(4), {1, 4});
    REQUIRE(c.patch);
    CHECK(c.base == DocVersion{1, 2});  // the last write, though older
    f.patcher.failed("db:a:1");
    CHECK_FALSE(f.patcher.claim("db:a:1", c));
}

TEST_CASE("plans and records from several threads at once keep the cache consistent") {
    std::vector<std::pair<std::string, std::string>> unused;
    const std::size_t one = Patcher::entry_bytes(8, doc(1).size());
    Patcher patcher(PatcherOptions{20 * one, 1024}, [](std::string_view, std::string_view) {
        return std::optional<patch::Patch>(patch::Patch{patch::Form::MergePatch, R"({"v":1})"});
    });
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&patcher, t] {
            for (int i = 1; i <= 300; ++i) {
                std::string channel = "db:a:" + std::to_string((i * 7 + t) % 40);
                auto plan = patcher.plan(channel, doc(i), {1, static_cast<docsync::Lsn>(i * 4 + t)});
                patcher.record(channel, plan, i % 13 == 0 ? PatchOutcome::Failed
                                              : plan.patch ? PatchOutcome::PatchSent
                                                           : PatchOutcome::WholeSent);
            }
        });
    for (auto& t : threads) t.join();
    auto counters = patcher.counters();
    CHECK(counters.cache_bytes <= 20 * one);
    CHECK(counters.cache_entries <= 20);
    // Whether the threads made patches depends on how they interleave (40 channels cycle through 20
    // entries); after them, the cache still makes one from a doc it took.
    auto first = patcher.plan("db:b:1", doc(1), {2, 1});
    patcher.record("db:b:1", first, PatchOutcome::WholeSent);
    auto second = patcher.plan("db:b:1", doc(2), {2, 2});
    CHECK(second.patch);
    patcher.clear();
    CHECK(patcher.counters().cache_bytes == 0);
}

TEST_CASE("the same text at a newer version is an empty JSON Patch, which moves the reader's version on") {
    Fixture f;
    f.publish("db:a:1", doc(1), {1, 100});
    auto same = f.publish("db:a:1", doc(1), {1, 200});
    REQUIRE(same.patch);
    CHECK(*same.patch == R"({"channel":"db:a:1","patch":[],"base_generation":1,"base_lsn":"0/64","generation":1,"lsn":"0/C8"})");
    CHECK(f.calls.empty());  // no diff needed
    auto next = f.patcher.plan("db:a:1", doc(2), {1, 300});
    REQUIRE(next.patch);
    CHECK(next.base == DocVersion{1, 200});
}
