// Patches against whole docs through one docsync-gateway, measured from a client process apart from
// it, against a docsync-gateway and a redis-server started by tests/bench/patch_fanout.sh:
//
//   bench-patch_fanout_bench --port P --redis-port R --gateway-pid PID
//                            [--clients 10000] [--entries 342] [--publishes 10] [--rounds 3] [--interval-ms 250]
//                            [--ask-patches 1]
//
// One channel (db:bench:board) holds a leaderboard of --entries scores (342: about 50 kB). --clients
// SSE streams follow it with patches=1, all open at once, each sent the retained doc first. Then
// --rounds rounds, each of two blocks of --publishes publishes (patches first in odd rounds, whole
// docs first in even ones), each publish changing one score, published with the worker's own Redis
// sink (publish::RedisSink, its script):
//   - patch block: a sink with a patcher (--patches on): the key is SET to the whole doc and the
//     message is the patch from the doc published before;
//   - whole block: a sink without (--patches off): the key is SET and the message is the whole doc.
// Each block starts with one publish that is not counted (after a whole block the patcher's last doc
// is not the key's, so the script sends that one whole).
// With --ask-patches 0 the streams do not ask for patches: in the patch blocks the gateway applies
// each patch to its doc and sends them the whole doc, which measures what patches cost clients that
// did not ask for them.
// Between publishes every stream must have the new version (at most 10 s) and --interval-ms must
// have passed. Per block: the bytes this process read from the streams (SSE framing included), the
// gateway's CPU (utime + stime from /proc/PID/stat) over the deliveries (events of the block's
// versions), and publish -> the last stream has it.
//
// Every stream checks what it gets: a doc event must be the published envelope of its version (or
// hold the published doc's text), a patch event must name the version the stream holds as its base,
// and carry the published patch (or one that, applied to the base, gives the new doc byte for byte);
// every 500th stream also holds the doc's text and applies each patch to it with
// docsync::patch::apply. At the end every stream must hold the last version, and those that hold
// the text the last doc's text byte for byte.
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "bench/patch_common.hpp"
#include "bench/process_stats.hpp"
#include "bench/sample_doc.hpp"
#include "envelope/envelope.hpp"
#include "patch/json_patch.hpp"
#include "publish/patcher.hpp"
#include "publish/redis_sink.hpp"

using namespace std::chrono;
using docsync::DocVersion;
using docsync::bench::now_ns;
using docsync::bench::process_cpu_seconds;
using docsync::bench::range;

namespace {

const std::string kChannel = "db:bench:board";

// What was published at one version.
struct Published {
    std::string doc;             // the doc's JSON text
    std::string whole;           // its envelope
    std::string patch;           // the patch's envelope (empty for the first version)
    docsync::patch::Patch diff;  // the patch from the version before
};

struct Stream {
    int fd = -1;
    enum State { connecting, header, open, closed } state = connecting;
    std::string buffer;
    bool holds = false;
    DocVersion held;
    bool keeps_text = false;  // every 500th stream applies the patches itself
    std::string text;
};

struct Counts {
    std::size_t bytes = 0, docs = 0, patches = 0, deliveries = 0;
};

class Streams {
public:
    // `patches`: the streams ask for patches (patches=1).
    Streams(int port, std::size_t count, bool patches, const std::map<DocVersion, Published>& published)
        : port_(port), streams_(count), published_(published) {
        epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
        request_ = "GET /v1/sse?channel=" + kChannel + (patches ? "&patches=1" : "") +
                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n";
        for (std::size_t i = 0; i < count; i += 500) streams_[i].keeps_text = true;
    }
    ~Streams() {
        for (auto& s : streams_)
            if (s.fd >= 0) ::close(s.fd);
        ::close(epoll_);
    }

    // Opens them all, at most `window` waiting for their first doc at once.
    void open(std::size_t window, seconds limit) {
        auto deadline = steady_clock::now() + limit;
        std::size_t next = 0;
        while (holding_ + failures_ < streams_.size()) {
            while (next < streams_.size() && next - holding_ - failures_ < window) start(next++);
            poll_once(10);
            if (steady_clock::now() > deadline)
                throw std::runtime_error("only " + std::to_string(holding_) + " streams had the first doc after " +
                                         std::to_string(limit.count()) + " s");
        }
        if (failures_) throw std::runtime_error(std::to_string(failures_) + " streams failed; the first: " + first_failure_);
    }

    void poll_once(int timeout_ms) {
        epoll_event events[1024];
        int n = ::epoll_wait(epoll_, events, 1024, timeout_ms);
        for (int i = 0; i < n; ++i) handle(events[i].data.u32, events[i].events);
    }

    // Counts, from now on, the streams that reach `v` (or newer) and the time the last one did.
    void watch(DocVersion v) {
        watched_ = v;
        reached_ = 0;
        last_reached_ = 0;
    }
    std::size_t reached() const { return reached_; }
    std::int64_t last_reached() const { return last_reached_; }
    std::size_t live() const { return streams_.size() - failures_; }
    const Counts& counts() const { return counts_; }
    std::size_t failures() const { return failures_; }
    const std::string& first_failure() const { return first_failure_; }
    std::size_t other_patch_text() const { return other_patch_text_; }
    std::size_t applied() const { return applied_; }

    // Streams not at `last`, and streams holding the text whose text is not `text`.
    std::pair<std::size_t, std::size_t> check_end(DocVersion last, const std::string& text) const {
        std::size_t behind = 0, wrong = 0;
        for (const auto& s : streams_) {
            if (s.state == Stream::closed) continue;
            if (!s.holds || s.held != last) ++behind;
            if (s.keeps_text && s.text != text) ++wrong;
        }
        return {behind, wrong};
    }

private:
    void start(std::size_t i) {
        Stream& s = streams_[i];
        std::string why;
        s.fd = docsync::bench::connect_loopback(epoll_, port_, static_cast<std::uint32_t>(i), why);
        if (s.fd < 0) fail(i, why);
    }

    void fail(std::size_t i, const std::string& why) {
        Stream& s = streams_[i];
        if (s.state == Stream::closed) return;
        if (s.fd >= 0) ::close(s.fd);
        s.fd = -1;
        s.state = Stream::closed;
        ++failures_;
        if (s.holds) --holding_;
        if (first_failure_.empty()) first_failure_ = "stream " + std::to_string(i) + ": " + why;
    }

    void handle(std::uint32_t i, std::uint32_t events) {
        Stream& s = streams_[i];
        if (s.state == Stream::closed) return;
        if (s.state == Stream::connecting) {
            if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
            if (auto why = docsync::bench::send_request_when_connected(epoll_, s.fd, i, request_);
                !why.empty())
                return fail(i, why);
            s.state = Stream::header;
            return;
        }
        char data[65536];
        for (;;) {
            ssize_t n = ::recv(s.fd, data, sizeof data, 0);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (n <= 0) return fail(i, n == 0 ? "the gateway closed the stream" : std::string("read: ") + std::strerror(errno));
            counts_.bytes += static_cast<std::size_t>(n);
            s.buffer.append(data, static_cast<std::size_t>(n));
            if (s.state == Stream::header) {
                auto blank = s.buffer.find("\r\n\r\n");
                if (blank == std::string::npos) continue;
                if (s.buffer.compare(0, 12, "HTTP/1.1 200") != 0)
                    return fail(i, "answered " + s.buffer.substr(0, std::min<std::size_t>(s.buffer.size(), 300)));
                s.buffer.erase(0, blank + 4);
                s.state = Stream::open;
            }
            if (!events_of(i) || s.state == Stream::closed) return;
        }
    }

    // Handles the complete events in the stream's buffer; false when the stream failed.
    bool events_of(std::uint32_t i) {
        Stream& s = streams_[i];
        std::size_t at = 0;
        for (;;) {
            auto end = s.buffer.find("\n\n", at);
            if (end == std::string::npos) break;
            std::string_view event(s.buffer.data() + at, end - at);
            at = end + 2;
            bool is_doc = event.starts_with("event: doc\n"), is_patch = event.starts_with("event: patch\n");
            if (!is_doc && !is_patch) {
                if (event.starts_with("event: error\n") || event.starts_with("event: stream-error\n"))
                    return fail(i, std::string(event.substr(0, 300))), false;
                continue;  // a notice or a comment
            }
            auto data_at = event.find("\ndata: ");
            if (data_at == std::string_view::npos) return fail(i, "an event without data"), false;
            std::string_view data = event.substr(data_at + 7);
            std::string why = is_doc ? take_doc(s, data) : take_patch(s, data);
            if (!why.empty()) return fail(i, why), false;
        }
        s.buffer.erase(0, at);
        return true;
    }

    std::string take_doc(Stream& s, std::string_view data) {
        auto v = docsync::bench::version_of(data);
        if (!v) return "a doc event without a version: " + std::string(data.substr(0, 200));
        auto p = published_.find(*v);
        if (p == published_.end()) return "a doc at a version never published";
        if (data != p->second.whole) {
            auto doc = docsync::bench::member_text(data, "doc", "generation");
            if (!doc || *doc != p->second.doc)
                return "a doc event whose doc is not the one published at its version: " + std::string(data.substr(0, 200));
        }
        if (s.holds && *v < s.held) return "a doc older than the one the stream holds";
        bool first = !s.holds;
        count_delivery(s, *v);
        s.holds = true;
        s.held = *v;
        if (s.keeps_text) s.text = p->second.doc;
        ++counts_.docs;
        if (first) ++holding_;
        return {};
    }

    std::string take_patch(Stream& s, std::string_view data) {
        auto v = docsync::bench::version_of(data);
        auto base = docsync::bench::base_of(data);
        if (!v || !base) return "a patch event without its version and base: " + std::string(data.substr(0, 200));
        if (!s.holds || *base != s.held) return "a patch to a base the stream does not hold";
        auto p = published_.find(*v);
        auto b = published_.find(*base);
        if (p == published_.end() || b == published_.end()) return "a patch between versions never published";
        docsync::patch::Patch patch = p->second.diff;
        if (data != p->second.patch) {
            // Not the worker's patch: it must still give the new doc from the base.
            ++other_patch_text_;
            bool merge = data.find(",\"merge\":") != std::string_view::npos;
            auto text = docsync::bench::member_text(data, merge ? "merge" : "patch", "base_generation");
            if (!text) return "a patch event without a patch";
            patch = {merge ? docsync::patch::Form::MergePatch : docsync::patch::Form::JsonPatch, std::string(*text)};
            if (docsync::patch::apply(b->second.doc, patch) != p->second.doc) return "a patch that does not give the published doc";
        }
        if (s.keeps_text) {
            s.text = docsync::patch::apply(s.text, patch);
            ++applied_;
            if (s.text != p->second.doc) return "the doc with the patch applied is not the published doc";
        }
        count_delivery(s, *v);
        s.held = *v;
        ++counts_.patches;
        return {};
    }

    // The event that brings a stream to the watched version (or past it) is a delivery of it.
    void count_delivery(const Stream& s, DocVersion v) {
        if (!watched_.lsn || v < watched_ || (s.holds && s.held >= watched_)) return;
        ++counts_.deliveries;
        ++reached_;
        last_reached_ = now_ns();
    }

    int port_;
    int epoll_;
    std::string request_;
    std::vector<Stream> streams_;
    const std::map<DocVersion, Published>& published_;
    std::size_t holding_ = 0, failures_ = 0, reached_ = 0, other_patch_text_ = 0, applied_ = 0;
    std::int64_t last_reached_ = 0;
    DocVersion watched_{};
    Counts counts_;
    std::string first_failure_;
};

void raise_descriptor_limit(std::size_t wanted) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted)
        throw std::runtime_error("the descriptor limit (" + std::to_string(limit.rlim_cur) + ") is below the " +
                                 std::to_string(wanted) + " this run needs: raise the hard limit (ulimit -Hn)");
}

struct Block {
    bool patches;
    int publishes = 0;
    double bytes = 0, deliveries = 0, cpu = 0;
    std::vector<double> last_ms;
    std::size_t patch_events = 0, doc_events = 0;
};

int run(int port, int redis_port, pid_t gateway, std::size_t clients, bool ask_patches, int entries, int publishes,
        int rounds, int interval_ms) {
    raise_descriptor_limit(clients + 64);
    auto address = docsync::publish::parse_redis_url("redis://127.0.0.1:" + std::to_string(redis_port));
    // The worker's Redis sink twice: with a patcher (--patches on) and without (--patches off).
    docsync::publish::RedisSinkOptions with_patches;
    with_patches.patcher = std::make_shared<docsync::publish::Patcher>(docsync::publish::PatcherOptions{});
    docsync::publish::RedisSink patching(address, with_patches), whole(address);
    std::map<DocVersion, Published> published;
    std::mt19937_64 rng(20261202);
    std::vector<long> scores(static_cast<std::size_t>(entries));
    for (auto& s : scores) s = static_cast<long>(rng() % 1000000);
    DocVersion version{1, 0x3000000};
    std::string doc = docsync::bench::leaderboard_doc(7, scores);
    if (docsync::publish::compact_json(doc) != doc) throw std::runtime_error("the leaderboard is not compact JSON");
    patching.publish(kChannel, doc, version);
    published[version] = {doc, docsync::publish::make_envelope(kChannel, doc, version), {}, {}};

    Streams streams(port, clients, ask_patches, published);
    auto t_open = steady_clock::now();
    streams.open(256, seconds(180));
    std::printf("gateway pid %d: %zu SSE streams %s on %s, each sent the retained doc (%zu bytes of "
                "JSON, envelope %zu bytes) in %.1f s\n",
                static_cast<int>(gateway), clients, ask_patches ? "with patches=1" : "without patches=1", kChannel.c_str(), doc.size(), published[version].whole.size(),
                duration<double>(steady_clock::now() - t_open).count());
    auto settle = [&](milliseconds d) {
        auto until = steady_clock::now() + d;
        while (steady_clock::now() < until) streams.poll_once(20);
    };
    settle(seconds(1));

    std::vector<double> diff_us, apply_us, patch_sizes;
    std::size_t merges = 0, incomplete = 0, patches_made = 0;
    // One publish changing one score through `sink`; the time from the publish call to the moment the
    // last stream had it (-1 when none had).
    auto publish_next = [&](docsync::publish::RedisSink& sink) {
        std::size_t which = rng() % scores.size();
        scores[which] += 1 + static_cast<long>(rng() % 500);
        std::string next = docsync::bench::leaderboard_doc(7, scores);
        DocVersion base = version;
        version.lsn += 0x100;
        Published p{next, docsync::publish::make_envelope(kChannel, next, version), {}, {}};
        auto t = steady_clock::now();
        auto made = docsync::patch::diff(doc, next);
        diff_us.push_back(duration<double, std::micro>(steady_clock::now() - t).count());
        if (!made) throw std::runtime_error("diff made no patch for a changed score");
        t = steady_clock::now();
        if (docsync::patch::apply(doc, *made) != next) throw std::runtime_error("the patch does not give the new doc");
        apply_us.push_back(duration<double, std::micro>(steady_clock::now() - t).count());
        bool merge = made->form == docsync::patch::Form::MergePatch;
        merges += merge;
        // What the sink's patcher makes of the same two texts (the gateway forwards it unchanged).
        p.patch = docsync::publish::make_patch_envelope(
            kChannel, merge ? docsync::publish::EnvelopeKind::MergePatch : docsync::publish::EnvelopeKind::JsonPatch,
            made->text, base, version);
        p.diff = *made;
        patch_sizes.push_back(static_cast<double>(p.patch.size()));
        published[version] = p;
        doc = next;

        streams.watch(version);
        auto next_at = steady_clock::now() + milliseconds(interval_ms);
        std::int64_t t0 = now_ns();
        sink.publish(kChannel, next, version);
        auto deadline = steady_clock::now() + seconds(10);
        while (streams.reached() < streams.live() && steady_clock::now() < deadline) streams.poll_once(5);
        if (streams.reached() < streams.live()) ++incomplete;
        double last = streams.last_reached() ? static_cast<double>(streams.last_reached() - t0) / 1e6 : -1;
        while (steady_clock::now() < next_at) streams.poll_once(5);
        return last;
    };

    std::vector<Block> blocks;
    for (int round = 1; round <= rounds; ++round) {
        for (int half = 0; half < 2; ++half) {
            Block block{(round % 2 == 1) == (half == 0)};
            auto& sink = block.patches ? patching : whole;
            // Not counted: the patcher's last doc is older than the key after a whole block, so the
            // script sends this one whole; from the next on its base is the key's.
            publish_next(sink);
            settle(milliseconds(200));
            auto patches0 = with_patches.patcher->counters().patches;
            Counts c0 = streams.counts();
            double cpu0 = process_cpu_seconds(gateway);
            for (int k = 0; k < publishes; ++k) block.last_ms.push_back(publish_next(sink));
            settle(milliseconds(200));
            const Counts& c1 = streams.counts();
            block.publishes = publishes;
            block.cpu = process_cpu_seconds(gateway) - cpu0;
            block.bytes = static_cast<double>(c1.bytes - c0.bytes);
            block.deliveries = static_cast<double>(c1.deliveries - c0.deliveries);
            block.patch_events = c1.patches - c0.patches;
            block.doc_events = c1.docs - c0.docs;
            patches_made += with_patches.patcher->counters().patches - patches0;
            std::sort(block.last_ms.begin(), block.last_ms.end());
            std::printf("round %d, %-7s: %d publishes, %zu patch events, %zu doc events; read %.0f bytes per publish "
                        "(%.1f per stream); the gateway's CPU %.3f s: %.2f ms per publish, %.2f µs per delivery; "
                        "publish -> last stream p50 %.1f ms, max %.1f ms\n",
                        round, block.patches ? "patches" : "whole", publishes, block.patch_events, block.doc_events,
                        block.bytes / publishes, block.bytes / publishes / static_cast<double>(clients), block.cpu,
                        block.cpu * 1e3 / publishes, block.deliveries ? block.cpu * 1e6 / block.deliveries : 0.0,
                        block.last_ms[block.last_ms.size() / 2], block.last_ms.back());
            std::fflush(stdout);
            blocks.push_back(std::move(block));
        }
    }

    auto [behind, wrong] = streams.check_end(version, doc);
    std::vector<double> byte_ratio, cpu_ratio, patch_bytes, whole_bytes, patch_cpu, whole_cpu;
    for (std::size_t b = 0; b + 1 < blocks.size(); b += 2) {
        const Block& p = blocks[b].patches ? blocks[b] : blocks[b + 1];
        const Block& w = blocks[b].patches ? blocks[b + 1] : blocks[b];
        byte_ratio.push_back(100.0 * p.bytes / w.bytes);
        double pc = p.cpu * 1e6 / p.deliveries, wc = w.cpu * 1e6 / w.deliveries;
        if (wc > 0) cpu_ratio.push_back(pc / wc);
        patch_bytes.push_back(p.bytes / p.publishes / static_cast<double>(clients));
        whole_bytes.push_back(w.bytes / w.publishes / static_cast<double>(clients));
        patch_cpu.push_back(pc);
        whole_cpu.push_back(wc);
    }
    std::sort(diff_us.begin(), diff_us.end());
    std::sort(apply_us.begin(), apply_us.end());
    std::printf("the patches: %s bytes of envelope (whole: %zu), %zu merge patches of %zu; diff p50 %.0f µs, apply p50 %.0f µs "
                "(this process, a %zu-byte doc)\n",
                range(patch_sizes, "%.0f").c_str(), published[version].whole.size(), merges, patch_sizes.size(),
                diff_us[diff_us.size() / 2], apply_us[apply_us.size() / 2], doc.size());
    std::printf("checks: %zu streams failed%s%s; %zu not at the last version; %zu of the %zu streams that apply patches "
                "themselves do not hold the last doc's text (%zu patches applied); %zu patch events not the published "
                "envelope (each checked by applying it); %zu publishes not received by every stream within 10 s\n",
                streams.failures(), streams.failures() ? ", the first: " : "", streams.first_failure().c_str(), behind,
                wrong, (clients + 499) / 500, streams.applied(), streams.other_patch_text(), incomplete);
    std::printf("the sink's script sent %zu patches in the %d counted publishes of the patch blocks\n", patches_made,
                publishes * rounds);
    std::printf("\n| figure (%zu SSE streams, a %zu-byte doc, one score changed per publish, %d rounds of %d + %d) | goal | "
                "patches | whole docs | ratio |\n| --- | --- | --- | --- | --- |\n",
                clients, doc.size(), rounds, publishes, publishes);
    std::printf("| bytes read per stream per publish | ≤ 5 %% | %s | %s | %s %% |\n", range(patch_bytes, "%.0f").c_str(),
                range(whole_bytes, "%.0f").c_str(), range(byte_ratio, "%.2f").c_str());
    std::printf("| the gateway's CPU per delivery | no more | %s µs | %s µs | %s× |\n", range(patch_cpu).c_str(),
                range(whole_cpu).c_str(), range(cpu_ratio, "%.3f").c_str());
    bool all_patched = patches_made == static_cast<std::size_t>(publishes * rounds);
    return streams.failures() || behind || wrong || incomplete || !all_patched ? 1 : 0;
}

[[noreturn]] void usage(const char* argv0) {
    std::fprintf(stderr,
                 "usage: %s --port P --redis-port R --gateway-pid PID [--clients N] [--entries N] [--publishes N] "
                 "[--rounds N] [--interval-ms MS] [--ask-patches 1|0]\n",
                 argv0);
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    docsync::bench::Options opt(argc, argv, 1, usage);
    opt.require({"port", "redis-port", "gateway-pid"});
    try {
        return run(static_cast<int>(opt.num("port", 0)), static_cast<int>(opt.num("redis-port", 0)),
                   static_cast<pid_t>(opt.num("gateway-pid", 0)),
                   static_cast<std::size_t>(opt.num("clients", 10000)), opt.num("ask-patches", 1) != 0,
                   static_cast<int>(opt.num("entries", 342)), static_cast<int>(opt.num("publishes", 10)),
                   static_cast<int>(opt.num("rounds", 3)), static_cast<int>(opt.num("interval-ms", 250)));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "benchmark failed: %s\n", e.what());
        return 1;
    }
}
