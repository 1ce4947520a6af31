// The Redis Cluster sink, its liveness and its watermark against a real cluster of redis-servers
// started by each test (tests/integration/redis_server.hpp): routing by hash slot, sharded pub/sub,
// ASK and MOVED during a slot migration, NOSCRIPT, a master down, and what lost_docs() reports.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.hpp"
#include "progress/coordinator.hpp"
#include "redis/cluster_map.hpp"
#include "envelope/envelope.hpp"
#include "publish/liveness.hpp"
#include "publish/redis_cluster_sink.hpp"
#include "publish/sink.hpp"
#include "publish/watermark.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using docsync::DocVersion;
using docsync::Error;
using docsync::publish::cluster_key;
using docsync::publish::key_slot;
using docsync::Publication;
using docsync::publish::RedisClusterSink;
using docsync::publish::RedisConnection;
using docsync::publish::reply_text;
using docsync::testing::eventually;
using docsync::testing::RedisTestCluster;

namespace {

std::optional<std::string> doc(const std::string& json) { return json; }

// The envelope node `n` itself holds at `key` ("(nil)" when none), asked without redirects.
std::string held(RedisTestCluster& cluster, int n, const std::string& key, bool asking = false) {
    auto c = cluster.node(n).client();
    if (asking) c->command({"ASKING"});
    auto r = c->command({"GET", key});
    return r->type == REDIS_REPLY_NIL ? std::string("(nil)") : reply_text(r.get());
}

std::string status_of(const std::string& envelope) {
    auto head = docsync::publish::parse_envelope(envelope);
    REQUIRE_MESSAGE(head, envelope);
    return envelope.substr(head->doc_at, head->doc_size);
}


std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("redis cluster: each doc is retained on its slot's master and SPUBLISHed to its shard's subscribers") {
    RedisTestCluster cluster(3);
    RedisClusterSink sink(cluster.address());
    const std::string channel = "db:order:42";
    const std::string key = cluster_key(channel);
    int owner = cluster.owner_of(key_slot(key));
    REQUIRE(owner >= 0);

    auto subscriber = cluster.node(owner).client();
    auto first = subscriber->command({"SSUBSCRIBE", key});
    REQUIRE(first->type == REDIS_REPLY_ARRAY);
    CHECK(reply_text(first->element[0]) == "ssubscribe");

    std::vector<std::string> channels;
    std::vector<std::optional<std::string>> docs;
    for (int i = 1; i <= 60; ++i) {
        channels.push_back("db:order:" + std::to_string(i));
        docs.push_back(doc("{\"id\":" + std::to_string(i) + "}"));
    }
    std::vector<Publication> batch;
    for (std::size_t i = 0; i < channels.size(); ++i) batch.push_back({&channels[i], &docs[i], DocVersion{1, 100}});
    for (const auto& e : sink.publish_many(batch)) CHECK_MESSAGE(!e, (e ? e->what() : ""));

    std::set<int> owners;
    for (std::size_t i = 0; i < channels.size(); ++i) {
        int n = cluster.owner_of(key_slot(cluster_key(channels[i])));
        owners.insert(n);
        CHECK(status_of(held(cluster, n, cluster_key(channels[i]))) == *docs[i]);
        auto back = sink.read_back(channels[i]);
        REQUIRE(back);
        CHECK(*back->doc == *docs[i]);
    }
    CHECK(owners.size() == 3);  // the docs spread over every master

    void* raw = nullptr;
    REQUIRE(redisGetReply(subscriber->context(), &raw) == REDIS_OK);
    docsync::publish::Reply message(static_cast<redisReply*>(raw));
    REQUIRE(message->elements == 3);
    CHECK(reply_text(message->element[0]) == "smessage");
    CHECK(reply_text(message->element[1]) == key);
    CHECK(status_of(reply_text(message->element[2])) == "{\"id\":42}");

    auto retained = sink.retained_channels();
    CHECK(retained.size() == 60);
    CHECK(std::find(retained.begin(), retained.end(), "db:order:42") != retained.end());

    // An older version never replaces a newer one, on any shard; a tombstone expires.
    sink.publish(channel, doc("{\"id\":42,\"v\":2}"), DocVersion{1, 200});
    sink.publish(channel, doc("{\"id\":42,\"v\":0}"), DocVersion{1, 150});
    CHECK(*sink.read_back(channel)->doc == "{\"id\":42,\"v\":2}");
    // A key of another type at a doc's name is a setup problem no retry fixes.
    cluster.command(cluster.owner_of(key_slot(cluster_key("db:x:1"))), {"HSET", cluster_key("db:x:1"), "f", "v"});
    try {
        sink.publish("db:x:1", doc("1"), DocVersion{1, 1});
        FAIL("a doc replaced a hash");
    } catch (const Error& e) {
        CHECK_FALSE(e.transient());
        CHECK(std::string(e.what()).find("holds a hash, not a docsync doc") != std::string::npos);
    }
    sink.publish("db:order:7", std::nullopt, DocVersion{1, 300});
    CHECK_FALSE(sink.read_back("db:order:7")->doc);
    CHECK(std::stoll(cluster.reply(cluster.owner_of(key_slot(cluster_key("db:order:7"))), {"PTTL", cluster_key("db:order:7")})) > 0);
}

TEST_CASE("redis cluster: a slot being migrated is followed through ASK, then MOVED, and no version goes back") {
    RedisTestCluster cluster(3);
    RedisClusterSink sink(cluster.address());
    const std::string channel = "db:order:1";
    const std::string key = cluster_key(channel);
    int slot = key_slot(key);
    int from = cluster.owner_of(slot), to = (from + 1) % 3;
    sink.publish(channel, doc("{\"v\":1}"), DocVersion{1, 10});

    cluster.begin_migration(slot, from, to);
    // The key still lives on the source: the source takes it.
    sink.publish(channel, doc("{\"v\":2}"), DocVersion{1, 20});
    CHECK(status_of(held(cluster, from, key)) == "{\"v\":2}");
    // Moved to the target while the slot is migrating: the source answers ASK.
    cluster.migrate_keys(slot, from, to);
    sink.publish(channel, doc("{\"v\":3}"), DocVersion{1, 30});
    CHECK(status_of(held(cluster, to, key, true)) == "{\"v\":3}");
    CHECK(held(cluster, from, key).rfind("ASK ", 0) == 0);  // gone from the source
    // A new doc of that slot, not on the source at all: ASK too.
    std::string other;
    for (int i = 2;; ++i)
        if (key_slot(cluster_key("db:order:" + std::to_string(i))) == slot) {
            other = "db:order:" + std::to_string(i);
            break;
        } else if (i > 2000000) {
            FAIL("no other channel in slot " << slot);
        }
    sink.publish(other, doc("{\"other\":1}"), DocVersion{1, 31});
    CHECK(status_of(held(cluster, to, cluster_key(other), true)) == "{\"other\":1}");

    cluster.end_migration(slot, to);
    // The slot moved for good: the old map's node answers MOVED.
    sink.publish(channel, doc("{\"v\":4}"), DocVersion{1, 40});
    sink.publish(channel, doc("{\"v\":2}"), DocVersion{1, 20});  // older: dropped on the new master too
    CHECK(status_of(held(cluster, to, key)) == "{\"v\":4}");
    CHECK(*sink.read_back(channel)->doc == "{\"v\":4}");
    // The map is read again at most every 100 ms (kMinRefresh): the steps above can all fall within
    // that of the first read, so the next publish after it is the one that reads the new owner.
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    sink.publish(channel, doc("{\"v\":3}"), DocVersion{1, 30});  // older: dropped
    CHECK(sink.client().map()->master_of(slot)->port == cluster.node(to).port());
    // A slot that moved took its keys along: no docs were lost.
    CHECK_FALSE(sink.lost_docs());
    cluster.move_slot(sink.client().map()->first_slot_of(*sink.client().map()->master_of(0)), cluster.owner_of(0),
                      (cluster.owner_of(0) + 2) % 3);
    CHECK_FALSE(sink.lost_docs());
}

TEST_CASE("redis cluster: NOSCRIPT is answered with the script, and max_generation is raised before a new generation") {
    RedisTestCluster cluster(3);
    RedisClusterSink sink(cluster.address());
    CHECK(sink.max_generation() == 0);
    sink.publish("db:a:1", doc("1"), DocVersion{3, 1});
    CHECK(sink.max_generation() == 3);
    for (int n = 0; n < 3; ++n) cluster.command(n, {"SCRIPT", "FLUSH"});
    std::vector<std::string> channels{"db:a:1", "db:a:2", "db:a:3", "db:a:4", "db:a:5", "db:a:6"};
    auto d = doc("2");
    std::vector<Publication> batch;
    for (auto& c : channels) batch.push_back({&c, &d, DocVersion{5, 2}});
    for (const auto& e : sink.publish_many(batch)) CHECK_MESSAGE(!e, (e ? e->what() : ""));
    CHECK(sink.max_generation() == 5);
    // Never lowered.
    sink.publish("db:a:1", doc("3"), DocVersion{4, 9});
    CHECK(sink.max_generation() == 5);
    CHECK(*sink.read_back("db:a:1")->doc == "2");
}

TEST_CASE("redis cluster: a master down fails only its docs, fast, a restart without its data is reported") {
    RedisTestCluster cluster(3);
    docsync::publish::RedisSinkOptions options;
    options.command_timeout = 2000ms;
    RedisClusterSink sink(cluster.address(), options);
    CHECK_FALSE(sink.lost_docs());  // takes note
    std::vector<std::string> channels;
    for (int i = 1; i <= 30; ++i) channels.push_back("db:order:" + std::to_string(i));
    auto d = doc("{}");
    std::vector<Publication> batch;
    for (auto& c : channels) batch.push_back({&c, &d, DocVersion{1, 10}});
    for (const auto& e : sink.publish_many(batch)) REQUIRE(!e);

    int down = cluster.owner_of(key_slot(cluster_key(channels[0])));
    cluster.node(down).stop();
    auto started = std::chrono::steady_clock::now();
    for (int round = 0; round < 3; ++round) {
        auto out = sink.publish_many(batch);
        for (std::size_t i = 0; i < channels.size(); ++i) {
            bool on_down = cluster.owner_of(key_slot(cluster_key(channels[i]))) == down;
            if (on_down) {
                REQUIRE(out[i]);
                CHECK(out[i]->transient());
            } else {
                CHECK_MESSAGE(!out[i], channels[i] << ": " << (out[i] ? out[i]->what() : ""));
            }
        }
    }
    CHECK(std::chrono::steady_clock::now() - started < 3s);  // backing off, not waiting on the dead node

    cluster.node(down).start();  // --save '': back empty, with a new run_id
    REQUIRE(eventually([&] {
        auto out = sink.publish_many(batch);
        return std::none_of(out.begin(), out.end(), [](const auto& e) { return e.has_value(); });
    }, 20s));
    auto lost = sink.lost_docs();
    REQUIRE(lost);
    CHECK(lost->find("restarted") != std::string::npos);
    CHECK_FALSE(sink.lost_docs());

    // FLUSHALL on one master: its marker key is gone.
    cluster.command((down + 1) % 3, {"FLUSHALL"});
    lost = sink.lost_docs();
    REQUIRE(lost);
    CHECK(lost->find("no longer holds its marker key docsync:epoch:{") != std::string::npos);
}

TEST_CASE("redis cluster: a failover (a replica promoted) is reported as possibly lost docs") {
    RedisTestCluster cluster(2, 1);
    RedisClusterSink sink(cluster.address());
    CHECK_FALSE(sink.lost_docs());
    sink.publish("db:a:1", doc("1"), DocVersion{1, 1});
    // Node 2 replicates node 0: a manual failover promotes it.
    cluster.command(2, {"CLUSTER", "FAILOVER"});
    REQUIRE(eventually([&] { return cluster.owner_of(0) == 2; }, 20s));
    std::optional<std::string> lost;
    REQUIRE(eventually([&] { return (lost = sink.lost_docs()).has_value(); }, 10s));
    CHECK(lost->find("was promoted to master (failover)") != std::string::npos);
    CHECK(*sink.read_back("db:a:1")->doc == "1");
}

TEST_CASE("redis cluster: sharded subscribers make docs live, warm and touch arrive from any node") {
    RedisTestCluster cluster(3);
    std::mutex mutex;
    std::set<std::string> live, warmed, touched;
    docsync::publish::LivenessCallbacks callbacks{
        [&](const std::vector<std::string>& channels, bool complete) {
            std::lock_guard lock(mutex);
            if (complete) live = std::set<std::string>(channels.begin(), channels.end());
        },
        [&](const std::string& c) {
            std::lock_guard lock(mutex);
            warmed.insert(c);
        },
        [&](const std::string& c) {
            std::lock_guard lock(mutex);
            touched.insert(c);
        }};
    docsync::publish::LivenessOptions options;
    options.poll_interval = 100ms;
    auto liveness = docsync::publish::make_liveness(docsync::publish::parse_sink(cluster.url()), callbacks, options);
    liveness->start();

    const std::string key = cluster_key("db:order:9");
    auto subscriber = cluster.node(cluster.owner_of(key_slot(key))).client();
    subscriber->command({"SSUBSCRIBE", key});
    CHECK(eventually([&] {
        std::lock_guard lock(mutex);
        return live.count("db:order:9") == 1;
    }));
    REQUIRE(eventually([&] { return liveness->listening(); }));
    cluster.command(2, {"PUBLISH", "docsync:warm", "{db:order:10}"});
    cluster.command(1, {"PUBLISH", "docsync:touch", "db:order:11"});
    CHECK(eventually([&] {
        std::lock_guard lock(mutex);
        return warmed.count("db:order:10") == 1 && touched.count("db:order:11") == 1;
    }));
    subscriber.reset();
    CHECK(eventually([&] {
        std::lock_guard lock(mutex);
        return live.count("db:order:9") == 0;
    }));
    liveness->stop();
}

TEST_CASE("redis cluster: the watermark lives on one slot and only moves forward") {
    RedisTestCluster cluster(3);
    struct Sink : docsync::Acknowledger {
        void acknowledge(docsync::Lsn) override {}
    } next;
    {
        docsync::publish::RedisWatermark watermark(cluster.address(), next);
        watermark.set_generation(2);
        watermark.acknowledge(0x16B3F28);
        REQUIRE(eventually([&] { return watermark.published() == 0x16B3F28; }));
        watermark.acknowledge(0x2000100);
        watermark.stop();
    }
    int n = cluster.owner_of(key_slot(docsync::publish::kClusterWatermarkKey));
    CHECK(held(cluster, n, docsync::publish::kClusterWatermarkKey) == "0/2000100");
    CHECK(held(cluster, n, docsync::publish::kClusterWatermarkGenerationKey) == "2");
}

TEST_CASE("redis cluster: a server that is no cluster node, or no seed answering, is refused with the fix") {
    docsync::testing::RedisServer single;
    auto message = error_of([&] {
        RedisClusterSink sink(docsync::publish::parse_redis_cluster_url("redis-cluster://127.0.0.1:" +
                                                                         std::to_string(single.port())));
    });
    CHECK(message.find("is not a Redis Cluster node") != std::string::npos);
    CHECK(message.find("for a single Redis give redis://") != std::string::npos);
    message = error_of([] { RedisClusterSink sink(docsync::publish::parse_redis_cluster_url("redis-cluster://127.0.0.1:1")); });
    CHECK(message.find("no Redis Cluster node answered") != std::string::npos);
    CHECK(message.find("127.0.0.1:1") != std::string::npos);
    // One dead seed of two: the other one is enough.
    RedisTestCluster cluster(3);
    RedisClusterSink sink(docsync::publish::parse_redis_cluster_url(
        "redis-cluster://127.0.0.1:1,127.0.0.1:" + std::to_string(cluster.node(2).port())));
    sink.publish("db:a:1", doc("1"), DocVersion{1, 1});
    CHECK(*sink.read_back("db:a:1")->doc == "1");
}

TEST_CASE("redis cluster: the worker's sink starts while a master is down, that master's docs wait") {
    RedisTestCluster cluster(3);
    const std::string on_down = "db:order:1";
    int down = cluster.owner_of(key_slot(cluster_key(on_down)));
    std::string elsewhere;
    for (int i = 2; elsewhere.empty(); ++i)
        if (cluster.owner_of(key_slot(cluster_key("db:order:" + std::to_string(i)))) != down)
            elsewhere = "db:order:" + std::to_string(i);
    cluster.node(down).stop();
    RedisClusterSink sink(cluster.address());
    sink.publish(elsewhere, doc("1"), DocVersion{1, 1});
    CHECK(*sink.read_back(elsewhere)->doc == "1");
    auto message = error_of([&] { sink.publish(on_down, doc("1"), DocVersion{1, 1}); });
    CHECK(message.find(std::to_string(cluster.node(down).port())) != std::string::npos);
    cluster.node(down).start();
    CHECK(eventually([&] { return error_of([&] { sink.publish(on_down, doc("2"), DocVersion{1, 2}); }) == "no error"; }));
    CHECK(*sink.read_back(on_down)->doc == "2");
}

TEST_CASE("redis cluster: a cluster with a password is reached with it, and refused with the fix without it") {
    RedisTestCluster cluster(3, 0, "s3cret-pw");
    RedisClusterSink sink(cluster.address());
    sink.publish("db:a:1", doc("1"), DocVersion{1, 1});
    CHECK(*sink.read_back("db:a:1")->doc == "1");
    auto no_password = docsync::publish::parse_redis_cluster_url("redis-cluster://127.0.0.1:" +
                                                                 std::to_string(cluster.node(0).port()));
    auto message = error_of([&] { RedisClusterSink refused(no_password); });
    CHECK(message.find("requires a password") != std::string::npos);
    CHECK(message.find("redis-cluster://:PASSWORD@HOST:PORT") != std::string::npos);
    auto wrong = no_password;
    wrong.seeds.front().password = "wrong";
    message = error_of([&] { RedisClusterSink refused(wrong); });
    CHECK(message.find("AUTH failed") != std::string::npos);
    CHECK(message.find("s3cret-pw") == std::string::npos);
}

TEST_CASE("redis cluster: with wait-replicas a doc counts only once its master's replica has it") {
    RedisTestCluster cluster(2, 1);
    RedisClusterSink sink(docsync::publish::parse_redis_cluster_url(cluster.url() + "?wait-replicas=1&wait-timeout=1000"));
    const std::string channel = "db:order:5";
    int master = cluster.owner_of(key_slot(cluster_key(channel)));
    int replica = master + 2;  // node r replicates node (r - masters) % masters
    for (int v = 1; v <= 20; ++v) {
        sink.publish(channel, doc(std::to_string(v)), DocVersion{1, static_cast<std::uint64_t>(v)});
        // Published means on the replica too: read it there at once.
        auto c = cluster.node(replica).client();
        c->command({"READONLY"});
        auto r = c->command({"GET", cluster_key(channel)});
        REQUIRE(r->type == REDIS_REPLY_STRING);
        CHECK(status_of(reply_text(r.get())) == std::to_string(v));
    }
    cluster.node(replica).stop();
    auto message = error_of([&] { sink.publish(channel, doc("21"), DocVersion{1, 21}); });
    CHECK(message.find("only 0 of 1 replicas within 1000 ms (wait-replicas in the Redis URL) acknowledged") != std::string::npos);
    cluster.node(replica).start();
    CHECK(eventually([&] { return error_of([&] { sink.publish(channel, doc("22"), DocVersion{1, 22}); }) == "no error"; },
                     20s));
}

TEST_CASE("redis cluster: a slot no master serves fails its docs as transient until it is assigned again") {
    RedisTestCluster cluster(3);
    RedisClusterSink sink(cluster.address());
    const std::string channel = "db:order:3";
    int slot = key_slot(cluster_key(channel));
    int owner = cluster.owner_of(slot);
    sink.publish(channel, doc("1"), DocVersion{1, 1});
    for (int n = 0; n < 3; ++n) cluster.command(n, {"CLUSTER", "DELSLOTS", std::to_string(slot)});
    try {
        sink.publish(channel, doc("2"), DocVersion{1, 2});
        FAIL("a doc of an unserved slot was taken");
    } catch (const Error& e) {
        CHECK(e.transient());
        CHECK(std::string(e.what()).find("CLUSTERDOWN") != std::string::npos);
    }
    sink.publish("db:order:4", doc("1"), DocVersion{1, 1});  // other slots go on
    cluster.command(owner, {"CLUSTER", "ADDSLOTS", std::to_string(slot)});
    CHECK(eventually([&] { return error_of([&] { sink.publish(channel, doc("3"), DocVersion{1, 3}); }) == "no error"; }));
    CHECK(*sink.read_back(channel)->doc == "3");
}

TEST_CASE("redis cluster: a failover while no worker watched is reported by the next one, once") {
    RedisTestCluster cluster(2, 1);
    {
        RedisClusterSink first(cluster.address());
        CHECK_FALSE(first.lost_docs());  // marks every master
        first.publish("db:a:1", doc("1"), DocVersion{1, 1});
    }
    cluster.command(2, {"CLUSTER", "FAILOVER"});  // node 2 replicates node 0
    REQUIRE(eventually([&] { return cluster.owner_of(0) == 2; }, 20s));
    RedisClusterSink next(cluster.address());
    std::optional<std::string> lost;
    REQUIRE(eventually([&] { return (lost = next.lost_docs()).has_value(); }, 10s));
    CHECK(lost->find("has another replication history") != std::string::npos);
    CHECK_FALSE(next.lost_docs());
    RedisClusterSink third(cluster.address());
    CHECK_FALSE(third.lost_docs());  // rewritten: reported once
}
