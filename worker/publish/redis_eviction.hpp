#pragma once
// Whether a Redis may evict what docsync retains (docs/design.md, "sink checks").
//
// A Redis run as a cache (`maxmemory` with an `allkeys-*` policy, usual on managed services) drops
// retained docs, the marker key and docsync:max_version on its own: docs would be missing while the
// slot, docsync.wait_published and the watermark call them published. Both Redis sinks read the
// policy at start, on every new connection and with every lost-docs check, and refuse one that may
// evict keys without an expiry: `noeviction` and the `volatile-*` policies are taken (the only keys
// docsync gives an expiry are tombstones, whose early loss is their expiry come early: a missing key
// already reads as "no doc"), `allkeys-*` is refused whatever `maxmemory` is now, since a
// `CONFIG SET maxmemory` starts evicting at once.
//
// The policy is read with `CONFIG GET maxmemory-policy`; where CONFIG is renamed or not allowed (as
// managed services do), from `INFO memory`'s `maxmemory_policy`.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"

namespace docsync::publish {

using RedisCommand = std::function<Reply(const std::vector<std::string_view>&)>;

struct EvictionPolicy {
    std::string policy;  // e.g. "noeviction", "allkeys-lru"; empty when Redis told neither way
    std::string source;  // "CONFIG GET maxmemory-policy" or "INFO memory", for messages
};

// Reads the policy through `command`. Throws docsync::Error (transient) when the connection fails.
EvictionPolicy read_eviction_policy(const RedisCommand& command);

// Why `policy` may not hold docsync's keys (naming the setting and the fix, `where` the server), or
// nullopt when it is safe.
std::optional<std::string> eviction_refusal(const EvictionPolicy& policy, const std::string& where);

// The evicted_keys counter of `INFO stats`, or -1 when it cannot be read; for the lost-docs message.
long long evicted_keys(const RedisCommand& command);

}  // namespace docsync::publish
