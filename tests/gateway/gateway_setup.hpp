#pragma once
// What the gateway's test files share: a Redis with the real sink and a gateway over it, docs of
// a known shape and the readers of their fields.
#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include "gateway_client.hpp"
#include "redis/cluster_map.hpp"
#include "redis/cluster_client.hpp"
#include "publish/redis_cluster_sink.hpp"
#include "publish/redis_sink.hpp"
#include "redis_server.hpp"

using namespace docsync;
using namespace docsync::testing;
using namespace std::chrono_literals;

namespace docsync::testing {

inline const std::string kSecret = "0123456789abcdef0123456789abcdef-test-secret";

inline std::string doc_of(int n, std::size_t pad = 0) {
    return "{\"id\":42,\"n\":" + std::to_string(n) + ",\"pad\":\"" + std::string(pad, 'x') + "\"}";
}

// The "n" of an envelope (or of a WebSocket doc message).
inline int n_of(const std::string& json) {
    rapidjson::Document d;
    d.Parse(json.data(), json.size());
    REQUIRE_MESSAGE(d.IsObject(), json);
    REQUIRE(d.HasMember("doc"));
    if (d["doc"].IsNull()) return -1;
    return d["doc"]["n"].GetInt();
}

inline std::string error_of(const std::string& json) {
    rapidjson::Document d;
    d.Parse(json.data(), json.size());
    if (!d.IsObject() || !d.HasMember("error") || !d["error"].IsString()) return "";
    return d["error"].GetString();
}

struct Setup {
    RedisServer redis;
    publish::RedisSink sink{redis.address()};
    GatewayProcess gateway;
    explicit Setup(std::vector<std::string> extra = {}, std::vector<std::string> redis_args = {},
                   std::vector<std::string> environment = {})
        : redis(std::move(redis_args)), gateway(redis.url(), kSecret, std::move(extra), std::move(environment)) {}
    void publish(const std::string& channel, int n, std::uint64_t lsn, std::size_t pad = 0) {
        sink.publish(channel, doc_of(n, pad), DocVersion{1, lsn});
    }
};

inline std::string bearer(const std::string& token) { return "Bearer " + token; }

}  // namespace docsync::testing

