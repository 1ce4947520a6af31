// The gateway's figures, measured from a client process apart from the gateway, against a
// docsync-gateway and a redis-server started by tests/bench/gateway.sh and tests/bench/gateway_e2e.sh:
//
//   bench-gateway_bench fanout --port P --redis-port R --gateway-pid PID
//                              [--clients 10000] [--publishes 100] [--interval-ms 250]
//     1. --clients SSE streams on one public channel (db:bench:fanout), all open at once: each must
//        answer 200 and send the channel's retained doc;
//     2. the gateway's memory per idle stream: VmRSS (and Pss, from smaps_rollup) of the gateway with
//        no stream, with half of them and with all of them open and idle for 2 s; the kernel's side of
//        the sockets (slab objects, buffer pages) is not in the gateway's RSS and is shown apart;
//     3. fan-out: --publishes docs, each published with the real Redis sink (publish::RedisSink) at
//        least --interval-ms apart; for each, the time from just before the publish call to the
//        moment the last of the streams had the doc, and the same for every stream.
//
//   bench-gateway_bench e2e --port P --redis-port R --dsn DSN [--docs 100] [--rate 200] [--seconds 20]
//     4. commit → client: one SSE stream follows the --docs channels db:item:1..N of table item(id, v);
//        4 writer connections commit --rate single-row updates per second on a fixed schedule
//        (UPDATE item SET v = v + 1 WHERE id = $1 RETURNING v, autocommit), going round the docs; for
//        every commit (id, v), latency = the client's read of the first doc of id with v or newer
//        minus the moment the commit returned to its writer. A pattern subscriber on Redis
//        (PSUBSCRIBE db:item:*) stamps the same docs as they leave Redis, which splits the latency
//        into the worker's share (commit → Redis) and the gateway's (Redis → client).
//
// One thread drives every stream of `fanout` with epoll, non-blocking sockets. Times are
// CLOCK_REALTIME in both processes (the same host clock). A stream's receive time is taken twice:
// when this process read the bytes ("read"), and the kernel's receive timestamp of the socket
// (SO_TIMESTAMPNS: when the gateway's write reached the client's socket, before this one thread got
// round to reading it: what 10 000 clients on their own machines would see, without the queue of
// one client process reading 10 000 sockets in turn).
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "bench/process_stats.hpp"
#include "bench/sample_doc.hpp"
#include "publish/redis_sink.hpp"

using namespace std::chrono;
using docsync::DocVersion;
using docsync::bench::process_cpu_seconds;

namespace {

std::int64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

struct Quantiles {
    std::size_t n = 0;
    double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

Quantiles quantiles(std::vector<double> v) {
    Quantiles q;
    q.n = v.size();
    if (v.empty()) return q;
    std::sort(v.begin(), v.end());
    auto at = [&](double p) { return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))]; };
    q.p50 = at(0.50);
    q.p90 = at(0.90);
    q.p99 = at(0.99);
    q.max = v.back();
    return q;
}

std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* format, ...) {
    char text[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(text, sizeof text, format, args);
    va_end(args);
    return text;
}

// A field of /proc/PID/status or /proc/PID/smaps_rollup, in kB (-1 when absent).
long proc_kb(pid_t pid, const char* file, const char* field) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
    std::string line, name = std::string(field) + ":";
    while (std::getline(in, line))
        if (line.rfind(name, 0) == 0) return std::stol(line.substr(name.size()));
    return -1;
}

double self_cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The kernel's memory for sockets, machine-wide: bytes of the slab objects every TCP socket holds
// (its sock, its inode, its file, the epoll entries watching it) and of the buffers queued on TCP
// sockets (/proc/net/sockstat "mem", pages).
struct KernelSockets {
    long tcp_inuse = 0;
    double slab_bytes = 0;
    double buffer_bytes = 0;
};

KernelSockets kernel_sockets() {
    KernelSockets k;
    std::ifstream sockstat("/proc/net/sockstat");
    std::string word;
    while (sockstat >> word) {
        if (word != "TCP:") continue;
        std::string key;
        long value;
        while (sockstat >> key >> value) {
            if (key == "inuse") k.tcp_inuse = value;
            if (key == "mem") {
                k.buffer_bytes = static_cast<double>(value) * static_cast<double>(::sysconf(_SC_PAGESIZE));
                break;
            }
        }
        break;
    }
    std::ifstream slab("/proc/slabinfo");
    std::string line;
    while (std::getline(slab, line)) {
        std::istringstream f(line);
        std::string name;
        long active = 0, total = 0, size = 0;
        if (!(f >> name >> active >> total >> size)) continue;
        if (name == "TCP" || name == "sock_inode_cache" || name == "filp" || name == "eventpoll_epi" ||
            name == "eventpoll_pwq" || name == "dentry")
            k.slab_bytes += static_cast<double>(active) * static_cast<double>(size);
    }
    return k;
}

void raise_descriptor_limit(std::size_t wanted) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted)
        throw std::runtime_error("the descriptor limit (" + std::to_string(limit.rlim_cur) + ") is below the " +
                                 std::to_string(wanted) + " this run needs: raise the hard limit (ulimit -Hn)");
}

// One GET on a fresh blocking connection; the whole answer (the gateway closes it, or Content-Length).
std::string http_get(int port, const std::string& target) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot connect to the gateway on port " + std::to_string(port));
    }
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    std::string out;
    char chunk[4096];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) <= 0) break;
        auto n = ::read(fd, chunk, sizeof chunk);
        if (n <= 0) break;
        out.append(chunk, static_cast<std::size_t>(n));
        auto blank = out.find("\r\n\r\n");
        auto cl = out.find("Content-Length: ");
        if (blank != std::string::npos && cl != std::string::npos && cl < blank &&
            out.size() >= blank + 4 + std::stoul(out.substr(cl + 16)))
            break;
    }
    ::close(fd);
    return out;
}

// A number field of the gateway's /healthz.
long healthz_field(int port, const std::string& field) {
    std::string answer = http_get(port, "/healthz");
    auto at = answer.find("\"" + field + "\":");
    if (at == std::string::npos) return -1;
    return std::stol(answer.substr(at + field.size() + 3));
}

// The integer after `key` in `text` from `from`, or -1.
long long int_after(const std::string& text, std::size_t from, std::string_view key) {
    auto at = text.find(key, from);
    if (at == std::string::npos) return -1;
    return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
}

// ---------------------------------------------------------------------------------------------
// fanout: many SSE streams on one channel, one epoll thread.

const std::string kFanoutChannel = "db:bench:fanout";

struct Stream {
    int fd = -1;
    enum State { connecting, header, open, closed } state = connecting;
    std::string buffer;
    long long last_id = -1;
    bool first_doc = false;
};

class Streams {
public:
    Streams(int port, std::size_t count) : port_(port), streams_(count) {
        epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
        request_ = "GET /v1/sse?channel=" + kFanoutChannel +
                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n";
    }
    ~Streams() {
        for (auto& s : streams_)
            if (s.fd >= 0) ::close(s.fd);
        ::close(epoll_);
    }

    std::size_t size() const { return streams_.size(); }
    std::size_t ready() const { return ready_; }
    std::size_t closed() const { return closed_; }
    const std::string& first_failure() const { return first_failure_; }
    std::size_t failures() const { return failures_; }

    // Opens streams [begin, end): at most `window` between connect and first doc at once; throws when
    // one is refused or they are not all ready within `limit`.
    void open(std::size_t begin, std::size_t end, std::size_t window, milliseconds limit) {
        auto deadline = steady_clock::now() + limit;
        std::size_t next = begin;
        while (ready_ + failures_ < end) {
            while (next < end && started_ - ready_ - failures_ < window) start(next++);
            poll_once(10);
            if (steady_clock::now() > deadline)
                throw std::runtime_error(fmt("only %zu of %zu streams were ready after %lld s", ready_, end,
                                             static_cast<long long>(duration_cast<seconds>(limit).count())));
        }
        if (failures_) throw std::runtime_error(fmt("%zu streams failed; the first: %s", failures_, first_failure_.c_str()));
    }

    // Waits for events at most `timeout_ms` and handles them.
    void poll_once(int timeout_ms) {
        epoll_event events[1024];
        int n = ::epoll_wait(epoll_, events, 1024, timeout_ms);
        for (int i = 0; i < n; ++i) handle(events[i].data.u32, events[i].events);
    }

    // Every doc event of `id` read from now on is reported: (stream, kernel timestamp, read time).
    void watch(long long id) {
        watched_ = id;
        got_ = 0;
    }
    std::size_t got() const { return got_; }
    std::vector<std::int64_t> kernel_at, read_at;  // per stream, for the watched id (0: not yet)
    std::size_t no_timestamp = 0;                   // reads without a usable kernel timestamp (the read time stands in)

private:
    void start(std::size_t i) {
        ++started_;
        Stream& s = streams_[i];
        std::string why;
        s.fd = docsync::bench::connect_loopback(epoll_, port_, static_cast<std::uint32_t>(i), why);
        if (s.fd < 0) return fail(i, why);
        // Receive times of every read; nothing arrives before the request goes out on EPOLLOUT.
        int one = 1;
        ::setsockopt(s.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    }

    void fail(std::size_t i, const std::string& why) {
        Stream& s = streams_[i];
        if (s.state == Stream::closed) return;
        bool was_ready = s.state == Stream::open && s.first_doc;
        if (s.fd >= 0) ::close(s.fd);
        s.fd = -1;
        s.state = Stream::closed;
        if (was_ready) {
            ++closed_;
        } else {
            ++failures_;
        }
        if (first_failure_.empty()) first_failure_ = fmt("stream %zu: ", i) + why;
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
        char data[16384];
        char control[CMSG_SPACE(sizeof(timespec))];
        for (;;) {
            iovec iov{data, sizeof data};
            msghdr msg{};
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control;
            msg.msg_controllen = sizeof control;
            ssize_t n = ::recvmsg(s.fd, &msg, 0);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (n <= 0) return fail(i, n == 0 ? "the gateway closed the stream" : std::string("read: ") + std::strerror(errno));
            std::int64_t read_at = now_ns();
            std::int64_t kernel = 0;
            for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                    timespec ts{};
                    std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    kernel = static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
                }
            s.buffer.append(data, static_cast<std::size_t>(n));
            if (s.state == Stream::header) {
                auto blank = s.buffer.find("\r\n\r\n");
                if (blank == std::string::npos) continue;
                if (s.buffer.compare(0, 12, "HTTP/1.1 200") != 0)
                    return fail(i, "answered " + s.buffer.substr(0, std::min<std::size_t>(s.buffer.size(), 300)));
                s.buffer.erase(0, blank + 4);
                s.state = Stream::open;
            }
            events_of(i, kernel, read_at);
            if (s.state == Stream::closed) return;
        }
    }

    // Handles the complete events in the stream's buffer.
    void events_of(std::uint32_t i, std::int64_t kernel, std::int64_t read_at) {
        Stream& s = streams_[i];
        std::size_t at = 0;
        for (;;) {
            auto end = s.buffer.find("\n\n", at);
            if (end == std::string::npos) break;
            if (s.buffer.compare(at, 11, "event: doc\n") == 0) {
                auto key = s.buffer.find("\"doc\":{\"id\":", at);
                long long id = key < end ? int_after(s.buffer, key, "\"doc\":{\"id\":") : -1;
                if (id < 0)
                    return fail(i, "a doc event without the doc's id: " + s.buffer.substr(at, std::min<std::size_t>(end - at, 300)));
                if (!s.first_doc) {
                    if (id != 0) return fail(i, fmt("the first doc was %lld, not the retained doc 0", id));
                    s.first_doc = true;
                    ++ready_;
                }
                if (id == watched_ && s.last_id < id) {
                    // A kernel timestamp after this read's own clock reading would not be one.
                    if (kernel == 0 || kernel > read_at) ++no_timestamp;
                    kernel_at[i] = kernel && kernel <= read_at ? kernel : read_at;
                    this->read_at[i] = read_at;
                    ++got_;
                }
                s.last_id = std::max(s.last_id, id);
            } else if (s.buffer.compare(at, 13, "event: error\n") == 0) {
                return fail(i, "an error event: " + s.buffer.substr(at, end - at));
            }
            at = end + 2;
        }
        s.buffer.erase(0, at);
    }

    int port_;
    int epoll_;
    std::string request_;
    std::vector<Stream> streams_;
    std::size_t started_ = 0, ready_ = 0, failures_ = 0, closed_ = 0;
    std::string first_failure_;
    long long watched_ = -1;
    std::size_t got_ = 0;
};

struct Memory {
    long rss_kb, anon_kb, pss_kb;
};

Memory memory_of(pid_t pid) {
    return {proc_kb(pid, "status", "VmRSS"), proc_kb(pid, "status", "RssAnon"), proc_kb(pid, "smaps_rollup", "Pss")};
}

int fanout(int port, int redis_port, pid_t gateway, std::size_t clients, int publishes, int interval_ms) {
    raise_descriptor_limit(clients + 64);
    docsync::publish::RedisSink sink(docsync::publish::parse_redis_url("redis://127.0.0.1:" + std::to_string(redis_port)));
    std::uint64_t lsn = 0x1000000;
    sink.publish(kFanoutChannel, docsync::bench::sample_doc(0), DocVersion{1, lsn});
    std::this_thread::sleep_for(milliseconds(500));
    Memory m0 = memory_of(gateway);
    KernelSockets k0 = kernel_sockets();
    std::printf("gateway pid %d, port %d; %zu SSE streams on %s; the gateway with none: VmRSS %ld kB, RssAnon %ld kB, "
                "Pss %ld kB\n",
                static_cast<int>(gateway), port, clients, kFanoutChannel.c_str(), m0.rss_kb, m0.anon_kb, m0.pss_kb);

    // 1. Open them all: the first half, a reading, then the rest.
    Streams streams(port, clients);
    streams.kernel_at.assign(clients, 0);
    streams.read_at.assign(clients, 0);
    std::size_t half = clients / 2;
    auto t_open = steady_clock::now();
    streams.open(0, half, 256, seconds(120));
    auto settle = [&](milliseconds d) {
        auto until = steady_clock::now() + d;
        while (steady_clock::now() < until) streams.poll_once(50);
    };
    settle(seconds(2));
    Memory m_half = memory_of(gateway);
    streams.open(half, clients, 256, seconds(120));
    double open_s = duration<double>(steady_clock::now() - t_open).count() - 2.0;
    long held = healthz_field(port, "sse_streams");
    long followers = healthz_field(port, "followers");
    std::printf("1. opened %zu streams (each answered 200 and sent the retained doc) in %.1f s; the gateway's /healthz: "
                "sse_streams %ld, followers %ld\n",
                streams.ready(), open_s, held, followers);

    // 2. Idle: no doc for 2 s.
    settle(seconds(2));
    Memory m_all = memory_of(gateway);
    KernelSockets k1 = kernel_sockets();
    double per_rss = static_cast<double>(m_all.rss_kb - m0.rss_kb) * 1024.0 / static_cast<double>(clients);
    double per_pss = static_cast<double>(m_all.pss_kb - m0.pss_kb) * 1024.0 / static_cast<double>(clients);
    double per_slope = static_cast<double>(m_all.rss_kb - m_half.rss_kb) * 1024.0 / static_cast<double>(clients - half);
    long sockets = k1.tcp_inuse - k0.tcp_inuse;
    std::printf("2. the gateway idle with %zu streams: VmRSS %ld kB (RssAnon %ld, Pss %ld); with %zu: VmRSS %ld kB\n"
                "   per stream: %.0f B of RSS over none, %.0f B of Pss; %.0f B of RSS from %zu to %zu streams\n"
                "   the kernel, not in RSS (machine-wide, both ends of %ld TCP sockets more, a parallel build adds "
                "noise): slab %.0f B per socket; TCP buffers queued machine-wide %.0f kB before, %.0f kB after\n",
                clients, m_all.rss_kb, m_all.anon_kb, m_all.pss_kb, half, m_half.rss_kb, per_rss, per_pss, per_slope,
                half, clients, sockets, sockets > 0 ? (k1.slab_bytes - k0.slab_bytes) / static_cast<double>(sockets) : 0.0,
                k0.buffer_bytes / 1024, k1.buffer_bytes / 1024);

    // 3. Fan-out.
    std::vector<double> first_kernel, last_kernel, last_read, all_kernel, all_read, publish_call;
    all_kernel.reserve(clients * static_cast<std::size_t>(publishes));
    all_read.reserve(clients * static_cast<std::size_t>(publishes));
    std::size_t incomplete = 0, timestamps_missing = 0;
    double cpu0 = process_cpu_seconds(gateway), self0 = self_cpu_seconds();
    auto fan_start = steady_clock::now();
    for (int k = 1; k <= publishes; ++k) {
        std::fill(streams.kernel_at.begin(), streams.kernel_at.end(), 0);
        std::fill(streams.read_at.begin(), streams.read_at.end(), 0);
        streams.watch(k);
        auto next_at = steady_clock::now() + milliseconds(interval_ms);
        std::int64_t t0 = now_ns();
        sink.publish(kFanoutChannel, docsync::bench::sample_doc(k), DocVersion{1, lsn + static_cast<std::uint64_t>(k)});
        publish_call.push_back(ms(now_ns() - t0));
        auto deadline = steady_clock::now() + seconds(10);
        while (streams.got() < clients - streams.closed() && steady_clock::now() < deadline) streams.poll_once(5);
        if (streams.got() < clients - streams.closed()) ++incomplete;
        std::int64_t fk = INT64_MAX, lk = 0, lr = 0;
        for (std::size_t i = 0; i < clients; ++i) {
            if (!streams.read_at[i]) continue;
            fk = std::min(fk, streams.kernel_at[i]);
            lk = std::max(lk, streams.kernel_at[i]);
            lr = std::max(lr, streams.read_at[i]);
            all_kernel.push_back(ms(streams.kernel_at[i] - t0));
            all_read.push_back(ms(streams.read_at[i] - t0));
        }
        if (lk) first_kernel.push_back(ms(fk - t0));
        last_kernel.push_back(ms(lk - t0));
        last_read.push_back(ms(lr - t0));
        while (steady_clock::now() < next_at) streams.poll_once(5);
    }
    timestamps_missing = streams.no_timestamp;
    double fan_wall = duration<double>(steady_clock::now() - fan_start).count();
    double gw_cpu = process_cpu_seconds(gateway) - cpu0, self_cpu = self_cpu_seconds() - self0;
    auto lk = quantiles(last_kernel), lr = quantiles(last_read), ak = quantiles(all_kernel), ar = quantiles(all_read),
         pc = quantiles(publish_call), fk = quantiles(first_kernel);
    std::size_t deliveries = all_read.size();
    std::printf("3. fan-out: %d publishes %d ms apart to %zu streams (%zu deliveries; %zu publishes not received by every "
                "stream within 10 s; %zu streams closed; %zu reads without a usable kernel timestamp)\n"
                "   publish call (RedisSink::publish, retain + PUBLISH script): p50 %.2f ms, p99 %.2f ms\n"
                "   publish -> first stream, kernel receive time: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f ms\n"
                "   publish -> last stream, kernel receive time:  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f ms\n"
                "   publish -> last stream, read by this client:  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f ms\n"
                "   publish -> each stream, kernel receive time:  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f ms\n"
                "   publish -> each stream, read by this client:  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f ms\n"
                "   CPU: the gateway %.2f s (%.2f µs per delivered doc, %.1f ms per publish, %.0f %% of a core over the "
                "run), this client %.2f s (%.2f µs per delivered doc)\n",
                publishes, interval_ms, clients, deliveries, incomplete, streams.closed(), timestamps_missing, pc.p50,
                pc.p99, fk.p50, fk.p90, fk.p99, fk.max, lk.p50, lk.p90, lk.p99, lk.max, lr.p50, lr.p90, lr.p99, lr.max, ak.p50, ak.p90, ak.p99, ak.max,
                ar.p50, ar.p90, ar.p99, ar.max, gw_cpu, deliveries ? gw_cpu * 1e6 / static_cast<double>(deliveries) : 0.0,
                gw_cpu * 1e3 / publishes, 100.0 * gw_cpu / fan_wall, self_cpu,
                deliveries ? self_cpu * 1e6 / static_cast<double>(deliveries) : 0.0);
    Memory m_end = memory_of(gateway);
    std::printf("   the gateway after the fan-out: VmRSS %ld kB, peak VmHWM %ld kB\n", m_end.rss_kb,
                proc_kb(gateway, "status", "VmHWM"));

    std::printf("\n| figure | target | measured |\n| --- | --- | --- |\n");
    std::printf("| concurrent SSE streams held by one gateway | ≥ 10 000 | %zu open at once, every one answered 200 and "
                "sent the retained doc (/healthz: %ld streams) |\n",
                streams.ready(), held);
    std::printf("| gateway memory per idle stream (VmRSS with %zu − with none, / %zu) | ≤ 16 KB | %.1f KB (Pss %.1f KB; "
                "%.1f KB from %zu to %zu); kernel socket memory apart |\n",
                clients, clients, per_rss / 1024, per_pss / 1024, per_slope / 1024, half, clients);
    std::printf("| fan-out to %zu streams, publish → last stream, p99 (%d publishes) | ≤ 100 ms | %.1f ms kernel "
                "receive time (p50 %.1f, max %.1f); %.1f ms read by one client process (p50 %.1f, max %.1f) |\n",
                clients, publishes, lk.p99, lk.p50, lk.max, lr.p99, lr.p50, lr.max);
    std::printf("| fan-out, publish → each stream, p50 / p99 | — | %.1f / %.1f ms kernel receive; %.1f / %.1f ms read |\n",
                ak.p50, ak.p99, ar.p50, ar.p99);
    return incomplete || streams.closed() ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// e2e: commit → worker → Redis → gateway → one SSE client.

struct Commit {
    int id;
    long v;
    std::int64_t due, sent, returned;
};

struct Seen {
    int id;
    long v;
    std::int64_t at;
};

// A doc's (id, v) from an envelope {"channel":…,"doc":{"v":…,"id":…},…}; false when it holds none.
bool id_and_v(const char* text, std::size_t size, int& id, long& v) {
    rapidjson::Document d;
    d.Parse(text, size);
    if (!d.IsObject() || !d.HasMember("doc") || !d["doc"].IsObject()) return false;
    const auto& doc = d["doc"];
    if (!doc.HasMember("id") || !doc.HasMember("v")) return false;
    id = doc["id"].GetInt();
    v = doc["v"].GetInt64();
    return true;
}

class SseReader {
public:
    SseReader(int port, const std::string& target) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<std::uint16_t>(port));
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            throw std::runtime_error("cannot connect to the gateway");
        std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n";
        ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL);
    }
    ~SseReader() { ::close(fd_); }

    // Reads what came within `timeout_ms`; each doc event goes to `on_doc(data, read time)`. False once
    // the stream ended.
    template <class F>
    bool read(int timeout_ms, F&& on_doc) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) return true;
        char chunk[65536];
        auto n = ::read(fd_, chunk, sizeof chunk);
        std::int64_t at = now_ns();
        if (n <= 0) return false;
        buffer_.append(chunk, static_cast<std::size_t>(n));
        bytes_ += static_cast<std::size_t>(n);
        if (!header_done_) {
            auto blank = buffer_.find("\r\n\r\n");
            if (blank == std::string::npos) return true;
            if (buffer_.compare(0, 12, "HTTP/1.1 200") != 0)
                throw std::runtime_error("the SSE request was answered " + buffer_.substr(0, 400));
            buffer_.erase(0, blank + 4);
            header_done_ = true;
        }
        std::size_t pos = 0;
        for (;;) {
            auto end = buffer_.find("\n\n", pos);
            if (end == std::string::npos) break;
            if (buffer_.compare(pos, 11, "event: doc\n") == 0) {
                ++events_;
                auto data = buffer_.find("\ndata: ", pos);
                if (data != std::string::npos && data < end) on_doc(buffer_.data() + data + 7, end - data - 7, at);
            }
            pos = end + 2;
        }
        buffer_.erase(0, pos);
        return true;
    }
    std::size_t bytes() const { return bytes_; }
    std::size_t events() const { return events_; }

private:
    int fd_ = -1;
    std::string buffer_;
    bool header_done_ = false;
    std::size_t bytes_ = 0, events_ = 0;
};

int e2e(int port, int redis_port, const std::string& dsn, int docs, int rate, int seconds_of_load) {
    constexpr int kWriters = 4;
    if (docs % kWriters != 0) throw std::runtime_error("--docs must be a multiple of 4 (each doc has one writer)");
    std::string target = "/v1/sse?";
    for (int id = 1; id <= docs; ++id) target += (id > 1 ? "&channel=db:item:" : "channel=db:item:") + std::to_string(id);

    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::vector<Seen> client_seen, redis_seen;
    std::map<int, long> newest;  // per doc, the newest v the client has
    std::size_t client_bytes = 0, client_events = 0;

    // The Redis stamp: a pattern subscription on the channels, apart from the gateway's.
    redisContext* sub = redisConnect("127.0.0.1", redis_port);
    if (!sub || sub->err) throw std::runtime_error("cannot connect to Redis");
    redisReply* r = static_cast<redisReply*>(redisCommand(sub, "PSUBSCRIBE db:item:*"));
    if (r) freeReplyObject(r);
    timeval tv{0, 200000};
    redisSetTimeout(sub, tv);
    std::thread redis_thread([&] {
        while (!stop) {
            void* reply = nullptr;
            if (redisGetReply(sub, &reply) != REDIS_OK) {
                if (sub->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                    sub->err = 0;
                    continue;
                }
                return;
            }
            std::int64_t at = now_ns();
            auto* m = static_cast<redisReply*>(reply);
            if (m->type == REDIS_REPLY_ARRAY && m->elements == 4) {
                int id;
                long v;
                if (id_and_v(m->element[3]->str, m->element[3]->len, id, v)) {
                    std::lock_guard lock(mutex);
                    redis_seen.push_back({id, v, at});
                }
            }
            freeReplyObject(reply);
        }
    });

    SseReader reader(port, target);
    std::thread client_thread([&] {
        try {
            while (!stop) {
                bool more = reader.read(100, [&](const char* data, std::size_t size, std::int64_t at) {
                    int id;
                    long v;
                    if (!id_and_v(data, size, id, v)) return;
                    std::lock_guard lock(mutex);
                    client_seen.push_back({id, v, at});
                    auto& n = newest[id];
                    n = std::max(n, v);
                });
                if (!more) {
                    std::fprintf(stderr, "the gateway ended the SSE stream\n");
                    return;
                }
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "SSE client: %s\n", e.what());
        }
    });
    // Both readers stop and are joined however this function ends.
    struct Joiner {
        std::atomic<bool>& stop;
        std::thread& a;
        std::thread& b;
        redisContext* sub;
        ~Joiner() {
            stop = true;
            if (a.joinable()) a.join();
            if (b.joinable()) b.join();
            redisFree(sub);
        }
    } joiner{stop, client_thread, redis_thread, sub};
    auto wait_for = [&](auto&& done, milliseconds limit) {
        auto deadline = steady_clock::now() + limit;
        while (steady_clock::now() < deadline) {
            {
                std::lock_guard lock(mutex);
                if (done()) return true;
            }
            std::this_thread::sleep_for(milliseconds(5));
        }
        return false;
    };

    std::vector<PGconn*> conns;
    for (int w = 0; w < kWriters; ++w) {
        PGconn* c = PQconnectdb(dsn.c_str());
        if (PQstatus(c) != CONNECTION_OK) throw std::runtime_error(std::string("cannot connect: ") + PQerrorMessage(c));
        conns.push_back(c);
    }
    auto update = [](PGconn* c, int id) -> long {
        std::string param = std::to_string(id);
        const char* values[1] = {param.c_str()};
        PGresult* res = PQexecParams(c, "UPDATE item SET v = v + 1 WHERE id = $1 RETURNING v", 1, nullptr, values,
                                     nullptr, nullptr, 0);
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
            std::string why = PQerrorMessage(c);
            PQclear(res);
            throw std::runtime_error("update failed: " + why);
        }
        long v = std::atol(PQgetvalue(res, 0, 0));
        PQclear(res);
        return v;
    };

    // Warm-up: the gateway's subscriptions ask the worker for the docs (docsync:warm), and the
    // worker's liveness poll makes them live; every doc updated until one update of each reaches
    // the client.
    std::printf("4. commit -> client: %d docs followed by one SSE stream, %d writer connections\n", docs, kWriters);
    if (!wait_for([&] { return static_cast<int>(newest.size()) == docs; }, seconds(30)))
        throw std::runtime_error(fmt("the client got %zu of the %d docs in 30 s", newest.size(), docs));
    bool live = false;
    for (int round = 0; round < 20 && !live; ++round) {
        std::map<int, long> want;
        for (int id = 1; id <= docs; ++id) want[id] = update(conns[0], id);
        live = wait_for([&] {
            for (auto& [id, v] : want)
                if (newest[id] < v) return false;
            return true;
        }, seconds(2));
    }
    if (!live) throw std::runtime_error("the docs did not become live: an update of each did not reach the client");
    {
        std::lock_guard lock(mutex);
        client_seen.clear();
        redis_seen.clear();
        client_bytes = reader.bytes();
        client_events = reader.events();
    }

    // The load: commit k is due at start + k / rate, on writer k % 4, for doc k % docs + 1.
    int total = rate * seconds_of_load;
    std::vector<std::vector<Commit>> commits(kWriters);
    std::int64_t start = now_ns() + 100000000;
    double period_ns = 1e9 / rate;
    std::vector<std::thread> writers;
    std::atomic<bool> failed{false};
    for (int w = 0; w < kWriters; ++w)
        writers.emplace_back([&, w] {
            try {
                for (int k = w; k < total; k += kWriters) {
                    std::int64_t due = start + static_cast<std::int64_t>(period_ns * k);
                    std::int64_t wait = due - now_ns();
                    if (wait > 0) std::this_thread::sleep_for(nanoseconds(wait));
                    int id = k % docs + 1;
                    std::int64_t sent = now_ns();
                    long v = update(conns[static_cast<std::size_t>(w)], id);
                    commits[static_cast<std::size_t>(w)].push_back({id, v, due, sent, now_ns()});
                }
            } catch (const std::exception& e) {
                std::fprintf(stderr, "writer %d: %s\n", w, e.what());
                failed = true;
            }
        });
    for (auto& t : writers) t.join();
    std::int64_t end = now_ns();
    std::vector<Commit> all;
    for (auto& c : commits) all.insert(all.end(), c.begin(), c.end());
    std::map<int, long> final_v;
    for (auto& c : all) final_v[c.id] = std::max(final_v[c.id], c.v);
    bool complete = wait_for([&] {
        for (auto& [id, v] : final_v)
            if (newest[id] < v) return false;
        return true;
    }, seconds(10));
    std::this_thread::sleep_for(milliseconds(200));
    stop = true;
    client_thread.join();
    redis_thread.join();
    for (auto* c : conns) PQfinish(c);

    // For every commit, the first arrival of its doc at that version or newer.
    auto arrivals = [&](const std::vector<Seen>& seen) {
        std::map<int, std::vector<std::pair<long, std::int64_t>>> by_doc;  // v ascending, first arrival
        for (const auto& s : seen) {
            auto& list = by_doc[s.id];
            if (list.empty() || s.v > list.back().first) list.emplace_back(s.v, s.at);
        }
        return by_doc;
    };
    auto at_client = arrivals(client_seen), at_redis = arrivals(redis_seen);
    auto first_at = [](const std::map<int, std::vector<std::pair<long, std::int64_t>>>& by_doc, int id, long v) -> std::int64_t {
        auto it = by_doc.find(id);
        if (it == by_doc.end()) return 0;
        auto found = std::lower_bound(it->second.begin(), it->second.end(), std::make_pair(v, std::int64_t(0)));
        return found == it->second.end() ? 0 : found->second;
    };
    std::vector<double> client_lat, redis_lat, gateway_share, commit_time, lag;
    std::size_t missing = 0, coalesced = 0;
    for (const auto& c : all) {
        std::int64_t at_c = first_at(at_client, c.id, c.v), at_r = first_at(at_redis, c.id, c.v);
        commit_time.push_back(ms(c.returned - c.sent));
        lag.push_back(ms(c.sent - c.due));
        if (!at_c) {
            ++missing;
            continue;
        }
        client_lat.push_back(ms(at_c - c.returned));
        if (at_r) {
            redis_lat.push_back(ms(at_r - c.returned));
            gateway_share.push_back(ms(at_c - at_r));
        }
    }
    for (const auto& [id, list] : at_client) {
        (void)id;
        for (std::size_t i = 1; i < list.size(); ++i) coalesced += static_cast<std::size_t>(list[i].first - list[i - 1].first - 1);
    }
    auto cl = quantiles(client_lat), rl = quantiles(redis_lat), gs = quantiles(gateway_share), ct = quantiles(commit_time), sl = quantiles(lag);
    double achieved = static_cast<double>(all.size()) / (static_cast<double>(end - start) / 1e9);
    std::size_t load_bytes = reader.bytes() - client_bytes, load_events = reader.events() - client_events;
    std::printf("   %zu commits in %.1f s (%.0f txn/s; target %d), %zu never seen by the client%s; %zu commits "
                "coalesced into a later doc\n"
                "   the writers' schedule lag: p50 %.2f  p99 %.2f  max %.2f ms; the UPDATE's round trip (to the commit's "
                "return): p50 %.2f  p99 %.2f  max %.2f ms\n"
                "   commit -> Redis (pattern subscriber): p50 %.2f  p90 %.2f  p99 %.2f  max %.2f ms\n"
                "   commit -> SSE client read:            p50 %.2f  p90 %.2f  p99 %.2f  max %.2f ms\n"
                "   Redis -> SSE client (the gateway):    p50 %.2f  p90 %.2f  p99 %.2f  max %.2f ms\n"
                "   the client read %zu doc events, %.0f bytes each on average (the event's id: line is the cursor of "
                "all %d channels)\n",
                all.size(), static_cast<double>(end - start) / 1e9, achieved, rate, missing,
                complete ? "" : " (the client did not reach every doc's last version in 10 s)", coalesced, sl.p50,
                sl.p99, sl.max, ct.p50, ct.p99, ct.max, rl.p50, rl.p90, rl.p99, rl.max, cl.p50, cl.p90, cl.p99, cl.max, gs.p50, gs.p90, gs.p99,
                gs.max, load_events, load_events ? static_cast<double>(load_bytes) / static_cast<double>(load_events) : 0.0,
                docs);
    std::printf("\n| figure | target | measured |\n| --- | --- | --- |\n");
    std::printf("| commit → SSE client, worker + Redis + gateway, %d docs, %.0f txn/s, p50 | ≤ 10 ms | %.2f ms |\n", docs,
                achieved, cl.p50);
    std::printf("| same, p99 | ≤ 50 ms | %.2f ms (max %.2f) |\n", cl.p99, cl.max);
    std::printf("| of which commit → Redis, p50 / p99 | — | %.2f / %.2f ms |\n", rl.p50, rl.p99);
    std::printf("| of which Redis → SSE client, p50 / p99 | — | %.2f / %.2f ms |\n", gs.p50, gs.p99);
    return failed || missing ? 1 : 0;
}

[[noreturn]] void usage(const char* argv0) {
    std::fprintf(stderr,
                 "usage: %s fanout --port P --redis-port R --gateway-pid PID [--clients N] [--publishes N] [--interval-ms MS]\n"
                 "       %s e2e --port P --redis-port R --dsn DSN [--docs N] [--rate TXN_PER_S] [--seconds S]\n",
                 argv0, argv0);
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);  // as docsync-worker: a closed socket is an error, not the end
    if (argc < 2) usage(argv[0]);
    std::string mode = argv[1];
    docsync::bench::Options opt(argc, argv, 2, usage);
    try {
        if (mode == "fanout") {
            opt.require({"port", "redis-port", "gateway-pid"});
            return fanout(static_cast<int>(opt.num("port", 0)), static_cast<int>(opt.num("redis-port", 0)),
                          static_cast<pid_t>(opt.num("gateway-pid", 0)),
                          static_cast<std::size_t>(opt.num("clients", 10000)),
                          static_cast<int>(opt.num("publishes", 100)),
                          static_cast<int>(opt.num("interval-ms", 250)));
        }
        if (mode == "e2e") {
            opt.require({"port", "redis-port", "dsn"});
            return e2e(static_cast<int>(opt.num("port", 0)), static_cast<int>(opt.num("redis-port", 0)),
                       opt.text("dsn"), static_cast<int>(opt.num("docs", 100)),
                       static_cast<int>(opt.num("rate", 200)), static_cast<int>(opt.num("seconds", 20)));
        }
        usage(argv[0]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "benchmark failed: %s\n", e.what());
        return 1;
    }
}
