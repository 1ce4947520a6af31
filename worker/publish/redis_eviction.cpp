// Whether a Redis may evict what docsync retains: the eviction policy, read and judged.
#include "publish/redis_eviction.hpp"

#include <charconv>

#include "common/error.hpp"
#include "publish/redis_script.hpp"

namespace docsync::publish {

EvictionPolicy read_eviction_policy(const RedisCommand& command) {
    Reply reply = command({"CONFIG", "GET", "maxmemory-policy"});
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[1]->type == REDIS_REPLY_STRING)
        return {reply_text(reply->element[1]), "CONFIG GET maxmemory-policy"};
    // CONFIG renamed away, refused by an ACL, or answered in a form we do not know: INFO says it too.
    return {info_field(command({"INFO", "memory"}), "maxmemory_policy"), "INFO memory"};
}

std::optional<std::string> eviction_refusal(const EvictionPolicy& policy, const std::string& where) {
    if (policy.policy.rfind("allkeys-", 0) != 0) return std::nullopt;
    return where + " evicts keys under memory pressure (maxmemory-policy " + policy.policy + ", from " +
           policy.source + "): it would drop retained docs while they count as published; set maxmemory-policy noeviction "
           "(or a volatile-* policy, which only evicts tombstones) in its configuration, e.g. "
           "CONFIG SET maxmemory-policy noeviction, or in the managed service's parameter group";
}

long long evicted_keys(const RedisCommand& command) {
    try {
        std::string text = info_field(command({"INFO", "stats"}), "evicted_keys");
        long long n = -1;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        return ec == std::errc() && end == text.data() + text.size() ? n : -1;
    } catch (const Error&) {
        return -1;
    }
}

}  // namespace docsync::publish
