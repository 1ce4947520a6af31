// docsync:watermark (publish/watermark.hpp) against a real redis-server started by each test: set and
// published as acknowledgements arrive, coalesced, never moved back (one publisher, a second one
// taking over, concurrent scripts), and never in the way of acknowledgements while Redis is gone.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/lsn.hpp"
#include "progress/coordinator.hpp"
#include "publish/watermark.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using docsync::Lsn;
using docsync::format_lsn;
using docsync::parse_lsn;
using docsync::publish::RedisConnection;
using docsync::publish::RedisWatermark;
using docsync::publish::reply_text;
using docsync::testing::RedisServer;

namespace {

// The stream's place: records every acknowledgement passed on.
class Recorder final : public docsync::Acknowledger {
public:
    void acknowledge(Lsn lsn) override {
        std::lock_guard lock(mutex_);
        seen_.push_back(lsn);
    }
    std::vector<Lsn> seen() const {
        std::lock_guard lock(mutex_);
        return seen_;
    }

private:
    mutable std::mutex mutex_;
    std::vector<Lsn> seen_;
};

std::string get(RedisConnection& c, const char* key = docsync::publish::kWatermarkKey) {
    auto r = c.command({"GET", key});
    return r->type == REDIS_REPLY_NIL ? std::string("(nil)") : reply_text(r.get());
}

// Waits (up to `limit`) until the watermark key reads `expected`.
bool key_becomes(RedisConnection& c, const std::string& expected, std::chrono::milliseconds limit = 10s) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (get(c) != expected) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(2ms);
    }
    return true;
}

// A client subscribed to docsync:watermark.
class Subscriber {
public:
    explicit Subscriber(const RedisServer& redis) : conn_(redis.client()) {
        conn_->command({"SUBSCRIBE", docsync::publish::kWatermarkKey});
    }
    // The next message's payload (waits at most the connection's 10 s timeout).
    std::string next() {
        for (;;) {
            void* raw = nullptr;
            REQUIRE(redisGetReply(conn_->context(), &raw) == REDIS_OK);
            docsync::publish::Reply r(static_cast<redisReply*>(raw));
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && reply_text(r->element[0]) == "message")
                return reply_text(r->element[2]);
        }
    }

private:
    std::unique_ptr<RedisConnection> conn_;
};

constexpr Lsn lsn(std::uint32_t hi, std::uint32_t lo) { return (Lsn(hi) << 32) | lo; }

// Fast retries, so the outage cases take a moment, not seconds.
docsync::publish::WatermarkOptions quick() {
    docsync::publish::WatermarkOptions o;
    o.initial_backoff = 20ms;
    o.max_backoff = 200ms;
    o.connect_timeout = 500ms;
    o.command_timeout = 1000ms;
    return o;
}

}  // namespace

TEST_CASE("watermark: each acknowledgement is passed on, then set and published as pg_lsn text") {
    RedisServer redis;
    auto client = redis.client();
    Subscriber sub(redis);
    Recorder stream;
    RedisWatermark watermark(redis.address(), stream);

    watermark.acknowledge(lsn(0, 0x16B3F28));
    CHECK(sub.next() == "0/16B3F28");
    CHECK(get(*client) == "0/16B3F28");
    watermark.acknowledge(lsn(0x16, 0xB374D848));
    CHECK(sub.next() == "16/B374D848");
    CHECK(get(*client) == "16/B374D848");
    CHECK(stream.seen() == std::vector<Lsn>{lsn(0, 0x16B3F28), lsn(0x16, 0xB374D848)});
    // The writer records Redis's reply a moment after subscribers and readers see the update.
    CHECK(docsync::testing::eventually([&] { return watermark.published() == lsn(0x16, 0xB374D848); }));
    CHECK(docsync::testing::eventually([&] { return watermark.updates() == 2; }));
}

TEST_CASE("watermark: a position at a WAL page's start is written past the page header") {
    RedisServer redis;
    auto client = redis.client();
    Recorder stream;
    RedisWatermark watermark(redis.address(), stream);
    // pg_current_wal_insert_lsn() after a commit that filled its page is 1/2018 (1/28 on a segment's
    // first page); the commit, and so the acknowledgement, ends at 1/2000.
    watermark.acknowledge(lsn(1, 0x2000));
    REQUIRE(key_becomes(*client, "1/2028"));
    CHECK(stream.seen() == std::vector<Lsn>{lsn(1, 0x2000)});  // the stream gets the position itself
    watermark.acknowledge(lsn(1, 0x2030));
    REQUIRE(key_becomes(*client, "1/2030"));
}

TEST_CASE("watermark: never moves back, compared as numbers, also across a restarted or second worker") {
    RedisServer redis;
    auto client = redis.client();
    Subscriber sub(redis);
    Recorder stream;
    {
        RedisWatermark first(redis.address(), stream);
        first.acknowledge(lsn(0xA, 0x10));
        CHECK(sub.next() == "A/10");
    }
    // A worker that starts again (or takes over) from an older position: its updates change nothing
    // until it passes the key, and are not published. "9/FFFFFFFF" is greater as text, not as a number.
    RedisWatermark second(redis.address(), stream);
    second.acknowledge(lsn(0x9, 0xFFFFFFFF));
    auto until = std::chrono::steady_clock::now() + 10s;
    while (second.published() != lsn(0x9, 0xFFFFFFFF) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(2ms);
    CHECK(second.published() == lsn(0x9, 0xFFFFFFFF));  // Redis answered: it holds a newer one
    CHECK(get(*client) == "A/10");
    second.acknowledge(lsn(0xA, 0x10));  // the same position: not published again
    second.acknowledge(lsn(0xA, 0x18));
    CHECK(sub.next() == "A/18");  // the next message is the greater one: nothing in between
    CHECK(get(*client) == "A/18");

    // The script alone: whatever order positions arrive in, from several clients at once, the key
    // ends at the greatest and every message published is greater than the one before.
    std::vector<Lsn> positions;
    std::mt19937_64 random(42);
    for (int i = 0; i < 2000; ++i) positions.push_back(lsn(0xA + random() % 3, random() % 0x100000000ull));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            auto conn = redis.client();
            for (std::size_t i = t; i < positions.size(); i += 4) {
                auto r = conn->command({"EVAL", RedisWatermark::script(), "2", docsync::publish::kWatermarkKey,
                                        docsync::publish::kWatermarkGenerationKey, format_lsn(positions[i]), "0"});
                REQUIRE(r->type == REDIS_REPLY_INTEGER);
            }
        });
    for (auto& th : threads) th.join();
    Lsn top = std::max(lsn(0xA, 0x18), *std::max_element(positions.begin(), positions.end()));
    CHECK(get(*client) == format_lsn(top));
    Lsn previous = lsn(0xA, 0x18);
    for (;;) {
        auto message = parse_lsn(sub.next());
        REQUIRE(message);
        CHECK(*message > previous);
        previous = *message;
        if (*message == top) break;
    }
}

TEST_CASE("watermark: a new generation starts at 0/0 at once, an older one changes nothing") {
    RedisServer redis;
    auto client = redis.client();
    Subscriber sub(redis);
    Recorder stream;
    {
        RedisWatermark first(redis.address(), stream);
        first.set_generation(3);
        first.acknowledge(lsn(0x20, 0x10));
        CHECK(sub.next() == "0/0");
        CHECK(sub.next() == "20/10");
        CHECK(get(*client, docsync::publish::kWatermarkGenerationKey) == "3");
    }
    // A worker that starts again in the same generation writes nothing older.
    {
        RedisWatermark again(redis.address(), stream);
        again.set_generation(3);
        again.acknowledge(lsn(0x20, 0x18));
        CHECK(sub.next() == "20/18");
    }
    // After a failover to a server whose positions are lower (an asynchronous standby that lagged),
    // the next generation's positions are taken: 0/0 at once, then what it acknowledges.
    RedisWatermark failover(redis.address(), stream);
    failover.set_generation(4);
    CHECK(sub.next() == "0/0");
    failover.acknowledge(lsn(0x1F, 0x100));
    CHECK(sub.next() == "1F/100");
    CHECK(get(*client) == "1F/100");
    CHECK(get(*client, docsync::publish::kWatermarkGenerationKey) == "4");
    failover.set_generation(4);  // the same generation again: nothing
    failover.acknowledge(lsn(0x1F, 0x108));
    CHECK(sub.next() == "1F/108");

    // A late update of the older generation, however high its position, changes nothing.
    auto r = client->command({"EVAL", RedisWatermark::script(), "2", docsync::publish::kWatermarkKey,
                              docsync::publish::kWatermarkGenerationKey, "FF/0", "3"});
    REQUIRE(r->type == REDIS_REPLY_INTEGER);
    CHECK(r->integer == 0);
    CHECK(get(*client) == "1F/108");
}

TEST_CASE("watermark: while a gap is being closed, positions are recorded but not written") {
    RedisServer redis;
    auto client = redis.client();
    Recorder stream;
    std::atomic<bool> holding{false};
    docsync::publish::WatermarkOptions o;
    o.hold_poll = 5ms;
    RedisWatermark watermark(redis.address(), stream, o, [&holding] { return holding.load(); });
    watermark.set_generation(1);
    watermark.acknowledge(lsn(6, 0x10));
    REQUIRE(key_becomes(*client, "6/10"));

    holding = true;  // say, a valve recompute of every live doc runs
    watermark.set_generation(2);  // the new generation's 0/0 goes out even so
    REQUIRE(key_becomes(*client, "0/0"));
    for (std::uint32_t i = 1; i <= 50; ++i) watermark.acknowledge(lsn(6, 0x10 + i * 8));
    std::this_thread::sleep_for(150ms);
    CHECK(get(*client) == "0/0");
    CHECK(stream.seen().size() == 51);  // the stream's acknowledgements go on meanwhile

    holding = false;  // the recompute finished: the newest position is written
    REQUIRE(key_becomes(*client, format_lsn(lsn(6, 0x10 + 50 * 8))));
}

TEST_CASE("watermark: a burst of acknowledgements is coalesced, the newest always sent") {
    RedisServer redis;
    auto client = redis.client();
    Recorder stream;
    RedisWatermark watermark(redis.address(), stream);
    constexpr int kAcks = 20000;
    for (int i = 1; i <= kAcks; ++i) watermark.acknowledge(lsn(1, static_cast<std::uint32_t>(i) * 8));
    REQUIRE(key_becomes(*client, format_lsn(lsn(1, kAcks * 8))));
    auto seen = stream.seen();
    CHECK(seen.size() == kAcks);  // every one passed on, in order
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    // A write is counted once Redis has answered it, a moment after the key can be read.
    for (int i = 0; i < 500 && watermark.updates() == 0; ++i) std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(100ms);
    auto updates = watermark.updates();
    MESSAGE(updates << " updates for " << kAcks << " acknowledgements");
    CHECK(updates >= 1);
    CHECK(updates < kAcks);
    // Nothing new acknowledged: nothing sent.
    std::this_thread::sleep_for(100ms);
    CHECK(watermark.updates() == updates);
}

TEST_CASE("watermark: Redis gone holds nothing back, the newest position is written once it is back") {
    RedisServer redis;
    auto client = redis.client();
    Recorder stream;
    RedisWatermark watermark(redis.address(), stream, quick());
    watermark.acknowledge(lsn(2, 0x10));
    REQUIRE(key_becomes(*client, "2/10"));
    client.reset();

    redis.stop();
    auto started = std::chrono::steady_clock::now();
    for (int i = 1; i <= 1000; ++i) watermark.acknowledge(lsn(2, 0x10 + static_cast<std::uint32_t>(i)));
    auto took = std::chrono::steady_clock::now() - started;
    CHECK(took < 200ms);  // acknowledging never waits on Redis
    CHECK(stream.seen().size() == 1001);
    std::this_thread::sleep_for(600ms);  // failed updates, retried with backoff
    CHECK(watermark.published() == lsn(2, 0x10));

    redis.start();  // without persistence: the key is gone, the next update writes it again
    client = redis.client();
    REQUIRE(key_becomes(*client, format_lsn(lsn(2, 0x10 + 1000))));
    // The key is visible to other clients a moment before the writer records its reply.
    CHECK(docsync::testing::eventually([&] { return watermark.published() == lsn(2, 0x10 + 1000); }));
}

TEST_CASE("watermark: a key of another type is reported and retried, never fatal") {
    RedisServer redis;
    auto client = redis.client();
    client->command({"HSET", docsync::publish::kWatermarkKey, "f", "v"});
    Recorder stream;
    RedisWatermark watermark(redis.address(), stream, quick());
    watermark.acknowledge(lsn(3, 0x10));
    std::this_thread::sleep_for(300ms);
    CHECK(watermark.published() == 0);
    CHECK(stream.seen() == std::vector<Lsn>{lsn(3, 0x10)});
    // A hand-written value that is no position is replaced; the key type fixed, the update goes through.
    client->command({"SET", docsync::publish::kWatermarkKey, "not a position"});
    REQUIRE(key_becomes(*client, "3/10"));
}

TEST_CASE("watermark: stop sends the newest position over the live connection, then ends") {
    RedisServer redis;
    auto client = redis.client();
    Recorder stream;
    RedisWatermark watermark(redis.address(), stream);
    watermark.acknowledge(lsn(4, 1));
    REQUIRE(key_becomes(*client, "4/1"));
    watermark.acknowledge(lsn(4, 2));
    watermark.stop();
    CHECK(get(*client) == "4/2");
    watermark.stop();  // idempotent

    // Without a connection (Redis never reached), stop does not wait for a reconnect.
    redis.stop();
    RedisWatermark unreachable(redis.address(), stream, quick());
    unreachable.acknowledge(lsn(5, 0));
    std::this_thread::sleep_for(100ms);
    auto started = std::chrono::steady_clock::now();
    unreachable.stop();
    CHECK(std::chrono::steady_clock::now() - started < 1s);
}
