// The eviction policy a Redis sink refuses (publish/redis_eviction.hpp), read through a fake Redis:
// CONFIG GET, and INFO memory where CONFIG is renamed away or refused.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "publish/redis_eviction.hpp"
#include "resp_text.hpp"

using namespace docsync::publish;
using docsync::test::bulk;
using docsync::test::read_resp;

namespace {

// A Redis that answers CONFIG GET with `config` (RESP) and INFO memory with `info`.
RedisCommand fake(std::string config, std::string info, std::vector<std::string>* asked = nullptr) {
    return [config, info, asked](const std::vector<std::string_view>& args) {
        if (asked) asked->emplace_back(args.front());
        return read_resp(args.front() == "CONFIG" ? config : bulk(info));
    };
}

}  // namespace

TEST_CASE("an allkeys-* policy is refused, naming the setting and the fix; noeviction and volatile-* are taken") {
    for (const char* policy : {"allkeys-lru", "allkeys-lfu", "allkeys-random"}) {
        auto p = read_eviction_policy(fake("*2\r\n" + bulk("maxmemory-policy") + bulk(policy), ""));
        CHECK(p.policy == policy);
        auto refusal = eviction_refusal(p, "Redis at h:1/0");
        REQUIRE(refusal);
        CHECK(refusal->find(std::string("maxmemory-policy ") + policy) != std::string::npos);
        CHECK(refusal->find("maxmemory-policy noeviction") != std::string::npos);
    }
    for (const char* policy : {"noeviction", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"})
        CHECK_FALSE(eviction_refusal(read_eviction_policy(fake("*2\r\n" + bulk("maxmemory-policy") + bulk(policy), "")),
                                     "Redis"));
}

TEST_CASE("with CONFIG renamed away or refused, the policy comes from INFO memory") {
    const std::string info = "# Memory\r\nused_memory:1000\r\nmaxmemory:4194304\r\nmaxmemory_policy:allkeys-lru\r\n";
    for (const std::string& config : {std::string("-ERR unknown command 'CONFIG'\r\n"),
                                      std::string("-NOPERM this user has no permissions to run the 'config' command\r\n")}) {
        std::vector<std::string> asked;
        auto p = read_eviction_policy(fake(config, info, &asked));
        CHECK(p.policy == "allkeys-lru");
        CHECK(p.source == "INFO memory");
        CHECK(asked == std::vector<std::string>{"CONFIG", "INFO"});
        REQUIRE(eviction_refusal(p, "Redis"));
        CHECK(eviction_refusal(p, "Redis")->find("from INFO memory") != std::string::npos);
    }
    // Neither says: nothing to refuse (the sink warns that it could not tell).
    auto p = read_eviction_policy(fake("-ERR unknown command 'CONFIG'\r\n", "# Memory\r\n"));
    CHECK(p.policy.empty());
    CHECK_FALSE(eviction_refusal(p, "Redis"));
}
