// Redis Cluster routing without a server: CRC16 and hash slots against the Redis Cluster
// specification's examples, slot maps parsed from CLUSTER SHARDS / CLUSTER SLOTS replies (RESP read by
// hiredis's own reader), MOVED/ASK redirects, and the redis-cluster:// URL.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "common/error.hpp"
#include "redis/cluster_map.hpp"
#include "redis/cluster_client.hpp"
#include "publish/sink.hpp"
#include "resp_text.hpp"

using namespace docsync::publish;
using docsync::test::bulk;
using docsync::test::read_resp;

namespace {

std::string num(long long n) { return ":" + std::to_string(n) + "\r\n"; }
std::string arr(std::size_t n) { return "*" + std::to_string(n) + "\r\n"; }

std::string shard_node(const std::string& id, int port, const std::string& ip, const std::string& endpoint,
                       const std::string& role, const std::string& health = "online") {
    return arr(14) + bulk("id") + bulk(id) + bulk("port") + num(port) + bulk("ip") + bulk(ip) + bulk("endpoint") +
           bulk(endpoint) + bulk("role") + bulk(role) + bulk("replication-offset") + num(1234) + bulk("health") +
           bulk(health);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const docsync::Error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("cluster: CRC16 and hash slots follow the Redis Cluster specification") {
    // The specification's test vector: CRC16-XMODEM of "123456789" is 0x31C3.
    CHECK(crc16("123456789") == 0x31C3);
    CHECK(crc16("") == 0);
    CHECK(key_slot("123456789") == (0x31C3 & 16383));
    // CLUSTER KEYSLOT of a real server for these keys.
    CHECK(key_slot("foo") == 12182);
    CHECK(key_slot("bar") == 5061);
    CHECK(key_slot("hello") == 866);
    // Hash tags, as the specification's examples.
    CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
    CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
    CHECK(key_slot("foo{}{bar}") == crc16("foo{}{bar}") % 16384);   // empty tag: the whole key
    CHECK(key_slot("foo{{bar}}zap") == key_slot("{bar"));            // from the first { to the next }
    CHECK(key_slot("foo{bar}{zap}") == key_slot("bar"));             // the first tag only
    CHECK(key_slot("foo{bar") == crc16("foo{bar") % 16384);          // no closing brace
    // A doc's key and channel share the slot, whatever the channel holds.
    CHECK(key_slot(cluster_key("db:order:42")) == key_slot("db:order:42"));
    CHECK(key_slot(cluster_key("db:x:{y}")) == key_slot(cluster_key("db:x:{y}")));
    CHECK(channel_of_cluster_key("{db:order:42}") == "db:order:42");
    CHECK(channel_of_cluster_key("db:order:42") == "db:order:42");
}

TEST_CASE("cluster: slot_tag finds a tag for every slot") {
    for (int s = 0; s < kClusterSlots; ++s) REQUIRE(key_slot("docsync:epoch:{" + slot_tag(s) + "}") == s);
}

TEST_CASE("cluster: CLUSTER SHARDS builds the map, roles and health included") {
    std::string resp = arr(2) +
                       // shard 1: slots 0-5460 and 10923-10930, a master and a replica
                       arr(4) + bulk("slots") + arr(4) + num(0) + num(5460) + num(10923) + num(10930) + bulk("nodes") +
                       arr(2) + shard_node("aaa", 7000, "10.0.0.1", "10.0.0.1", "master") +
                       shard_node("bbb", 7003, "10.0.0.4", "", "replica", "failed") +
                       // shard 2: the rest of the first half, its endpoint unknown ("?")
                       arr(4) + bulk("slots") + arr(2) + num(5461) + num(10922) + bulk("nodes") + arr(1) +
                       shard_node("ccc", 7001, "", "?", "master");
    auto reply = read_resp(resp);
    auto map = parse_cluster_shards(reply.get(), "seed.example");
    REQUIRE(map);
    CHECK(map->covered() == 10931);
    REQUIRE(map->master_of(0) != nullptr);
    CHECK(map->master_of(0)->id == "aaa");
    CHECK(map->master_of(0)->endpoint() == "10.0.0.1:7000");
    CHECK(map->master_of(10930)->id == "aaa");
    CHECK(map->master_of(5461)->id == "ccc");
    CHECK(map->master_of(5461)->host == "seed.example");  // "?": the node asked
    CHECK(map->master_of(10931) == nullptr);
    const ClusterNode* replica = map->find("bbb");
    REQUIRE(replica != nullptr);
    CHECK_FALSE(replica->master);
    CHECK(replica->master_id == "aaa");
    CHECK_FALSE(replica->healthy);
    CHECK(replica->host == "10.0.0.4");  // no endpoint: its ip
    CHECK(map->masters().size() == 2);
    CHECK(map->first_slot_of(*map->find("ccc")) == 5461);

    // Malformed: an odd key/value list, a slot out of range, slots without a master, a bad port.
    CHECK_FALSE(parse_cluster_shards(read_resp(arr(1) + arr(3) + bulk("slots") + arr(0) + bulk("nodes")).get(), "h"));
    CHECK_FALSE(parse_cluster_shards(read_resp(arr(1) + arr(4) + bulk("slots") + arr(2) + num(0) + num(16384) +
                                               bulk("nodes") + arr(1) + shard_node("a", 7000, "h", "h", "master"))
                                         .get(),
                                     "h"));
    CHECK_FALSE(parse_cluster_shards(read_resp(arr(1) + arr(4) + bulk("slots") + arr(2) + num(0) + num(1) +
                                               bulk("nodes") + arr(1) + shard_node("a", 7000, "h", "h", "replica"))
                                         .get(),
                                     "h"));
    CHECK_FALSE(parse_cluster_shards(read_resp(arr(1) + arr(4) + bulk("slots") + arr(0) + bulk("nodes") + arr(1) +
                                               shard_node("a", 0, "h", "h", "master"))
                                         .get(),
                                     "h"));
    CHECK_FALSE(parse_cluster_shards(read_resp(num(3)).get(), "h"));
}

TEST_CASE("cluster: CLUSTER SLOTS builds the map, for servers before Redis 7") {
    std::string resp = arr(2) + arr(4) + num(0) + num(8191) + arr(3) + bulk("127.0.0.1") + num(7000) + bulk("id0") +
                       arr(3) + bulk("127.0.0.1") + num(7002) + bulk("id2") + arr(3) + num(8192) + num(16383) + arr(2) +
                       bulk("") + num(7001);
    auto map = parse_cluster_slots(read_resp(resp).get(), "10.1.1.1");
    REQUIRE(map);
    CHECK(map->covered() == 16384);
    CHECK(map->master_of(100)->id == "id0");
    CHECK(map->find("id2")->master_id == "id0");
    CHECK_FALSE(map->find("id2")->master);
    CHECK(map->master_of(9000)->endpoint() == "10.1.1.1:7001");  // "": the node asked; no id: its address
    CHECK(map->master_of(9000)->id == "10.1.1.1:7001");
    CHECK_FALSE(parse_cluster_slots(read_resp(arr(1) + arr(2) + num(0) + num(1)).get(), "h"));
    CHECK_FALSE(parse_cluster_slots(read_resp(arr(1) + arr(3) + num(5) + num(1) + arr(2) + bulk("h") + num(7000)).get(), "h"));
    CHECK_FALSE(parse_cluster_slots(read_resp(arr(1) + arr(3) + num(0) + num(1) + arr(2) + num(1) + num(7000)).get(), "h"));
}

TEST_CASE("cluster: MOVED and ASK redirects parse, anything else is no redirect") {
    auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
    REQUIRE(moved);
    CHECK_FALSE(moved->ask);
    CHECK(moved->slot == 3999);
    CHECK(moved->host == "127.0.0.1");
    CHECK(moved->port == 6381);
    auto ask = parse_redirect("ASK 16383 [::1]:7000");
    REQUIRE(ask);
    CHECK(ask->ask);
    CHECK(ask->host == "::1");
    auto bare_v6 = parse_redirect("MOVED 1 ::1:7000");
    REQUIRE(bare_v6);
    CHECK(bare_v6->host == "::1");
    auto same_host = parse_redirect("MOVED 12 :7005");  // no endpoint announced: the node that answered
    REQUIRE(same_host);
    CHECK(same_host->host.empty());
    for (const char* bad : {"MOVED", "MOVED 3999", "MOVED 16384 h:1", "MOVED -1 h:1", "MOVED 1 h", "MOVED 1 h:0",
                            "MOVED 1 h:70000", "ASK x h:1", "ERR MOVED 1 h:1", "NOSCRIPT No matching script", ""})
        CHECK_MESSAGE(!parse_redirect(bad), bad);
}

TEST_CASE("--sink redis-cluster:// parses its seeds, bad values name the form") {
    auto spec = parse_sink("redis-cluster://app:pw@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002?tombstone-ttl=30");
    CHECK(spec.kind == SinkSpec::Kind::RedisCluster);
    CHECK(spec.is_redis());
    REQUIRE(spec.cluster.seeds.size() == 3);
    CHECK(spec.cluster.seeds[0].host == "10.0.0.1");
    CHECK(spec.cluster.seeds[1].port == 7001);
    CHECK(spec.cluster.seeds[2].host == "::1");
    for (const auto& seed : spec.cluster.seeds) {
        CHECK(seed.user == "app");
        CHECK(seed.password == "pw");
    }
    CHECK(spec.cluster.tombstone_ttl == std::chrono::seconds(30));
    CHECK(spec.display() == "Redis Cluster via 10.0.0.1:7000,10.0.0.2:7001,[::1]:7002");
    CHECK(parse_sink("redis-cluster://h:1/0").cluster.seeds.size() == 1);

    CHECK(error_of([] { parse_sink("redis-cluster://h"); }).find("needs its :PORT") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis-cluster://h:1,"); }).find("host is missing") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis-cluster://h:1/2"); }).find("database 0 only") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis-cluster://h:1?x=1"); }).find("redis-cluster://[[USER]:PASSWORD@]HOST:PORT") !=
          std::string::npos);
    CHECK(error_of([] { parse_sink("redis://a:1,b:2"); }).find("use redis-cluster://") != std::string::npos);
    CHECK(error_of([] { parse_sink("rediss://a:1"); }).find("redis-cluster://HOST:PORT") != std::string::npos);
}

TEST_CASE("--sink wait-replicas and wait-timeout parse for both Redis forms") {
    auto single = parse_sink("redis://h:1?wait-replicas=2&wait-timeout=250");
    CHECK(single.redis.wait_replicas == 2);
    CHECK(single.redis.wait_timeout == std::chrono::milliseconds(250));
    auto cluster = parse_sink("redis-cluster://h:1,h:2?wait-replicas=1");
    CHECK(cluster.cluster.wait_replicas == 1);
    CHECK(cluster.cluster.wait_timeout == std::chrono::milliseconds(1000));
    CHECK(cluster.cluster.seeds[1].wait_replicas == 1);
    CHECK(parse_sink("redis://h").redis.wait_replicas == 0);
    CHECK(error_of([] { parse_sink("redis://h?wait-replicas=x"); }).find("wait-replicas must be") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis://h?wait-timeout=0"); }).find("wait-timeout must be") != std::string::npos);
    CHECK(error_of([] { parse_sink("redis://h?wat=1"); }).find("known: tombstone-ttl, wait-replicas, wait-timeout") !=
          std::string::npos);
}
