// Engine benchmark, no server: events per second through on_change with N live docs, and the
// resident memory each live doc costs.
//   build/release/bench-engine_bench [live_docs=100000] [events=2000000]
// Prints one line per figure. The Runner and Publisher are trivial in-memory ones; no worker threads
// run while events are timed (handling a change never waits on them anyway), then the backlog is
// drained to check every ticket completes.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "engine/definitions.hpp"
#include "engine/engine.hpp"

using namespace docsync;

namespace {

class NullRunner final : public Runner {
public:
    DocOutcome run_doc(const DocQuery&, const SqlArgs&, const Visibility&) override { return {OutcomeKind::Ok, "{}", {}, {}}; }
    KeysOutcome run_keys(const KeysQuery&, const SqlArgs&, std::size_t, const Visibility&) override { return {}; }
};

class NullPublisher final : public Publisher {
public:
    void publish(const std::string&, const std::optional<std::string>&, DocVersion) override {}
    std::vector<std::string> retained_channels() override { return {}; }
    std::uint64_t max_generation() override { return 0; }
};

long rss_kib() {
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        if (key == "VmRSS:") {
            long v = 0;
            in >> v;
            return v;
        }
        std::getline(in, key);
    }
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    long live = argc > 1 ? std::atol(argv[1]) : 100000;
    long events = argc > 2 ? std::atol(argv[2]) : 2000000;
    NullRunner runner;
    NullPublisher publisher;
    SteadyClock clock;
    std::uint64_t completed = 0;
    EngineOptions options;
    options.min_round_interval = std::chrono::milliseconds(0);
    Engine engine(runner, publisher, clock, options, [&](std::uint64_t) { ++completed; });
    engine.load_definitions(parse_definitions(R"({"generation":1,"queries":[{"name":"order","sql":"SELECT 1",
        "params":["id"],"search_path":"public"}],"watches":[{"query":"order","relid":16384,"schema":"public",
        "table":"orders","columns":[{"name":"id","attnum":1}],"keys_sql":null,"keys_args":[],"allow_broadcast":false,"broadcast":false,"read_columns":null}]})"));
    RelationRecord rel;
    rel.relid = 16384;
    rel.schema = "public";
    rel.name = "orders";
    rel.columns = {{1, "id", 23, true, false}, {2, "status", 25, false, false}};
    engine.on_relation(rel);
    engine.start(0);

    std::vector<std::string> channels;
    channels.reserve(static_cast<std::size_t>(live));
    for (long i = 0; i < live; ++i) channels.push_back("db:order:" + std::to_string(i));
    long before = rss_kib();
    engine.sync_live(channels, true);
    while (engine.run_once()) {}  // the first computes of the newly live docs
    long after = rss_kib();
    channels.clear();
    channels.shrink_to_fit();
    std::printf("live docs: %ld, RSS per live doc: %.0f bytes\n", live, (after - before) * 1024.0 / static_cast<double>(live));

    // Events: updates of random live orders' status (key unchanged), ten changes per transaction.
    std::vector<ChangeRecord> changes;
    std::uint64_t seed = 88172645463325252ull;
    for (int i = 0; i < 4096; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        std::string id = std::to_string(seed % static_cast<std::uint64_t>(live));
        changes.push_back(ChangeRecord{ChangeOp::Update, 16384, {{ValueKind::Text, id}, {ValueKind::Text, "paid"}},
                                       {{ValueKind::Same, {}}, {ValueKind::Text, "new"}}});
    }
    auto start = std::chrono::steady_clock::now();
    std::uint64_t ticket = 0;
    Lsn lsn = 0x1000000;
    for (long e = 0; e < events;) {
        engine.on_begin(BeginRecord{1000 + ticket, lsn, 0});
        for (int k = 0; k < 10 && e < events; ++k, ++e) engine.on_change(changes[static_cast<std::size_t>(e) & 4095]);
        engine.on_commit(CommitRecord{lsn, lsn + 0x40}, ++ticket);
        lsn += 0x100;
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("events through handle with %ld live docs: %.0f events/s (%ld events, %llu transactions, %.2f s)\n",
                live, static_cast<double>(events) / seconds, events, static_cast<unsigned long long>(ticket), seconds);
    std::printf("dirty depth after the events: %llu, waiting transactions: %llu\n",
                static_cast<unsigned long long>(engine.stats().dirty_depth()),
                static_cast<unsigned long long>(engine.stats().waiting_txns));
    long peak = rss_kib();
    while (engine.run_once()) {}
    std::printf("peak RSS %ld KiB; tickets completed after draining: %llu of %llu\n", peak,
                static_cast<unsigned long long>(completed), static_cast<unsigned long long>(ticket));
    return completed == ticket ? 0 : 1;
}
