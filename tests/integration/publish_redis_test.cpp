// The Redis sink and the subscriber liveness against a real redis-server started by each test.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.hpp"
#include "envelope/envelope.hpp"
#include "publish/liveness.hpp"
#include "publish/redis_sink.hpp"
#include "publish/sink.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using docsync::DocVersion;
using docsync::Error;
using docsync::publish::RedisConnection;
using docsync::publish::RedisSink;
using docsync::publish::reply_text;
using docsync::testing::RedisServer;

namespace {

std::string get(RedisConnection& c, const std::string& key) {
    auto r = c.command({"GET", key});
    return r->type == REDIS_REPLY_NIL ? std::string("(nil)") : reply_text(r.get());
}

long long integer(RedisConnection& c, const std::vector<std::string_view>& args) {
    auto r = c.command(args);
    REQUIRE(r->type == REDIS_REPLY_INTEGER);
    return r->integer;
}

// A client subscribed to some channels; next() returns the next message's payload.
class Subscriber {
public:
    Subscriber(const RedisServer& redis, const std::vector<std::string>& channels) : conn_(redis.client()) {
        std::vector<std::string_view> args{"SUBSCRIBE"};
        for (auto& c : channels) args.push_back(c);
        auto first = conn_->command(args);  // the first confirmation
        for (std::size_t i = 1; i < channels.size(); ++i) read();
    }
    // The next "message" payload (waits at most the connection's 10 s timeout).
    std::string next() {
        for (;;) {
            auto r = read();
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && reply_text(r->element[0]) == "message")
                return reply_text(r->element[2]);
        }
    }

private:
    docsync::publish::Reply read() {
        void* raw = nullptr;
        REQUIRE(redisGetReply(conn_->context(), &raw) == REDIS_OK);
        return docsync::publish::Reply(static_cast<redisReply*>(raw));
    }
    std::unique_ptr<RedisConnection> conn_;
};

std::optional<std::string> doc(const std::string& json) { return json; }

// What the engine does with a transient publish error: retry until the sink takes the doc.
void publish_until_taken(RedisSink& sink, const std::string& channel, const std::optional<std::string>& d,
                         DocVersion v, std::atomic<int>& transient_errors, std::chrono::seconds limit = 60s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        try {
            sink.publish(channel, d, v);
            return;
        } catch (const Error& e) {
            REQUIRE_MESSAGE(e.transient(), e.what());
            ++transient_errors;
            REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "Redis never took " << channel);
        }
    }
}

}  // namespace

TEST_CASE("redis: a subscriber receives each new doc and GET returns the current one") {
    RedisServer redis;
    RedisSink sink(redis.address());
    Subscriber sub(redis, {"db:order:42"});
    auto client = redis.client();

    sink.publish("db:order:42", doc(R"({"id": 42, "status": "new"})"), DocVersion{1, 0x100});
    CHECK(sub.next() == R"({"channel":"db:order:42","doc":{"id":42,"status":"new"},"generation":1,"lsn":"0/100"})");
    sink.publish("db:order:42", doc(R"({"id": 42, "status": "paid"})"), DocVersion{1, 0x200});
    CHECK(sub.next() == R"({"channel":"db:order:42","doc":{"id":42,"status":"paid"},"generation":1,"lsn":"0/200"})");
    CHECK(get(*client, "db:order:42") ==
          R"({"channel":"db:order:42","doc":{"id":42,"status":"paid"},"generation":1,"lsn":"0/200"})");
    CHECK(integer(*client, {"PTTL", "db:order:42"}) == -1);  // a doc is retained without expiry
}

TEST_CASE("redis: an older version never overwrites a newer one and is not published") {
    RedisServer redis;
    RedisSink sink(redis.address());
    Subscriber sub(redis, {"db:o:1"});
    auto client = redis.client();

    sink.publish("db:o:1", doc(R"({"v":"new"})"), DocVersion{1, 0x16B3F28});
    CHECK(sub.next().find(R"("v":"new")") != std::string::npos);
    // An older LSN in the same generation loses, silently (no error: a newer doc is already there).
    sink.publish("db:o:1", doc(R"({"v":"old"})"), DocVersion{1, 0x16B3F27});
    CHECK(get(*client, "db:o:1").find(R"("v":"new")") != std::string::npos);
    // A newer generation wins even with a far smaller LSN (a failed-over or restored server).
    sink.publish("db:o:1", doc(R"({"v":"gen2"})"), DocVersion{2, 0x10});
    CHECK(sub.next().find(R"("v":"gen2")") != std::string::npos);  // the losers were never published
    CHECK(get(*client, "db:o:1").find(R"("v":"gen2")") != std::string::npos);
    // The old generation's larger LSN loses against it.
    sink.publish("db:o:1", doc(R"({"v":"gen1-late"})"), DocVersion{1, 0xFFFFFFFF00000000ull});
    CHECK(get(*client, "db:o:1").find(R"("v":"gen2")") != std::string::npos);
    // The same version again is published (a recompute at the same position saw a later snapshot).
    sink.publish("db:o:1", doc(R"({"v":"gen2-again"})"), DocVersion{2, 0x10});
    CHECK(sub.next().find(R"("v":"gen2-again")") != std::string::npos);
    // LSNs whose high halves differ compare as numbers, not as text ("A/0" > "9/FFFFFFFF").
    sink.publish("db:o:2", doc("1"), DocVersion{3, (0xAull << 32)});
    sink.publish("db:o:2", doc("2"), DocVersion{3, (0x9ull << 32) | 0xFFFFFFFF});
    CHECK(get(*client, "db:o:2").find(R"("doc":1,)") != std::string::npos);
    CHECK(sink.max_generation() == 3);
}

TEST_CASE("redis: concurrent publishers of one channel leave the highest version retained") {
    RedisServer redis;
    RedisSink sink(redis.address());
    constexpr int kThreads = 4, kPerThread = 250;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                // Versions interleave across threads; thread t publishes lsn i*4+t.
                auto lsn = static_cast<std::uint64_t>(i * kThreads + t + 1);
                sink.publish("db:hot:1", doc("{\"lsn\":" + std::to_string(lsn) + "}"), DocVersion{5, lsn});
                sink.publish("db:c:" + std::to_string(t) + ":" + std::to_string(i), doc("{}"), DocVersion{5, lsn});
            }
        });
    for (auto& th : threads) th.join();
    auto client = redis.client();
    auto top = std::to_string(kThreads * kPerThread);
    CHECK(get(*client, "db:hot:1") ==
          "{\"channel\":\"db:hot:1\",\"doc\":{\"lsn\":" + top + "},\"generation\":5,\"lsn\":\"" +
              docsync::format_lsn(kThreads * kPerThread) + "\"}");
    auto channels = sink.retained_channels();
    CHECK(channels.size() == kThreads * kPerThread + 1);
    CHECK(std::set<std::string>(channels.begin(), channels.end()).count("db:hot:1") == 1);
}

TEST_CASE("redis: a null doc is published and leaves a versioned tombstone with a TTL") {
    RedisServer redis;
    auto address = docsync::publish::parse_redis_url(redis.url() + "?tombstone-ttl=60");
    RedisSink sink(address);
    Subscriber sub(redis, {"db:order:7"});
    auto client = redis.client();

    sink.publish("db:order:7", doc(R"({"id":7})"), DocVersion{1, 10});
    sub.next();
    sink.publish("db:order:7", std::nullopt, DocVersion{1, 20});
    CHECK(sub.next() == R"({"channel":"db:order:7","doc":null,"generation":1,"lsn":"0/14"})");
    CHECK(get(*client, "db:order:7") == R"({"channel":"db:order:7","doc":null,"generation":1,"lsn":"0/14"})");
    auto ttl = integer(*client, {"PTTL", "db:order:7"});
    CHECK(ttl > 0);
    CHECK(ttl <= 60000);
    // The tombstone carries its version: an older doc cannot resurrect the deleted one.
    sink.publish("db:order:7", doc(R"({"id":7,"stale":true})"), DocVersion{1, 15});
    CHECK(get(*client, "db:order:7").find(R"("doc":null)") != std::string::npos);
    // A newer doc replaces the tombstone and is retained without expiry again.
    sink.publish("db:order:7", doc(R"({"id":7,"back":true})"), DocVersion{1, 30});
    CHECK(sub.next().find(R"("back":true)") != std::string::npos);
    CHECK(integer(*client, {"PTTL", "db:order:7"}) == -1);
}

TEST_CASE("redis: a new sink reads back the channels and the highest generation Redis holds") {
    RedisServer redis;
    {
        RedisSink sink(redis.address());
        CHECK(sink.max_generation() == 0);
        CHECK(sink.max_version() == DocVersion{0, 0});
        CHECK(sink.retained_channels().empty());
        for (int i = 0; i < 2500; ++i)
            sink.publish("db:q:" + std::to_string(i), doc("[]"), DocVersion{static_cast<std::uint64_t>(i % 9), 1});
        sink.publish("db:q:gone", std::nullopt, DocVersion{4, 1});
        // The high-water mark: the highest version, an older one leaves it (restores, docs/design.md).
        sink.publish("db:q:hw", doc("[]"), DocVersion{8, 0x1A0E838});
        sink.publish("db:q:hw2", doc("[]"), DocVersion{8, 0x1A0E000});
        CHECK(sink.max_version() == DocVersion{8, 0x1A0E838});
        sink.publish("db:q:hw3", doc("[]"), DocVersion{8, 0x200000000ULL});
        CHECK(sink.max_version() == DocVersion{8, 0x200000000ULL});
    }
    auto client = redis.client();
    client->command({"SET", "unrelated:key", "x"});
    RedisSink again(redis.address());
    CHECK(again.max_generation() == 8);
    CHECK(again.max_version() == DocVersion{8, 0x200000000ULL});
    auto channels = again.retained_channels();
    CHECK(channels.size() == 2504);  // docs and the tombstone, nothing outside db:
    CHECK(std::set<std::string>(channels.begin(), channels.end()).count("db:q:gone") == 1);
}

TEST_CASE("redis: read_back GETs the retained doc and its version, a tombstone, or nothing") {
    RedisServer redis;
    RedisSink sink(redis.address());
    CHECK(sink.retains());
    CHECK_FALSE(sink.read_back("db:order:1"));
    sink.publish("db:order:1", doc(R"({"id": 1, "items": [1, 2]})"), DocVersion{3, 0x1234});
    auto got = sink.read_back("db:order:1");
    REQUIRE(got);
    CHECK(got->doc == std::optional<std::string>(R"({"id":1,"items":[1,2]})"));  // as retained: compact
    CHECK(got->version == DocVersion{3, 0x1234});
    sink.publish("db:order:1", std::nullopt, DocVersion{3, 0x2000});
    got = sink.read_back("db:order:1");
    REQUIRE(got);
    CHECK_FALSE(got->doc);
    CHECK(got->version == DocVersion{3, 0x2000});

    // A body changed behind docsync's back at the same version is what read_back reports; restore
    // puts the doc back at an equal version, never over a newer one.
    auto client = redis.client();
    client->command({"SET", "db:order:2", R"({"channel":"db:order:2","doc":{"id":99},"generation":3,"lsn":"0/3000"})"});
    CHECK(sink.read_back("db:order:2")->doc == std::optional<std::string>(R"({"id":99})"));
    sink.restore("db:order:2", doc(R"({"id": 2})"), DocVersion{3, 0x3000});
    CHECK(sink.read_back("db:order:2")->doc == std::optional<std::string>(R"({"id":2})"));
    sink.restore("db:order:2", doc(R"({"id": 0})"), DocVersion{3, 0x2FFF});
    CHECK(sink.read_back("db:order:2")->doc == std::optional<std::string>(R"({"id":2})"));

    // What is not a docsync envelope of the channel cannot be read back: an error naming the key.
    client->command({"SET", "db:order:3", "not an envelope"});
    CHECK_THROWS_WITH_AS(sink.read_back("db:order:3"), doctest::Contains("db:order:3"), Error);
    client->command({"SET", "db:order:4", R"({"channel":"db:order:5","doc":{},"generation":1,"lsn":"0/1"})"});
    CHECK_THROWS_AS(sink.read_back("db:order:4"), Error);
    client->command({"HSET", "db:order:6", "a", "b"});
    CHECK_THROWS_WITH_AS(sink.read_back("db:order:6"), doctest::Contains("WRONGTYPE"), Error);
}

TEST_CASE("redis: a key of another type under db: is a permanent error naming it") {
    RedisServer redis;
    RedisSink sink(redis.address());
    auto client = redis.client();
    client->command({"HSET", "db:x:1", "a", "b"});
    try {
        sink.publish("db:x:1", doc("{}"), DocVersion{1, 1});
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK_FALSE(e.transient());
        CHECK(std::string(e.what()).find("db:x:1 holds a hash") != std::string::npos);
    }
    sink.publish("db:x:2", doc("{}"), DocVersion{1, 1});  // the sink still works
}

TEST_CASE("redis: publish_many sends every doc in one round trip, each with its own outcome") {
    RedisServer redis;
    RedisSink sink(redis.address());
    auto client = redis.client();
    client->command({"HSET", "db:x:3", "a", "b"});
    client->command({"SCRIPT", "FLUSH"});  // the first reply of each is NOSCRIPT: the script is sent again
    std::vector<std::string> channels;
    std::vector<std::optional<std::string>> docs;
    for (int i = 1; i <= 6; ++i) {
        channels.push_back("db:x:" + std::to_string(i));
        docs.push_back(i == 5 ? std::nullopt : doc("{\"i\": " + std::to_string(i) + "}"));
    }
    std::vector<docsync::Publication> publications;
    for (std::size_t i = 0; i < channels.size(); ++i) publications.push_back({&channels[i], &docs[i], DocVersion{1, 0x100}});
    auto out = sink.publish_many(publications);
    REQUIRE(out.size() == 6);
    for (std::size_t i = 0; i < out.size(); ++i) {
        INFO(channels[i]);
        if (i == 2) {
            REQUIRE(out[i]);
            CHECK_FALSE(out[i]->transient());
            CHECK(std::string(out[i]->what()).find("db:x:3 holds a hash") != std::string::npos);
        } else {
            CHECK_FALSE(out[i]);
        }
    }
    CHECK(get(*client, "db:x:6") == R"({"channel":"db:x:6","doc":{"i":6},"generation":1,"lsn":"0/100"})");
    CHECK(get(*client, "db:x:5").find(R"("doc":null)") != std::string::npos);
    // Redis gone: every doc gets the transient error.
    redis.stop();
    out = sink.publish_many(publications);
    for (const auto& o : out) {
        REQUIRE(o);
        CHECK(o->transient());
    }
}

TEST_CASE("redis: CLIENT PAUSE WRITE holds a publish back until the pause ends") {
    RedisServer redis;
    RedisSink sink(redis.address());
    auto client = redis.client();
    sink.publish("db:p:1", doc("1"), DocVersion{1, 1});  // warm the pool

    // Read before the pause is asked for, so no scheduling delay after its reply shortens the wait.
    auto started = std::chrono::steady_clock::now();
    REQUIRE(reply_text(client->command({"CLIENT", "PAUSE", "1500", "WRITE"}).get()) == "OK");
    auto done = std::async(std::launch::async, [&] { sink.publish("db:p:1", doc("2"), DocVersion{1, 2}); });
    // While paused the publish has not returned: its transactions cannot complete.
    CHECK(done.wait_for(700ms) == std::future_status::timeout);
    REQUIRE(done.wait_for(10s) == std::future_status::ready);
    done.get();  // no error: the publish went through once the pause ended
    CHECK(std::chrono::steady_clock::now() - started >= 1400ms);  // Redis's clock, not ours: a margin
    CHECK(get(*client, "db:p:1").find(R"("doc":2)") != std::string::npos);
}

TEST_CASE("redis: a pause longer than the command timeout is a transient error, and the retry lands") {
    RedisServer redis;
    docsync::publish::RedisSinkOptions options;
    options.command_timeout = 300ms;
    RedisSink sink(redis.address(), options);
    auto client = redis.client();
    REQUIRE(reply_text(client->command({"CLIENT", "PAUSE", "1000", "WRITE"}).get()) == "OK");
    std::atomic<int> transient{0};
    publish_until_taken(sink, "db:p:2", doc("{\"x\":1}"), DocVersion{1, 5}, transient, 20s);
    CHECK(transient > 0);
    CHECK(get(*client, "db:p:2").find(R"("x":1)") != std::string::npos);
}

TEST_CASE("redis: a restart loses nothing: publishes during the outage fail transiently and land after it") {
    // Redis keeps what it acknowledged across a restart only with persistence: appendfsync always.
    RedisServer redis({"--appendonly", "yes", "--appendfsync", "always"});
    RedisSink sink(redis.address());
    constexpr int kThreads = 4, kPerThread = 150;
    std::atomic<int> transient{0};
    std::atomic<int> published{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 1; i <= kPerThread; ++i) {
                // Every channel gets two versions; the second must be what stays.
                auto channel = "db:r:" + std::to_string(t) + ":" + std::to_string(i % 50);
                publish_until_taken(sink, channel, doc("{\"i\":" + std::to_string(i) + "}"),
                                    DocVersion{1, static_cast<std::uint64_t>(i)}, transient);
                ++published;
                std::this_thread::sleep_for(2ms);
            }
        });
    // Restart Redis while the publishers run.
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (published < kThreads * kPerThread / 4 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(5ms);
    redis.stop();
    std::this_thread::sleep_for(600ms);
    redis.start();
    for (auto& th : threads) th.join();
    CHECK(transient > 0);  // the outage was seen
    CHECK(published == kThreads * kPerThread);
    auto client = redis.client();
    for (int t = 0; t < kThreads; ++t)
        for (int k = 0; k < 50; ++k) {
            // The last i with i % 50 == k in 1..150.
            int last = k == 0 ? 150 : 100 + k;
            auto key = "db:r:" + std::to_string(t) + ":" + std::to_string(k);
            CAPTURE(key);
            CHECK(get(*client, key).find("{\"i\":" + std::to_string(last) + "}") != std::string::npos);
        }
}

TEST_CASE("redis: an unreachable Redis at start is a clear error naming the address") {
    int port;
    {
        RedisServer redis;
        port = redis.port();
    }  // stopped: nothing listens there now
    try {
        RedisSink sink(docsync::publish::parse_redis_url("redis://127.0.0.1:" + std::to_string(port)));
        FAIL("expected an error");
    } catch (const Error& e) {
        std::string message = e.what();
        CHECK(message.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
        CHECK(message.rfind("--sink: cannot connect to Redis at 127.0.0.1:", 0) == 0);
        CHECK(message.find("start Redis there, or fix HOST:PORT in --sink") != std::string::npos);
    }
}

TEST_CASE("redis liveness: polls report subscribed db: channels, warm and touch reach their callbacks") {
    RedisServer redis;
    std::mutex m;
    std::vector<std::pair<std::set<std::string>, bool>> polls;
    std::vector<std::string> warmed, touched;
    docsync::publish::LivenessCallbacks callbacks{
        [&](const std::vector<std::string>& channels, bool complete) {
            std::lock_guard lock(m);
            polls.emplace_back(std::set<std::string>(channels.begin(), channels.end()), complete);
        },
        [&](const std::string& c) {
            std::lock_guard lock(m);
            warmed.push_back(c);
        },
        [&](const std::string& c) {
            std::lock_guard lock(m);
            touched.push_back(c);
        }};
    docsync::publish::LivenessOptions options;
    options.poll_interval = 100ms;
    options.max_backoff = 500ms;
    auto liveness = docsync::publish::make_liveness(docsync::publish::parse_sink(redis.url()), callbacks, options);
    liveness->start();

    auto wait_for = [&](auto predicate, std::chrono::milliseconds limit) {
        auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            {
                std::lock_guard lock(m);
                if (predicate()) return true;
            }
            std::this_thread::sleep_for(20ms);
        }
        return false;
    };
    auto last_poll = [&] { return polls.empty() ? std::make_pair(std::set<std::string>{}, false) : polls.back(); };

    CHECK(wait_for([&] { return !polls.empty() && polls.back().second && polls.back().first.empty(); }, 5s));
    {
        Subscriber a(redis, {"db:order:1", "db:order:2", "other:chan"});
        CHECK(wait_for([&] { return last_poll() == std::make_pair(std::set<std::string>{"db:order:1", "db:order:2"}, true); },
                       5s));
    }
    // The subscriber left: the next complete poll no longer lists its channels.
    CHECK(wait_for([&] { return last_poll() == std::make_pair(std::set<std::string>{}, true); }, 5s));

    REQUIRE(wait_for([&] { return liveness->listening(); }, 5s));
    auto client = redis.client();
    client->command({"PUBLISH", "docsync:warm", "db:order:9"});
    client->command({"PUBLISH", "docsync:touch", "db:order:1"});
    client->command({"PUBLISH", "docsync:warm", "not-a-channel"});
    client->command({"PUBLISH", "docsync:warm", "db:order:10"});
    CHECK(wait_for([&] { return warmed.size() >= 2 && !touched.empty(); }, 5s));
    {
        std::lock_guard lock(m);
        CHECK(warmed == std::vector<std::string>{"db:order:9", "db:order:10"});
        CHECK(touched == std::vector<std::string>{"db:order:1"});
    }

    // Redis goes away: polls are reported incomplete (the engine keeps its live set) …
    redis.stop();
    CHECK(wait_for([&] { return !polls.empty() && !polls.back().second; }, 5s));
    CHECK(liveness->failed_polls() > 0);
    // … and when it is back, polling and listening resume by themselves.
    redis.start();
    CHECK(wait_for([&] { return !polls.empty() && polls.back().second; }, 10s));
    REQUIRE(wait_for([&] { return liveness->listening(); }, 10s));
    redis.client()->command({"PUBLISH", "docsync:warm", "db:order:11"});
    CHECK(wait_for([&] { return !warmed.empty() && warmed.back() == "db:order:11"; }, 5s));
    auto stop_started = std::chrono::steady_clock::now();
    liveness->stop();
    CHECK(std::chrono::steady_clock::now() - stop_started < 2s);
}

TEST_CASE("redis: with wait-replicas a doc counts only once the replica has it") {
    RedisServer master({"--repl-diskless-sync-delay", "0"});
    RedisServer replica({"--replicaof", "127.0.0.1", std::to_string(master.port())});
    auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
        // Online in the master's view too: only then does WAIT count it.
        auto info = master.client()->command({"INFO", "replication"});
        if (reply_text(info.get()).find("state=online") != std::string::npos) break;
        REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the replica did not sync");
        std::this_thread::sleep_for(20ms);
    }
    auto address = master.address();
    address.wait_replicas = 1;
    address.wait_timeout = 1000ms;
    RedisSink sink(address);
    auto reader = replica.client();
    for (int v = 1; v <= 20; ++v) {
        sink.publish("db:order:1", doc(std::to_string(v)), DocVersion{1, static_cast<std::uint64_t>(v)});
        auto held = docsync::publish::retained_doc(get(*reader, "db:order:1"), "db:order:1");
        REQUIRE(held);
        CHECK(*held->doc == std::to_string(v));  // on the replica as soon as the publish returned
    }
    replica.stop();
    try {
        sink.publish("db:order:1", doc("21"), DocVersion{1, 21});
        FAIL("a doc no replica acknowledged was taken");
    } catch (const Error& e) {
        CHECK(e.transient());
        CHECK(std::string(e.what()).find("only 0 of 1 replicas within 1000 ms") != std::string::npos);
    }
}

TEST_CASE("redis: a replica promoted while no worker watched is reported by the next sink, once") {
    RedisServer master({"--repl-diskless-sync-delay", "0"});
    RedisServer replica({"--replicaof", "127.0.0.1", std::to_string(master.port())});
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (reply_text(master.client()->command({"INFO", "replication"}).get()).find("state=online") ==
           std::string::npos) {
        REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the replica did not sync");
        std::this_thread::sleep_for(20ms);
    }
    {
        RedisSink first(master.address());
        CHECK_FALSE(first.lost_docs());  // writes the marker, with the master's replication ID
        first.publish("db:order:1", doc("1"), DocVersion{1, 1});
    }
    // The marker reaches the replica; then the replica is promoted, as Sentinel would.
    auto waited = replica.client();
    deadline = std::chrono::steady_clock::now() + 10s;
    while (get(*waited, "docsync:epoch") == "(nil)") {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::sleep_for(20ms);
    }
    replica.client()->command({"REPLICAOF", "NO", "ONE"});
    RedisSink next(replica.address());
    auto lost = next.lost_docs();
    REQUIRE(lost);
    CHECK(lost->find("has another replication history") != std::string::npos);
    CHECK_FALSE(next.lost_docs());
    RedisSink third(replica.address());
    CHECK_FALSE(third.lost_docs());  // the marker was rewritten: reported once
}
