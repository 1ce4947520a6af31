// Fuzz target: what a Redis Cluster node answers the cluster client with. The input is RESP read by
// hiredis's reader (a CLUSTER SHARDS or CLUSTER SLOTS reply) and, as text, an error reply that may
// be a MOVED or ASK redirect. No parser may crash or read past its input; a map it accepts points
// each slot at one of its nodes, and a redirect it accepts names a slot and a port in range.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "redis/cluster_map.hpp"

namespace {

// hiredis 0.14 (Debian 12) allocates an array of the announced size up front and has no cap on it
// (later versions have maxelements): `*999999999` would make the reader, not the parsers under test,
// run out of memory. Inputs announcing more than 99 999 elements or bytes are skipped.
bool announces_huge(std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '*' && text[i] != '$' && text[i] != '%' && text[i] != '~' && text[i] != '>') continue;
        std::size_t digits = 0;
        while (i + 1 + digits < text.size() && text[i + 1 + digits] >= '0' && text[i + 1 + digits] <= '9') ++digits;
        if (digits > 5) return true;
    }
    return false;
}

void check_map(const std::optional<docsync::publish::SlotMap>& map) {
    if (!map) return;
    for (auto owner : map->owner)
        if (owner >= static_cast<int>(map->nodes.size())) std::abort();
    for (const auto& node : map->nodes)
        if (node.port < 1 || node.port > 65535 || node.id.empty()) std::abort();
    for (const auto* master : map->masters())
        if (!master->master || map->first_slot_of(*master) < 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto redirect = docsync::publish::parse_redirect(text)) {
        if (redirect->slot < 0 || redirect->slot >= docsync::publish::kClusterSlots) std::abort();
        if (redirect->port < 1 || redirect->port > 65535) std::abort();
    }
    (void)docsync::publish::key_slot(text);
    if (announces_huge(text)) return 0;
    redisReader* reader = redisReaderCreate();
    if (reader == nullptr) return 0;
    if (redisReaderFeed(reader, text.data(), text.size()) == REDIS_OK) {
        void* raw = nullptr;
        if (redisReaderGetReply(reader, &raw) == REDIS_OK && raw != nullptr) {
            auto* reply = static_cast<redisReply*>(raw);
            check_map(docsync::publish::parse_cluster_shards(reply, "origin"));
            check_map(docsync::publish::parse_cluster_slots(reply, "origin"));
            freeReplyObject(reply);
        }
    }
    redisReaderFree(reader);
    return 0;
}
