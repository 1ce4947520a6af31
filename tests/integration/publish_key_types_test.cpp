// docsync:key_types stays what the worker last described, on Redis and on Redis Cluster: written
// again by the sink watch (lost_docs, every second) after a write that failed while Redis was down,
// a restart that lost it, or anything else that replaced it; docsync-gateway checks channels against
// it (gateway/key_forms.hpp).
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "publish/redis_cluster_sink.hpp"
#include "publish/redis_script.hpp"
#include "publish/redis_sink.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using docsync::publish::cluster_key;
using docsync::publish::key_slot;
using docsync::publish::kKeyTypesKey;
using docsync::publish::RedisClusterSink;
using docsync::publish::RedisSink;
using docsync::publish::reply_text;
using docsync::testing::RedisServer;
using docsync::testing::RedisTestCluster;

namespace {

std::string held(RedisServer& redis) {
    auto c = redis.client();
    auto r = c->command({"GET", kKeyTypesKey});
    return r->type == REDIS_REPLY_NIL ? std::string("(nil)") : reply_text(r.get());
}

// lost_docs until it answers (the first call after a restart may still see Redis loading).
template <class Sink>
void watch(Sink& sink) {
    for (int i = 0; i < 50; ++i) {
        try {
            (void)sink.lost_docs();
            return;
        } catch (const std::exception&) {
            std::this_thread::sleep_for(100ms);
        }
    }
    FAIL("the sink watch never reached Redis");
}

}  // namespace

TEST_CASE("redis: docsync:key_types is written again after a failed write, a restart and a change by anyone") {
    RedisServer redis;  // no persistence: a restart comes back empty
    RedisSink sink(redis.address());
    const std::string before = R"({"item":["int4"]})", after = R"({"item":["text"]})";
    sink.describe_keys(before);
    CHECK(held(redis) == before);
    watch(sink);
    // redefined while Redis is down: the write fails and is only logged
    redis.stop();
    sink.describe_keys(after);
    redis.start();
    CHECK(held(redis) == "(nil)");
    watch(sink);
    CHECK(held(redis) == after);
    // replaced by something else (an older worker, a person): the next watch puts it back
    redis.client()->command({"SET", kKeyTypesKey, before});
    watch(sink);
    CHECK(held(redis) == after);
}

TEST_CASE("redis cluster: docsync:key_types is written again when its master no longer holds it") {
    RedisTestCluster cluster(3);
    RedisClusterSink sink(cluster.address());
    const std::string types = R"({"item":["text"]})";
    sink.describe_keys(types);
    std::string key(kKeyTypesKey);
    int owner = cluster.owner_of(key_slot(key));
    CHECK(cluster.reply(owner, {"GET", key}) == types);
    cluster.command(owner, {"DEL", key});  // as a restart without persistence or a FLUSHALL leaves it
    watch(sink);
    CHECK(cluster.reply(owner, {"GET", key}) == types);
}
