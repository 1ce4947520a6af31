// The worker's cost of --patches, measured against a running docsync-worker (--sink redis://,
// --live all) by tests/bench/patch_worker.sh, which runs it once per worker and kind of doc:
//
//   bench-patch_worker_bench --redis-port R --dsn DSN --slot SLOT --worker-pid PID --kind board|item
//                            --docs N [--updates 300] [--rate 20] [--label TEXT]
//
// board: the doc query `board` (db:board:ID), a leaderboard of the scores of table entry (300:
// about 50 kB of JSON); each update adds to one score: UPDATE entry SET score = score + 1 WHERE board = $1
// AND rank = $2. item: the doc query `item` (db:item:ID), {"id","v"}: UPDATE item SET v = v + 1 WHERE
// id = $1. Updates go round the --docs docs, --rate per second, one autocommit transaction each.
//
// A pattern subscriber on Redis (PSUBSCRIBE db:KIND:*) counts every message the worker PUBLISHes
// (channel + payload bytes; patches and whole docs apart) and keeps each channel's doc by applying
// the patches it gets with docsync::patch::apply (a patch whose base it does not hold is counted
// and the doc read again with GET). First every doc is updated once and the worker waited for (its
// slot confirms the server's WAL position), so every doc is published and, with --patches on, the
// worker holds its last version; then the counters are read, the --updates updates made, the worker
// waited for again, and the counters read again: the worker's CPU (utime + stime from /proc) over
// the publishes in that window, its VmRSS and VmHWM after, the bytes PUBLISHed per publish. At the
// end every channel's doc the subscriber built must be byte for byte the doc the key retains, and
// after the warm-up it must have held the base of every patch.
//
// The last line is machine-readable for the script: RESULT label kind publishes patches cpu_us_per_publish
// bytes_per_publish rss_kb hwm_kb mismatches envelope_bytes
#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "bench/patch_common.hpp"
#include "bench/process_stats.hpp"
#include "patch/json_patch.hpp"

using namespace std::chrono;
using docsync::DocVersion;

namespace {

long proc_status_kb(pid_t pid, const char* field) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line, name = std::string(field) + ":";
    while (std::getline(in, line))
        if (line.rfind(name, 0) == 0) return std::stol(line.substr(name.size()));
    return -1;
}

struct Held {
    bool holds = false;
    DocVersion version;
    std::string doc;
};

// The pattern subscriber: counts what the worker publishes and keeps every channel's doc.
class Subscriber {
public:
    Subscriber(int port, const std::string& pattern) : port_(port) {
        sub_ = redisConnect("127.0.0.1", port);
        if (!sub_ || sub_->err) throw std::runtime_error("cannot connect to Redis");
        auto* r = static_cast<redisReply*>(redisCommand(sub_, "PSUBSCRIBE %s", pattern.c_str()));
        if (!r) throw std::runtime_error("PSUBSCRIBE failed");
        freeReplyObject(r);
        timeval tv{0, 200000};
        redisSetTimeout(sub_, tv);
        thread_ = std::thread([this] { loop(); });
    }
    ~Subscriber() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        redisFree(sub_);
    }

    struct Counts {
        std::size_t messages = 0, patches = 0, merges = 0, bytes = 0, unheld_bases = 0;
    };
    Counts counts() {
        std::lock_guard lock(mutex_);
        return counts_;
    }

    // Channels whose doc is not the one the key retains, over the channels held; `bytes` the keys'
    // envelopes' mean size.
    std::pair<std::size_t, std::size_t> mismatches(double& bytes) {
        std::size_t total = 0;
        std::lock_guard lock(mutex_);
        redisContext* c = redisConnect("127.0.0.1", port_);
        if (!c || c->err) throw std::runtime_error("cannot connect to Redis");
        std::size_t wrong = 0;
        for (auto& [channel, held] : docs_) {
            auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", channel.data(), channel.size()));
            std::string_view envelope = r && r->type == REDIS_REPLY_STRING ? std::string_view(r->str, r->len) : std::string_view();
            auto doc = docsync::bench::member_text(envelope, "doc", "generation");
            auto v = docsync::bench::version_of(envelope);
            total += envelope.size();
            if (!doc || !v || *v != held.version || *doc != held.doc) {
                ++wrong;
                if (wrong == 1) std::fprintf(stderr, "%s: the subscriber's doc is not the key's\n", channel.c_str());
            }
            if (r) freeReplyObject(r);
        }
        redisFree(c);
        bytes = docs_.empty() ? 0 : static_cast<double>(total) / static_cast<double>(docs_.size());
        return {wrong, docs_.size()};
    }

private:
    void loop() {
        while (!stop_) {
            void* reply = nullptr;
            if (redisGetReply(sub_, &reply) != REDIS_OK) {
                if (sub_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                    sub_->err = 0;
                    continue;
                }
                std::fprintf(stderr, "the Redis subscriber lost its connection\n");
                return;
            }
            auto* m = static_cast<redisReply*>(reply);
            if (m->type == REDIS_REPLY_ARRAY && m->elements == 4)
                take(std::string(m->element[2]->str, m->element[2]->len), std::string_view(m->element[3]->str, m->element[3]->len));
            freeReplyObject(reply);
        }
    }

    void take(const std::string& channel, std::string_view message) {
        std::lock_guard lock(mutex_);
        ++counts_.messages;
        counts_.bytes += channel.size() + message.size();
        auto v = docsync::bench::version_of(message);
        if (!v) return;
        Held& held = docs_[channel];
        if (auto doc = docsync::bench::member_text(message, "doc", "generation")) {
            held = {true, *v, std::string(*doc)};
            return;
        }
        bool merge = message.find(",\"merge\":") != std::string_view::npos;
        ++counts_.patches;
        counts_.merges += merge;
        auto base = docsync::bench::base_of(message);
        auto text = docsync::bench::member_text(message, merge ? "merge" : "patch", "base_generation");
        if (!base || !text || !held.holds || held.version != *base) {
            ++counts_.unheld_bases;
            reread(channel, held);
            return;
        }
        held.doc = docsync::patch::apply(held.doc, {merge ? docsync::patch::Form::MergePatch : docsync::patch::Form::JsonPatch,
                                                    std::string(*text)});
        held.version = *v;
    }

    // What a subscriber that cannot apply a patch does: GET the key.
    void reread(const std::string& channel, Held& held) {
        redisContext* c = redisConnect("127.0.0.1", port_);
        if (!c || c->err) throw std::runtime_error("cannot connect to Redis");
        auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", channel.data(), channel.size()));
        std::string_view envelope = r && r->type == REDIS_REPLY_STRING ? std::string_view(r->str, r->len) : std::string_view();
        auto doc = docsync::bench::member_text(envelope, "doc", "generation");
        auto v = docsync::bench::version_of(envelope);
        held = doc && v ? Held{true, *v, std::string(*doc)} : Held{};
        if (r) freeReplyObject(r);
        redisFree(c);
    }

    int port_;
    redisContext* sub_ = nullptr;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::mutex mutex_;
    Counts counts_;
    std::map<std::string, Held> docs_;
};

class Database {
public:
    explicit Database(const std::string& dsn) {
        conn_ = PQconnectdb(dsn.c_str());
        if (PQstatus(conn_) != CONNECTION_OK) throw std::runtime_error(std::string("cannot connect: ") + PQerrorMessage(conn_));
    }
    ~Database() { PQfinish(conn_); }
    std::string value(const std::string& sql, const std::vector<std::string>& params = {}) {
        std::vector<const char*> values;
        for (auto& p : params) values.push_back(p.c_str());
        PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                                     nullptr, 0);
        auto status = PQresultStatus(res);
        if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
            std::string why = PQerrorMessage(conn_);
            PQclear(res);
            throw std::runtime_error(sql + ": " + why);
        }
        std::string out = status == PGRES_TUPLES_OK && PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "";
        PQclear(res);
        return out;
    }

private:
    PGconn* conn_ = nullptr;
};

int run(int redis_port, const std::string& dsn, const std::string& slot, pid_t worker, const std::string& kind, int docs,
        int updates, int rate, const std::string& label) {
    if (kind != "board" && kind != "item") throw std::runtime_error("--kind is board or item");
    Subscriber subscriber(redis_port, "db:" + kind + ":*");
    Database db(dsn);
    int entries = kind == "board" ? std::stoi(db.value("SELECT count(*) FROM entry WHERE board = 1")) : 0;
    std::mt19937 rng(7);
    auto update = [&](int id) {
        if (kind == "board")
            db.value("UPDATE entry SET score = score + 1 WHERE board = $1 AND rank = $2",
                     {std::to_string(id), std::to_string(1 + static_cast<int>(rng() % static_cast<unsigned>(entries)))});
        else
            db.value("UPDATE item SET v = v + 1 WHERE id = $1", {std::to_string(id)});
    };
    // Until the worker's slot has confirmed what the server has written so far, and a little more for
    // Redis's messages to reach the subscriber.
    auto settle = [&] {
        std::string target = db.value("SELECT pg_current_wal_lsn()::text");
        auto deadline = steady_clock::now() + seconds(300);
        while (db.value("SELECT coalesce(confirmed_flush_lsn >= $1::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $2",
                        {target, slot}) != "t") {
            if (::kill(worker, 0) != 0) throw std::runtime_error("the worker exited");
            if (steady_clock::now() > deadline) throw std::runtime_error("the worker did not catch up in 300 s");
            std::this_thread::sleep_for(milliseconds(20));
        }
        std::this_thread::sleep_for(milliseconds(300));
    };
    settle();
    for (int id = 1; id <= docs; ++id) update(id);
    settle();
    auto c0 = subscriber.counts();
    double cpu0 = docsync::bench::process_cpu_seconds(worker);
    auto start = steady_clock::now();
    for (int k = 0; k < updates; ++k) {
        std::this_thread::sleep_until(start + microseconds(static_cast<long>(1e6 * k / rate)));
        update(k % docs + 1);
    }
    settle();
    double cpu = docsync::bench::process_cpu_seconds(worker) - cpu0;
    auto c1 = subscriber.counts();
    long rss = proc_status_kb(worker, "VmRSS"), hwm = proc_status_kb(worker, "VmHWM");
    double envelope_bytes = 0;
    auto [wrong, held] = subscriber.mismatches(envelope_bytes);
    std::size_t publishes = c1.messages - c0.messages, patches = c1.patches - c0.patches;
    // Once every doc was published in the warm-up, the subscriber holds the base of every patch.
    std::size_t unheld = c1.unheld_bases - c0.unheld_bases;
    double per_cpu = publishes ? cpu * 1e6 / static_cast<double>(publishes) : 0;
    double per_bytes = publishes ? static_cast<double>(c1.bytes - c0.bytes) / static_cast<double>(publishes) : 0;
    std::printf("%s, %s (%.0f-byte envelopes): %d updates of %d docs at %d/s -> %zu publishes (%zu patches, %zu of them merge patches); the worker's "
                "CPU %.3f s: %.0f µs per publish; %.0f bytes PUBLISHed per publish; VmRSS %ld kB, VmHWM %ld kB; %zu "
                "patches whose base the subscriber did not hold; %zu of %zu channels' docs built "
                "by the subscriber differ from the key\n",
                label.c_str(), kind.c_str(), envelope_bytes, updates, docs, rate, publishes, patches, c1.merges - c0.merges, cpu, per_cpu,
                per_bytes, rss, hwm, unheld, wrong, held);
    std::printf("RESULT %s %s %zu %zu %.1f %.1f %ld %ld %zu %.0f\n", label.c_str(), kind.c_str(), publishes, patches, per_cpu,
                per_bytes, rss, hwm, wrong + unheld, envelope_bytes);
    return wrong || unheld || held < static_cast<std::size_t>(docs) ? 1 : 0;
}

[[noreturn]] void usage(const char* argv0) {
    std::fprintf(stderr,
                 "usage: %s --redis-port R --dsn DSN --slot SLOT --worker-pid PID --kind board|item --docs N "
                 "[--updates N] [--rate PER_S] [--label TEXT]\n",
                 argv0);
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    docsync::bench::Options opt(argc, argv, 1, usage);
    opt.require({"redis-port", "dsn", "slot", "worker-pid", "kind", "docs"});
    try {
        return run(static_cast<int>(opt.num("redis-port", 0)), opt.text("dsn"), opt.text("slot"),
                   static_cast<pid_t>(opt.num("worker-pid", 0)), opt.text("kind"),
                   static_cast<int>(opt.num("docs", 0)), static_cast<int>(opt.num("updates", 300)),
                   static_cast<int>(opt.num("rate", 20)), opt.text("label", "run"));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "benchmark failed: %s\n", e.what());
        return 1;
    }
}
