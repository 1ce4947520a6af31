// The continuous audit (worker/audit/auditor.hpp) against the real engine with fakes at its seams: a
// runner whose "database" the test edits, a sink that retains the newest version of each doc as Redis
// does (and lets the test change what it holds), and an acknowledged position the test moves. Also
// the engine's draws of live docs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "audit/auditor.hpp"
#include "engine_fakes.hpp"
#include "log_capture.hpp"
#include "envelope/envelope.hpp"

namespace docsync::test {
namespace {

using namespace std::chrono_literals;
using audit::Auditor;
using audit::AuditorOptions;
using audit::Verdict;

// "order" and "user" docs; "user" is refused (its definer lost a grant), so its docs are never drawn.
constexpr const char* kAuditDefinitions = R"({"generation": 1,
 "queries": [{"name": "order", "sql": "SELECT doc FROM orders WHERE id = $1", "params": ["order_id"],
              "search_path": "public"},
             {"name": "user", "sql": "SELECT doc FROM users WHERE id = $1", "params": ["user_id"],
              "search_path": "public", "refused": "its definer may no longer read users"}],
 "watches": []})";

// Retains the newest version of each doc, compacted, as the Redis sink does; an older one is dropped.
class RetainingSink final : public Publisher {
  public:
    bool retaining = true;
    std::vector<Published> restored;  // what restore() was given

    void publish(const std::string& channel, const std::optional<std::string>& doc,
                 DocVersion version) override {
        std::lock_guard lock(mutex_);
        auto it = held_.find(channel);
        if (it != held_.end() && it->second.version > version) return;
        std::optional<std::string> compact;
        if (doc && publish::compact_json(*doc) != "null") compact = publish::compact_json(*doc);
        held_[channel] = RetainedDoc{compact, version};
    }
    void restore(const std::string& channel, const std::optional<std::string>& doc,
                 DocVersion version) override {
        {
            std::lock_guard lock(mutex_);
            restored.push_back({channel, doc, version});
        }
        publish(channel, doc, version);
    }
    std::vector<std::string> retained_channels() override {
        std::lock_guard lock(mutex_);
        std::vector<std::string> out;
        for (const auto& [channel, doc] : held_) out.push_back(channel);
        return out;
    }
    std::uint64_t max_generation() override { return 0; }
    bool retains() const override { return retaining; }
    std::optional<RetainedDoc> read_back(const std::string& channel) override {
        std::lock_guard lock(mutex_);
        auto it = held_.find(channel);
        if (it == held_.end()) return std::nullopt;
        return it->second;
    }

    // What a hand edit, a bad restore or a bug leaves: another doc at the same version, or none.
    void tamper(const std::string& channel, std::optional<std::string> doc) {
        std::lock_guard lock(mutex_);
        held_[channel].doc = std::move(doc);
    }
    void forget(const std::string& channel) {
        std::lock_guard lock(mutex_);
        held_.erase(channel);
    }

  private:
    std::mutex mutex_;
    std::map<std::string, RetainedDoc> held_;
};

AuditorOptions fast_options() {
    AuditorOptions o;
    o.sink = "the test sink";
    o.ack_wait = 2s;
    o.ack_poll = 1ms;
    o.confirm_delay = 1ms;
    o.idle_check = 10ms;
    o.seed = 42;
    return o;
}

// An engine with --live all whose sink holds `docs` orders (db:order:1 …), each published by the
// startup recompute at version (2, 0/5000), the acknowledged position there too.
struct Audit {
    FakeClock clock;
    FakeRunner runner;
    RetainingSink sink;
    std::atomic<Lsn> acked{0};
    Engine engine;

    explicit Audit(int docs = 1) : engine(runner, sink, clock, options(), [](std::uint64_t) {}) {
        engine.load_definitions(parse_definitions(kAuditDefinitions));
        engine.set_generation(2);
        for (int i = 1; i <= docs; ++i) {
            std::string channel = "db:order:" + std::to_string(i);
            runner.rows[channel] = R"({"id": )" + std::to_string(i) + R"(, "status": "new"})";
            sink.publish(channel, std::string("{}"), DocVersion{1, 0x100});
        }
        sink.publish("db:user:1", std::string("{}"), DocVersion{1, 0x100});
        runner.snapshot_lsn = 0x5000;
        engine.start(0);
        engine.recompute_all_live(RecomputeReason::Startup, false);
        while (engine.run_once()) {
        }
        acked = 0x5000;
    }
    static EngineOptions options() {
        EngineOptions o;
        o.live_all = true;
        o.min_round_interval = 0ms;
        return o;
    }
    Auditor auditor(AuditorOptions o = fast_options()) {
        return Auditor(
            engine, runner, sink, [this] { return acked.load(); }, o);
    }
    std::size_t computes() {
        std::lock_guard lock(runner.mutex);
        return runner.doc_calls.size();
    }
};

}  // namespace

TEST_CASE("audit: a doc the sink retains as a fresh compute gives it agrees, and nothing is published") {
    Audit a;
    REQUIRE(a.sink.read_back("db:order:1")->version == DocVersion{2, 0x5000});
    auto auditor = a.auditor();
    std::size_t before = a.computes();
    CHECK(auditor.audit_one(7) == Verdict::Agree);
    CHECK(a.computes() == before + 1);
    CHECK(auditor.stats().samples == 1);
    CHECK(auditor.stats().divergences == 0);
    CHECK(a.sink.restored.empty());
    // The sample needs to see nothing in particular and completes no transaction.
    CHECK(a.runner.doc_calls.back().need.xids.empty());
}

TEST_CASE(
    "audit: a retained doc that differs at a version not above the sample's is a divergence, healed at v_s") {
    LogCapture log;
    Audit a;
    auto auditor = a.auditor();
    a.runner.snapshot_lsn = 0x6000;
    a.acked = 0x6000;
    a.sink.tamper("db:order:1", std::string(R"({"id":1,"status":"tampered"})"));
    std::size_t before = a.computes();
    CHECK(auditor.audit_one(7) == Verdict::Diverged);
    CHECK(a.computes() == before + 2);  // suspected, then confirmed by a second compute
    CHECK(auditor.stats().samples == 1);
    CHECK(auditor.stats().divergences == 1);
    REQUIRE(a.sink.restored.size() == 1);
    CHECK(a.sink.restored[0].channel == "db:order:1");
    CHECK(a.sink.restored[0].version == DocVersion{2, 0x6000});  // the sample's version
    CHECK(a.sink.restored[0].doc == a.runner.rows["db:order:1"]);
    CHECK(a.sink.read_back("db:order:1")->doc == std::optional<std::string>(R"({"id":1,"status":"new"})"));
    CHECK(
        log.count("divergence: the test sink retains version (generation 2, lsn 0/5000) holding another doc "
                  "for db:order:1, but a compute at version (generation 2, lsn 0/6000) gives another") == 1);
    CHECK(log.text().find("tampered") == std::string::npos);  // never a doc's content
    // Healed: the next sample agrees.
    CHECK(auditor.audit_one(7) == Verdict::Agree);
    CHECK(auditor.stats().divergences == 1);

    // A doc the sink lost (while the row exists) diverges too, and is published again.
    a.sink.forget("db:order:1");
    CHECK(auditor.audit_one(7) == Verdict::Diverged);
    CHECK(log.count("retains nothing for db:order:1") == 1);
    CHECK(a.sink.read_back("db:order:1")->doc == std::optional<std::string>(R"({"id":1,"status":"new"})"));
    CHECK(auditor.stats().divergences == 2);
}

TEST_CASE("audit: a doc query that gives another doc at every compute is not judged, and said so once") {
    LogCapture log;
    Audit a;
    auto auditor = a.auditor();
    // Like a query calling now() or random(): each compute differs, from the sink and from the last.
    int calls = 0;
    a.runner.during_doc = [&](const DocQuery&, const SqlArgs&) {
        a.runner.rows["db:order:1"] = R"({"id": 1, "at": )" + std::to_string(++calls) + "}";
    };
    CHECK(auditor.audit_one(7) == Verdict::Skipped);
    CHECK(auditor.audit_one(7) == Verdict::Skipped);
    CHECK(auditor.stats().divergences == 0);
    CHECK(a.sink.restored.empty());
    CHECK(log.count("doc query \"order\" gave two different docs for db:order:1 at two computes while nothing "
                    "was published for it: it is not a function of the data") == 1);
    // A tampered doc of a query that gives the same doc each time is still a divergence.
    a.runner.during_doc = nullptr;
    a.runner.rows["db:order:1"] = R"({"id": 1, "status": "new"})";
    a.sink.tamper("db:order:1", std::string(R"({"id":1,"status":"tampered"})"));
    CHECK(auditor.audit_one(7) == Verdict::Diverged);
}

TEST_CASE("audit: a null doc and nothing retained agree, a tombstone for a doc that exists diverges") {
    Audit a;
    auto auditor = a.auditor();
    a.runner.rows.erase("db:order:1");  // the order is gone: the query returns no row
    a.sink.publish("db:order:1", std::nullopt, DocVersion{2, 0x5000});
    CHECK(auditor.audit_one(7) == Verdict::Agree);
    a.sink.forget("db:order:1");  // the tombstone expired
    CHECK(auditor.audit_one(7) == Verdict::Agree);
    a.runner.rows["db:order:1"] = R"({"id": 1})";
    a.sink.publish("db:order:1", std::nullopt, DocVersion{2, 0x5000});
    CHECK(auditor.audit_one(7) == Verdict::Diverged);
    CHECK(auditor.stats().samples == 3);
    CHECK(auditor.stats().divergences == 1);
}

TEST_CASE("audit: a retained version above the sample's is a later change, never a divergence") {
    Audit a;
    auto auditor = a.auditor();
    a.sink.publish("db:order:1", std::string(R"({"id":1,"status":"paid"})"), DocVersion{2, 0x9000});
    CHECK(auditor.audit_one(7) == Verdict::Newer);
    CHECK(auditor.stats().samples == 1);
    CHECK(auditor.stats().divergences == 0);
    CHECK(a.sink.restored.empty());
    // A later generation wins whatever its LSN.
    a.sink.publish("db:order:1", std::string(R"({"id":1,"status":"moved"})"), DocVersion{3, 0x10});
    CHECK(auditor.audit_one(7) == Verdict::Newer);
    CHECK(a.sink.restored.empty());
}

TEST_CASE(
    "audit: it judges only once the acknowledged position reached the snapshot, and skips past the bound") {
    Audit a;
    a.runner.snapshot_lsn = 0x6000;
    a.acked = 0x5FFF;
    // Different content below the snapshot: judged before the acknowledgement, it would be blamed.
    a.sink.tamper("db:order:1", std::string(R"({"id":1,"status":"older"})"));
    {
        // A bound far above the 100 ms the acknowledgement takes: on a loaded machine the thread that
        // acknowledges may be scheduled late, and the wait ends as soon as it does.
        AuditorOptions patient = fast_options();
        patient.ack_wait = 30s;
        auto auditor = a.auditor(patient);
        // Read before the acknowledging thread starts its 100 ms, so the measured wait covers them.
        auto started = std::chrono::steady_clock::now();
        std::thread later([&] {
            std::this_thread::sleep_for(100ms);
            a.sink.publish("db:order:1", a.runner.rows["db:order:1"],
                           DocVersion{2, 0x5FF0});  // what the engine does
            a.acked = 0x6000;
        });
        CHECK(auditor.audit_one(7) == Verdict::Agree);
        CHECK(std::chrono::steady_clock::now() - started >= 100ms);
        later.join();
        CHECK(auditor.stats().divergences == 0);
    }
    // Never acknowledged within the bound: skipped, neither a sample nor a divergence.
    AuditorOptions o = fast_options();
    o.ack_wait = 100ms;
    auto auditor = a.auditor(o);
    a.runner.snapshot_lsn = 0x7000;
    a.sink.tamper("db:order:1", std::string(R"({"id":1,"status":"older"})"));
    std::size_t before = a.computes();
    CHECK(auditor.audit_one(7) == Verdict::Skipped);
    CHECK(a.computes() == before + 1);
    CHECK(auditor.stats().samples == 0);
    CHECK(auditor.stats().skipped == 1);
    CHECK(a.sink.restored.empty());
}

TEST_CASE(
    "audit: a suspicion the second compute clears is no divergence (a commit visible only after the "
    "snapshot)") {
    Audit a;
    auto auditor = a.auditor();
    // The sink already holds what a commit written to WAL before the snapshot made the doc, at the
    // same version; the first sample's snapshot did not see that commit yet, the second one does.
    a.sink.publish("db:order:1", std::string(R"({"id":1,"status":"paid"})"), DocVersion{2, 0x5000});
    int calls = 0;
    a.runner.during_doc = [&](const DocQuery&, const SqlArgs&) {
        if (++calls == 2) a.runner.rows["db:order:1"] = R"({"id": 1, "status": "paid"})";
    };
    CHECK(auditor.audit_one(7) == Verdict::Agree);
    CHECK(calls == 2);
    CHECK(auditor.stats().divergences == 0);
    CHECK(a.sink.restored.empty());
}

TEST_CASE(
    "audit: paused before the first recompute of every live doc ends and while one runs; busy docs wait") {
    Audit a;
    auto auditor = a.auditor();
    a.engine.recompute_all_live(RecomputeReason::SinkReset, true);  // running, not done
    std::size_t before = a.computes();
    CHECK(auditor.audit_one(7) == Verdict::Skipped);
    CHECK(a.computes() == before);
    while (a.engine.run_once()) {
    }
    a.engine.warm("db:order:1");  // dirty and queued: the engine publishes it next
    before = a.computes();
    CHECK(auditor.audit_one(7) == Verdict::Skipped);
    CHECK(a.computes() == before);
    while (a.engine.run_once()) {
    }
    CHECK(auditor.audit_one(7) == Verdict::Agree);
    CHECK(auditor.stats().skipped == 2);

    // An engine that never ran the recompute of every live doc (its stream has not started).
    FakeRunner runner;
    RetainingSink sink;
    FakeClock clock;
    Engine fresh(runner, sink, clock, Audit::options(), [](std::uint64_t) {});
    fresh.load_definitions(parse_definitions(kAuditDefinitions));
    sink.publish("db:order:1", std::string("{}"), DocVersion{1, 1});
    fresh.start(0);
    Auditor idle(
        fresh, runner, sink, [] { return Lsn(0xFFFFFFFF); }, fast_options());
    CHECK(idle.audit_one(7) == Verdict::Skipped);
    CHECK(runner.doc_calls.empty());
}

TEST_CASE("audit: a sample that ran a doc query the definitions changed meanwhile is not judged") {
    Audit a;
    auto auditor = a.auditor();
    std::string redefined = kAuditDefinitions;
    redefined.replace(redefined.find("\"generation\": 1"), 15, "\"generation\": 2");
    redefined.replace(redefined.find("SELECT doc FROM orders"), 22, "SELECT doc2 FROM orders");
    int calls = 0;
    a.runner.during_doc = [&](const DocQuery& query, const SqlArgs&) {
        if (++calls > 1) return;
        CHECK(query.sql == "SELECT doc FROM orders WHERE id = $1");
        // Redefined (or_replace) while the sample runs; the engine recomputes with the new query, whose
        // doc the sink then holds (another doc than the old query gives, at a version not above it).
        a.engine.load_definitions(parse_definitions(redefined));
        while (a.engine.run_once()) {
        }
        a.sink.tamper("db:order:1", std::string(R"({"id":1,"status":"from the new query"})"));
    };
    CHECK(auditor.audit_one(7) == Verdict::Skipped);
    CHECK(a.sink.restored.empty());
    CHECK(auditor.stats().divergences == 0);
    // Drawn again, it runs the new query.
    a.runner.during_doc = [&](const DocQuery& query, const SqlArgs&) {
        CHECK(query.sql == "SELECT doc2 FROM orders WHERE id = $1");
    };
    auditor.audit_one(7);
}

TEST_CASE("audit: off with a sink that retains nothing (stdout), saying why, off at rate 0") {
    LogCapture log;
    Audit a;
    a.sink.retaining = false;
    AuditorOptions o = fast_options();
    o.sink = "stdout";
    {
        auto auditor = a.auditor(o);
        CHECK_FALSE(auditor.start());
    }
    CHECK(log.count("INFO [audit] the continuous audit is off: stdout retains no docs to compare with") == 1);
    o.rate = 5;
    o.rate_given = true;
    {
        auto auditor = a.auditor(o);
        CHECK_FALSE(auditor.start());
    }
    CHECK(log.count("WARNING [audit] --audit-rate 5% cannot audit stdout: it retains no docs") == 1);
    a.sink.retaining = true;
    o.rate = 0;
    {
        auto auditor = a.auditor(o);
        CHECK_FALSE(auditor.start());
    }
    CHECK(log.count("the continuous audit is off (--audit-rate 0)") == 1);
}

TEST_CASE("audit: the thread samples at the rate, one compute at a time, and stops at once") {
    LogCapture log;
    Audit a(3);
    std::atomic<int> running{0};
    std::atomic<int> most{0};
    a.runner.during_doc = [&](const DocQuery&, const SqlArgs&) {
        int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(5ms);
        --running;
    };
    AuditorOptions o = fast_options();
    o.rate = 6000;  // every doc once a second: 4 live docs (db:user:1 too), one sample every 1/4 s
    auto auditor = a.auditor(o);
    auto started = std::chrono::steady_clock::now();
    REQUIRE(auditor.start());
    CHECK(log.count("continuous audit: 6000% of the live docs per minute are recomputed and compared with "
                    "the test sink") == 1);
    for (int i = 0; i < 500 && auditor.stats().samples < 3; ++i) std::this_thread::sleep_for(10ms);
    auditor.stop();
    auto took = std::chrono::steady_clock::now() - started;
    auto samples = auditor.stats().samples;
    CHECK(samples >= 3);
    // Paced: the first sample is due a quarter of a second after the start, then one every quarter.
    CHECK(took >= std::chrono::milliseconds(240 * static_cast<int>(samples)));
    CHECK(most.load() == 1);
    CHECK(auditor.stats().divergences == 0);
}

TEST_CASE(
    "engine: draws of live docs are nearly uniform, and never a doc that is not live or whose query is "
    "refused") {
    Audit a(50);
    std::map<std::string, int> seen;
    for (std::uint64_t r = 1; r <= 5000; ++r) {
        auto draw = a.engine.draw_live(r * 0x9E3779B97F4A7C15ull);
        REQUIRE(draw);
        ++seen[draw->channel];
        CHECK(draw->query.name == "order");
        CHECK(draw->args.size() == 1);
        CHECK(draw->view.generation == 2);
        CHECK(draw->view.walk_id == 1);
        CHECK_FALSE(draw->view.recomputing);
        CHECK_FALSE(draw->view.busy);
    }
    CHECK(seen.count("db:user:1") == 0);
    CHECK(seen.size() == 50);
    for (const auto& drawn : seen)  // named, not bound: doctest's message captures them
        CHECK_MESSAGE(drawn.second >= 20, drawn.first << " drawn " << drawn.second << " times of 5000");
    CHECK(a.engine.draw_live(1)->args.front() == a.engine.draw_live(1)->args.front());  // deterministic

    Audit none(0);  // only the refused query's doc is live
    CHECK_FALSE(none.engine.draw_live(7));
    CHECK_FALSE(none.engine.audit_view("db:nothing:1").busy);
}

}  // namespace docsync::test
