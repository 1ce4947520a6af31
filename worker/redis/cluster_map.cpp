// Hash slots, slot maps and redirects of Redis Cluster.
#include "redis/cluster_map.hpp"

#include <charconv>
#include <mutex>

namespace docsync::redis {

namespace {

constexpr std::array<std::uint16_t, 256> crc16_table() {
    std::array<std::uint16_t, 256> table{};
    for (unsigned i = 0; i < 256; ++i) {
        std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
        for (int bit = 0; bit < 8; ++bit)
            crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        table[i] = crc;
    }
    return table;
}
constexpr auto kCrc16 = crc16_table();

std::string_view text(const redisReply* r) {
    return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string_view(r->str, r->len)
                                                                                             : std::string_view{};
}

bool is_array(const redisReply* r) { return r != nullptr && r->type == REDIS_REPLY_ARRAY; }

std::optional<long long> integer(const redisReply* r) {
    if (r == nullptr) return std::nullopt;
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) {
        long long v = 0;
        auto [end, ec] = std::from_chars(r->str, r->str + r->len, v);
        if (ec == std::errc() && end == r->str + r->len) return v;
    }
    return std::nullopt;
}

bool valid_port(long long p) { return p >= 1 && p <= 65535; }

std::string chosen_host(std::string_view announced, std::string_view origin_host) {
    return announced.empty() || announced == "?" ? std::string(origin_host) : std::string(announced);
}

// Adds `node` (or finds it, by ID) and returns its index.
int add_node(SlotMap& map, ClusterNode node) {
    for (std::size_t i = 0; i < map.nodes.size(); ++i)
        if (map.nodes[i].id == node.id) {
            if (node.master) map.nodes[i].master = true, map.nodes[i].master_id.clear();
            return static_cast<int>(i);
        }
    map.nodes.push_back(std::move(node));
    return static_cast<int>(map.nodes.size() - 1);
}

bool assign(SlotMap& map, long long first, long long last, int owner) {
    if (first < 0 || last >= kClusterSlots || first > last) return false;
    for (long long s = first; s <= last; ++s) map.owner[static_cast<std::size_t>(s)] = static_cast<std::int16_t>(owner);
    return true;
}

}  // namespace

std::uint16_t crc16(std::string_view data) {
    std::uint16_t crc = 0;
    for (unsigned char c : data) crc = static_cast<std::uint16_t>((crc << 8) ^ kCrc16[((crc >> 8) ^ c) & 0xFF]);
    return crc;
}

int key_slot(std::string_view key) {
    if (auto open = key.find('{'); open != std::string_view::npos) {
        auto close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
    }
    return crc16(key) & (kClusterSlots - 1);
}

const std::string& slot_tag(int slot) {
    static std::once_flag once;
    static std::vector<std::string> tags;
    std::call_once(once, [] {
        tags.resize(kClusterSlots);
        std::size_t left = kClusterSlots;
        for (unsigned i = 0; left > 0; ++i) {
            std::string tag = std::to_string(i);
            auto& slot_of = tags[static_cast<std::size_t>(key_slot(tag))];
            if (slot_of.empty()) slot_of = std::move(tag), --left;
        }
    });
    return tags[static_cast<std::size_t>(slot & (kClusterSlots - 1))];
}

std::string ClusterNode::endpoint() const {
    return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                               : host + ":" + std::to_string(port);
}

const ClusterNode* SlotMap::find(std::string_view id) const {
    for (const auto& n : nodes)
        if (n.id == id) return &n;
    return nullptr;
}

std::vector<const ClusterNode*> SlotMap::masters() const {
    std::vector<bool> owns(nodes.size(), false);
    for (auto o : owner)
        if (o >= 0) owns[static_cast<std::size_t>(o)] = true;
    std::vector<const ClusterNode*> out;
    for (std::size_t i = 0; i < nodes.size(); ++i)
        if (owns[i]) out.push_back(&nodes[i]);
    return out;
}

int SlotMap::first_slot_of(const ClusterNode& node) const {
    for (int s = 0; s < kClusterSlots; ++s)
        if (const ClusterNode* m = master_of(s); m != nullptr && m->id == node.id) return s;
    return -1;
}

std::size_t SlotMap::covered() const {
    std::size_t n = 0;
    for (auto o : owner) n += o >= 0;
    return n;
}

// CLUSTER SHARDS: [ ["slots", [first, last, …], "nodes", [ [key, value, …], … ]], … ].
std::optional<SlotMap> parse_cluster_shards(const redisReply* reply, std::string_view origin_host) {
    if (!is_array(reply)) return std::nullopt;
    SlotMap map;
    for (std::size_t s = 0; s < reply->elements; ++s) {
        const redisReply* shard = reply->element[s];
        if (!is_array(shard) || shard->elements % 2 != 0) return std::nullopt;
        const redisReply* slots = nullptr;
        const redisReply* nodes = nullptr;
        for (std::size_t i = 0; i + 1 < shard->elements; i += 2) {
            if (text(shard->element[i]) == "slots") slots = shard->element[i + 1];
            if (text(shard->element[i]) == "nodes") nodes = shard->element[i + 1];
        }
        if (!is_array(slots) || !is_array(nodes) || slots->elements % 2 != 0) return std::nullopt;
        std::vector<ClusterNode> members;
        for (std::size_t n = 0; n < nodes->elements; ++n) {
            const redisReply* fields = nodes->element[n];
            if (!is_array(fields) || fields->elements % 2 != 0) return std::nullopt;
            ClusterNode node;
            std::string_view ip, endpoint;
            long long port = 0;
            for (std::size_t i = 0; i + 1 < fields->elements; i += 2) {
                std::string_view key = text(fields->element[i]);
                const redisReply* value = fields->element[i + 1];
                if (key == "id") node.id = std::string(text(value));
                else if (key == "port") port = integer(value).value_or(0);
                else if (key == "ip") ip = text(value);
                else if (key == "endpoint") endpoint = text(value);
                else if (key == "role") node.master = text(value) == "master";
                else if (key == "health") node.healthy = text(value) == "online";
            }
            if (node.id.empty() || !valid_port(port)) return std::nullopt;
            node.port = static_cast<int>(port);
            node.host = chosen_host(endpoint.empty() || endpoint == "?" ? ip : endpoint, origin_host);
            members.push_back(std::move(node));
        }
        std::string master_id;
        for (const auto& m : members)
            if (m.master) master_id = m.id;
        int master = -1;
        for (auto& m : members) {
            if (!m.master) m.master_id = master_id;
            int index = add_node(map, m);
            if (m.master) master = index;
        }
        if (slots->elements > 0 && master < 0) return std::nullopt;  // slots, and nobody to serve them
        for (std::size_t i = 0; i + 1 < slots->elements; i += 2) {
            auto first = integer(slots->element[i]);
            auto last = integer(slots->element[i + 1]);
            if (!first || !last || !assign(map, *first, *last, master)) return std::nullopt;
        }
    }
    return map;
}

// CLUSTER SLOTS: [ [first, last, [host, port, id, …], [replica host, port, id, …], …], … ].
std::optional<SlotMap> parse_cluster_slots(const redisReply* reply, std::string_view origin_host) {
    if (!is_array(reply)) return std::nullopt;
    SlotMap map;
    for (std::size_t r = 0; r < reply->elements; ++r) {
        const redisReply* range = reply->element[r];
        if (!is_array(range) || range->elements < 3) return std::nullopt;
        auto first = integer(range->element[0]);
        auto last = integer(range->element[1]);
        if (!first || !last) return std::nullopt;
        int master = -1;
        std::string master_id;
        for (std::size_t i = 2; i < range->elements; ++i) {
            const redisReply* entry = range->element[i];
            if (!is_array(entry) || entry->elements < 2) return std::nullopt;
            auto port = integer(entry->element[1]);
            if (!port || !valid_port(*port) || entry->element[0]->type != REDIS_REPLY_STRING) return std::nullopt;
            ClusterNode node;
            node.host = chosen_host(text(entry->element[0]), origin_host);
            node.port = static_cast<int>(*port);
            node.id = entry->elements >= 3 && !text(entry->element[2]).empty() ? std::string(text(entry->element[2]))
                                                                              : node.endpoint();
            node.master = i == 2;
            if (node.master) master_id = node.id;
            else node.master_id = master_id;
            int index = add_node(map, std::move(node));
            if (i == 2) master = index;
        }
        if (!assign(map, *first, *last, master)) return std::nullopt;
    }
    return map;
}

std::optional<Redirect> parse_redirect(std::string_view error) {
    Redirect r;
    if (error.substr(0, 6) == "MOVED ") {
        error.remove_prefix(6);
    } else if (error.substr(0, 4) == "ASK ") {
        r.ask = true;
        error.remove_prefix(4);
    } else {
        return std::nullopt;
    }
    auto space = error.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    std::string_view slot = error.substr(0, space), where = error.substr(space + 1);
    auto [end, ec] = std::from_chars(slot.data(), slot.data() + slot.size(), r.slot);
    if (ec != std::errc() || end != slot.data() + slot.size() || r.slot < 0 || r.slot >= kClusterSlots)
        return std::nullopt;
    auto colon = where.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    std::string_view host = where.substr(0, colon), port = where.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    auto [pend, pec] = std::from_chars(port.data(), port.data() + port.size(), r.port);
    if (pec != std::errc() || pend != port.data() + port.size() || !valid_port(r.port)) return std::nullopt;
    r.host = std::string(host);
    return r;
}

}  // namespace docsync::redis
