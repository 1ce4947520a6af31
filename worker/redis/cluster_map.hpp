#pragma once
// Redis Cluster's routing, without I/O: the hash slot of a key, the slot map a node describes, and
// the redirects a node answers with. redis/cluster_client.hpp does the talking.
//
//   - key_slot: CRC16 (XMODEM: polynomial 0x1021, initial 0) of the key modulo 16384, where a key
//     holding `{…}` with something between the first `{` and the next `}` hashes only that part
//     (its hash tag), as the Redis Cluster specification says. `{db:order:42}` and
//     `{db:order:42}:x` share a slot.
//   - parse_cluster_shards / parse_cluster_slots: the map from the reply of CLUSTER SHARDS (Redis 7)
//     or CLUSTER SLOTS (older), with each node's role, its master and its health. A node announced
//     with an empty or unknown ("?") endpoint is reached at the address the reply came from.
//   - parse_redirect: `MOVED 3999 127.0.0.1:6381` and `ASK 3999 [::1]:6381` error replies.
// Every parser rejects a malformed reply with nullopt and never reads past what it was given: the
// replies come from the network (tests/fuzz/cluster_reply_fuzz.cpp).

#include <hiredis/hiredis.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace docsync::redis {

inline constexpr int kClusterSlots = 16384;

std::uint16_t crc16(std::string_view data);
int key_slot(std::string_view key);
// A hash tag that puts a key in `slot`: `"docsync:epoch:{" + slot_tag(s) + "}"` hashes to s.
const std::string& slot_tag(int slot);

struct ClusterNode {
    std::string id;  // the node ID; CLUSTER SLOTS of Redis < 4 gives none: then host:port
    std::string host;
    int port = 0;
    bool master = false;
    std::string master_id;  // of a replica: its master's ID
    bool healthy = true;    // CLUSTER SHARDS "health": online
    std::string endpoint() const;  // host:port
};

struct SlotMap {
    std::vector<ClusterNode> nodes;
    // The index in `nodes` of each slot's master, -1 for a slot no master serves.
    std::array<std::int16_t, kClusterSlots> owner;
    SlotMap() { owner.fill(-1); }

    const ClusterNode* master_of(int slot) const {
        return owner[static_cast<std::size_t>(slot)] < 0 ? nullptr : &nodes[static_cast<std::size_t>(owner[static_cast<std::size_t>(slot)])];
    }
    const ClusterNode* find(std::string_view id) const;
    // Masters that own at least one slot.
    std::vector<const ClusterNode*> masters() const;
    // The first slot `node` owns, -1 for none.
    int first_slot_of(const ClusterNode& node) const;
    std::size_t covered() const;  // slots with a master
};

// `origin_host`: the host the reply came from, for nodes announced without an endpoint.
std::optional<SlotMap> parse_cluster_shards(const redisReply* reply, std::string_view origin_host);
std::optional<SlotMap> parse_cluster_slots(const redisReply* reply, std::string_view origin_host);

struct Redirect {
    bool ask = false;  // ASK (one command, after ASKING) rather than MOVED (the slot moved for good)
    int slot = 0;
    std::string host;  // empty: the node that answered
    int port = 0;
};
std::optional<Redirect> parse_redirect(std::string_view error);

}  // namespace docsync::redis

// The publish sinks and the gateway name the client's parts publish::…, as before its move here.
namespace docsync::publish {
using namespace docsync::redis;
}
