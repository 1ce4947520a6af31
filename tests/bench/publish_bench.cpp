// Sink throughput and publish latency, every sink in one run on the same workload.
//   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2 --target bench-publish_bench
//   build/rel/bench-publish_bench [--docs 40000] [--rate-seconds 5]
// 1. Throughput: 4 threads publish --docs docs (about 200 bytes each, over 10 000 channels) as fast as
//    the sink takes them; docs/s.
// 2. Steady load: 1 000 docs/s for --rate-seconds over 10 000 channels from 4 threads; p50/p99/max of
//    the publish call (the sink's share of commit-to-publish latency: the call returns when the doc
//    is durable for the sink).
// Sinks: stdout (to /dev/null), file:PATH (a temporary file, fsync'd), redis:// (a redis-server
// started here on a free loopback port, --save '').
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/sample_doc.hpp"
#include "integration/redis_server.hpp"
#include "publish/jsonl_sink.hpp"
#include "publish/redis_sink.hpp"

using namespace std::chrono;
using docsync::DocVersion;
using docsync::Publisher;

namespace {

constexpr int kThreads = 4;
constexpr int kChannels = 10000;

double throughput(Publisher& sink, int docs) {
    std::atomic<int> next{0};
    auto started = steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (int i = next++; i < docs; i = next++)
                sink.publish("db:order:" + std::to_string(i % kChannels), docsync::bench::sample_doc(i),
                             DocVersion{1, static_cast<std::uint64_t>(i + 1)});
        });
    for (auto& th : threads) th.join();
    return docs / duration<double>(steady_clock::now() - started).count();
}

struct Latency {
    double p50_ms, p99_ms, max_ms;
    int docs;
};

Latency steady(Publisher& sink, int seconds, std::uint64_t lsn_base) {
    // Each thread publishes every kThreads ms: 1 000 docs/s in all, on a fixed schedule (latency is
    // measured from the scheduled time, so a stall also delays the docs queued behind it).
    std::vector<std::vector<double>> samples(kThreads);
    std::vector<std::thread> threads;
    auto start = steady_clock::now() + milliseconds(50);
    int per_thread = seconds * 1000 / kThreads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int k = 0; k < per_thread; ++k) {
                auto due = start + microseconds(static_cast<long>(k) * kThreads * 1000 + t * 1000);
                std::this_thread::sleep_until(due);
                int i = k * kThreads + t;
                sink.publish("db:order:" + std::to_string(i % kChannels), docsync::bench::sample_doc(i),
                             DocVersion{1, lsn_base + static_cast<std::uint64_t>(i + 1)});
                samples[t].push_back(duration<double, std::milli>(steady_clock::now() - due).count());
            }
        });
    for (auto& th : threads) th.join();
    std::vector<double> all;
    for (auto& s : samples) all.insert(all.end(), s.begin(), s.end());
    std::sort(all.begin(), all.end());
    auto at = [&](double q) { return all[std::min(all.size() - 1, static_cast<std::size_t>(q * all.size()))]; };
    return {at(0.50), at(0.99), all.back(), static_cast<int>(all.size())};
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);  // as docsync-worker: a closed socket is an error, not the end
    int docs = 40000, rate_seconds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--docs") == 0) docs = std::atoi(argv[i + 1]);
        else if (std::strcmp(argv[i], "--rate-seconds") == 0) rate_seconds = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--docs N] [--rate-seconds S]\n", argv[0]);
            return 2;
        }
    }
    if (docs < 1 || rate_seconds < 1) {
        std::fprintf(stderr, "--docs and --rate-seconds must be positive\n");
        return 2;
    }
    try {
        std::printf("%d publishing threads, %d docs per throughput run, %d channels, steady 1000 docs/s for %d s\n\n",
                    kThreads, docs, kChannels, rate_seconds);
        std::printf("| sink | docs/s (4 threads) | publish p50 ms | p99 ms | max ms | extra |\n");
        std::printf("| --- | ---: | ---: | ---: | ---: | --- |\n");

        int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        {
            auto sink = docsync::publish::JsonlSink::open_stdout(devnull);
            double rate = throughput(*sink, docs);
            auto lat = steady(*sink, rate_seconds, 1u << 30);
            std::printf("| stdout (to /dev/null) | %.0f | %.3f | %.3f | %.3f | |\n", rate, lat.p50_ms, lat.p99_ms,
                        lat.max_ms);
        }
        ::close(devnull);
        {
            char tmpl[] = "/tmp/docsync-bench-XXXXXX";
            if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
            std::string path = std::string(tmpl) + "/docs.jsonl";
            {
                auto sink = docsync::publish::JsonlSink::open_file(path);
                double rate = throughput(*sink, docs);
                auto syncs_after_burst = sink->sync_count();
                auto lat = steady(*sink, rate_seconds, 1u << 30);
                std::printf("| file (fsync'd) | %.0f | %.3f | %.3f | %.3f | %.1f docs per fsync in the burst |\n", rate,
                            lat.p50_ms, lat.p99_ms, lat.max_ms,
                            static_cast<double>(docs) / static_cast<double>(std::max<std::uint64_t>(1, syncs_after_burst)));
            }
            std::filesystem::remove_all(tmpl);
        }
        {
            docsync::testing::RedisServer redis;
            docsync::publish::RedisSink sink(redis.address());
            double rate = throughput(sink, docs);
            auto lat = steady(sink, rate_seconds, 1u << 30);
            std::printf("| redis (loopback, --save '') | %.0f | %.3f | %.3f | %.3f | |\n", rate, lat.p50_ms,
                        lat.p99_ms, lat.max_ms);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "benchmark failed: %s\n", e.what());
        return 1;
    }
    return 0;
}
