// Publish throughput and latency of the Redis Cluster sink with 1, 3 and 6 masters, beside the
// single-node Redis sink, in one run.
//   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2 --target bench-cluster_bench
//   build/rel/bench-cluster_bench [--docs 60000] [--rate-seconds 5] [--rate 2000]
// 1. Throughput: 4 threads, as the worker's publishing threads, each publishing batches of 64 docs
//    (publish_many, as the engine's batched publishes) of about 200 bytes over 10 000 channels, as
//    fast as the sink takes them; docs/s, and the CPU this process (the worker's side) and the
//    redis-servers used per doc, from /proc.
// 2. Steady load: --rate docs/s for --rate-seconds from 4 threads, one doc a call on a fixed
//    schedule; p50/p99/max of the publish call from its scheduled time (the call returns when the
//    doc's master answered its script).
// Every server is a real redis-server on loopback started here (--save ''); the clusters have no
// replicas (a replica only adds its master's replication work).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/process_stats.hpp"
#include "bench/sample_doc.hpp"
#include "integration/redis_server.hpp"
#include "publish/redis_cluster_sink.hpp"
#include "publish/redis_sink.hpp"

using namespace std::chrono;
using docsync::DocVersion;
using docsync::bench::process_cpu_seconds;
using docsync::Publication;
using docsync::Publisher;

namespace {

constexpr int kThreads = 4;
constexpr int kChannels = 10000;
constexpr int kBatch = 64;

double self_cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Throughput {
    double docs_per_s;
    double self_us_per_doc;
    double redis_us_per_doc;
    double self_cores;
};

Throughput throughput(Publisher& sink, int docs, const std::vector<pid_t>& servers) {
    std::atomic<int> next{0};
    double self_before = self_cpu_seconds(), redis_before = 0;
    for (auto p : servers) redis_before += process_cpu_seconds(p);
    auto started = steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            std::vector<std::string> channels(kBatch);
            std::vector<std::optional<std::string>> bodies(kBatch);
            for (;;) {
                int first = next.fetch_add(kBatch);
                if (first >= docs) return;
                int n = std::min(kBatch, docs - first);
                std::vector<Publication> batch;
                for (int k = 0; k < n; ++k) {
                    int i = first + k;
                    channels[static_cast<std::size_t>(k)] = "db:order:" + std::to_string(i % kChannels);
                    bodies[static_cast<std::size_t>(k)] = docsync::bench::sample_doc(i);
                    batch.push_back({&channels[static_cast<std::size_t>(k)], &bodies[static_cast<std::size_t>(k)],
                                     DocVersion{1, static_cast<std::uint64_t>(i + 1)}});
                }
                for (const auto& e : sink.publish_many(batch))
                    if (e) throw *e;
            }
        });
    for (auto& th : threads) th.join();
    double wall = duration<double>(steady_clock::now() - started).count();
    double redis_after = 0;
    for (auto p : servers) redis_after += process_cpu_seconds(p);
    double self = self_cpu_seconds() - self_before;
    return {docs / wall, self * 1e6 / docs, (redis_after - redis_before) * 1e6 / docs, self / wall};
}

struct Latency {
    double p50_ms, p99_ms, max_ms;
};

Latency steady(Publisher& sink, int seconds, int rate, std::uint64_t lsn_base) {
    std::vector<std::vector<double>> samples(kThreads);
    std::vector<std::thread> threads;
    auto start = steady_clock::now() + milliseconds(50);
    int per_thread = seconds * rate / kThreads;
    auto period = duration<double>(1.0 / rate);
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int k = 0; k < per_thread; ++k) {
                int i = k * kThreads + t;
                auto due = start + duration_cast<steady_clock::duration>(period * i);
                std::this_thread::sleep_until(due);
                sink.publish("db:order:" + std::to_string(i % kChannels), docsync::bench::sample_doc(i),
                             DocVersion{1, lsn_base + static_cast<std::uint64_t>(i + 1)});
                samples[static_cast<std::size_t>(t)].push_back(duration<double, std::milli>(steady_clock::now() - due).count());
            }
        });
    for (auto& th : threads) th.join();
    std::vector<double> all;
    for (auto& s : samples) all.insert(all.end(), s.begin(), s.end());
    std::sort(all.begin(), all.end());
    auto at = [&](double q) { return all[std::min(all.size() - 1, static_cast<std::size_t>(q * all.size()))]; };
    return {at(0.50), at(0.99), all.back()};
}

// `base`: the docs/s the ratio is of; 0 sets it to this row's (the first cluster row); nullptr: none.
void row(const char* name, Publisher& sink, int docs, int seconds, int rate, const std::vector<pid_t>& servers,
         double* base) {
    throughput(sink, std::max(1, docs / 4), servers);  // warm up: connections, scripts, every key once
    auto t = throughput(sink, docs, servers);
    if (base != nullptr && *base == 0) *base = t.docs_per_s;
    auto l = steady(sink, seconds, rate, 1u << 30);
    std::string ratio = "—";
    if (base != nullptr) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f×", t.docs_per_s / *base);
        ratio = buf;
    }
    std::printf("| %s | %.0f | %s | %.1f | %.2f | %.1f | %.3f | %.3f | %.3f |\n", name, t.docs_per_s, ratio.c_str(),
                t.self_us_per_doc, t.self_cores, t.redis_us_per_doc, l.p50_ms,
                l.p99_ms, l.max_ms);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);  // as docsync-worker: a closed socket is an error, not the end
    int docs = 60000, rate_seconds = 5, rate = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--docs") == 0) docs = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--rate-seconds") == 0) rate_seconds = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--rate") == 0) rate = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--docs N] [--rate-seconds S] [--rate DOCS_PER_S]\n", argv[0]);
            return 2;
        }
    }
    if (docs < 1 || rate_seconds < 1 || rate < kThreads) {
        std::fprintf(stderr, "--docs, --rate-seconds and --rate must be positive (--rate at least 4)\n");
        return 2;
    }
    try {
        std::printf("%d threads publishing batches of %d (throughput), %d docs per run, %d channels; steady %d docs/s "
                    "for %d s, one doc a call; %u CPUs\n\n",
                    kThreads, kBatch, docs, kChannels, rate, rate_seconds, std::thread::hardware_concurrency());
        std::printf("| sink | docs/s | vs 1 master | worker µs CPU/doc | worker cores | redis µs CPU/doc | publish p50 ms "
                    "| p99 ms | max ms |\n");
        std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        {
            docsync::testing::RedisServer redis;
            docsync::publish::RedisSink sink(redis.address());
            row("redis:// (one server)", sink, docs, rate_seconds, rate, {redis.pid()}, nullptr);
        }
        double base = 0;
        for (int masters : {1, 3, 6}) {
            docsync::testing::RedisTestCluster cluster(masters);
            docsync::publish::RedisClusterSink sink(cluster.address());
            std::vector<pid_t> servers;
            for (int n = 0; n < cluster.size(); ++n) servers.push_back(cluster.node(n).pid());
            std::string name = "redis-cluster://, " + std::to_string(masters) + (masters == 1 ? " master" : " masters");
            row(name.c_str(), sink, docs, rate_seconds, rate, servers, &base);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "benchmark failed: %s\n", e.what());
        return 1;
    }
    return 0;
}
