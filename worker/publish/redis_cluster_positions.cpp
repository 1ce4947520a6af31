// The Redis Cluster sink's positions (docsync:max_version:{TAG} on every master) and its break watch
// (an idle connection to every master): publish/redis_cluster_sink.hpp describes both.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
#include <thread>
#include <tuple>

#include "common/log.hpp"
#include "publish/redis_cluster_sink.hpp"

namespace docsync::publish {

namespace {

// Raises KEYS[1] (GENERATION/HI/LO, the LSN's halves in hex) to ARGV[1..3], never lowers it.
constexpr const char* kRaiseVersionScript =
    "local new = {tonumber(ARGV[1]), tonumber(ARGV[2], 16), tonumber(ARGV[3], 16)}\n"
    "local held = redis.call('GET', KEYS[1])\n"
    "if held then\n"
    "  local g, h, l = string.match(held, '^(%d+)/(%x+)/(%x+)$')\n"
    "  if g then\n"
    "    local old = {tonumber(g), tonumber(h, 16), tonumber(l, 16)}\n"
    "    for i = 1, 3 do\n"
    "      if new[i] > old[i] then break end\n"
    "      if new[i] < old[i] then return 0 end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "redis.call('SET', KEYS[1], ARGV[1] .. '/' .. ARGV[2] .. '/' .. ARGV[3])\n"
    "return 1\n";

// docsync:max_version:{TAG}, TAG putting it on `slot`.
std::string position_key(int slot) {
    std::string key = "docsync:max_version:{";
    key += slot_tag(slot);
    key += '}';
    return key;
}

std::optional<DocVersion> parse_position(const Reply& reply) {
    if (!reply || reply->type != REDIS_REPLY_STRING) return std::nullopt;
    std::string text = reply_text(reply.get());
    unsigned long long generation = 0;
    unsigned hi = 0, lo = 0;
    char end = 0;
    if (std::sscanf(text.c_str(), "%llu/%X/%X%c", &generation, &hi, &lo, &end) != 3) return std::nullopt;
    return DocVersion{generation, (static_cast<Lsn>(hi) << 32) | lo};
}

bool older(const DocVersion& a, const DocVersion& b) {
    return std::tie(a.generation, a.lsn) < std::tie(b.generation, b.lsn);
}

}  // namespace

std::vector<std::string_view> RedisClusterSink::PositionRaise::args() const {
    return {"EVAL", kRaiseVersionScript, "1", key, generation, hi, lo};
}

std::vector<RedisClusterSink::PositionRaise> RedisClusterSink::position_raises(
    const std::vector<Publication>& docs, const std::vector<ScriptCall>& calls) const {
    auto map = client_.map();
    std::map<int, std::size_t> by_slot;  // a master's first slot → its raise
    std::vector<PositionRaise> raises;
    if (!map) return raises;
    for (std::size_t i = 0; i < docs.size(); ++i) {
        const ClusterNode* master = map->master_of(key_slot(calls[i].key));
        if (master == nullptr) continue;  // no master: the doc fails on its own
        int slot = map->first_slot_of(*master);
        auto [it, added] = by_slot.emplace(slot, raises.size());
        if (added) raises.push_back({position_key(slot), {}, {}, {}, {}});
        PositionRaise& r = raises[it->second];
        r.docs.push_back(i);
        const PositionRaise& top = r;
        bool higher = top.generation.empty();
        if (!higher) {
            const DocVersion& now = docs[i].version;
            const DocVersion& best = docs[top.docs.front()].version;  // the highest so far leads
            higher = older(best, now);
        }
        if (higher) {
            r.generation = calls[i].generation;
            r.hi = calls[i].hi;
            r.lo = calls[i].lo;
            std::swap(r.docs.front(), r.docs.back());
        }
    }
    return raises;
}

DocVersion RedisClusterSink::max_version() {
    std::uint64_t generation = max_generation();
    auto map = client_.map();
    std::optional<DocVersion> best;
    bool any = false;
    for (const ClusterNode* master : map->masters()) {
        Reply reply;
        try {
            reply = client_.on_node(*master, {"GET", position_key(map->first_slot_of(*master))});
        } catch (const Error&) {
            continue;  // down: lost_docs() looks at it when it is back
        }
        any = true;
        auto held = parse_position(reply);
        if (held && (!best || older(*best, *held))) best = held;
    }
    if (!any && !map->masters().empty())
        throw Error(where_ + ": no master answers GET docsync:max_version", {}, true);
    if (!best || best->generation < generation) return {generation, 0};
    return *best;
}

bool RedisClusterSink::wait_for_break(std::chrono::milliseconds timeout) {
    auto map = watch_.map();
    bool broke = false;
    std::string why;
    std::set<std::string> masters;
    for (const ClusterNode* m : map->masters()) {
        masters.insert(m->id);
        Watched& w = watched_[m->id];
        if (w.conn && w.endpoint == m->endpoint()) continue;
        w.conn.reset();
        w.endpoint = m->endpoint();
        RedisAddress node = client_.address().seeds.front();
        node.host = m->host;
        node.port = m->port;
        node.db = 0;
        try {
            w.conn = RedisConnection::connect(node, options_.connect_timeout, options_.command_timeout);
            // After the first round, a new connection is a master back from an outage or a new one
            // (a promoted replica): what it holds is unknown until lost_docs() has looked.
            if (watched_once_ && !broke) broke = true, why = "master " + w.endpoint + " answers again or is new";
        } catch (const Error& e) {
            if (!broke) broke = true, why = "master " + w.endpoint + " cannot be reached (" + e.what() + ")";
        }
    }
    for (auto it = watched_.begin(); it != watched_.end();) it = masters.count(it->first) ? std::next(it) : watched_.erase(it);
    watched_once_ = true;
    if (broke) {
        breaks_.fetch_add(1);
        log_debug("publish", where_ + ": " + why);
        // A master that cannot be reached is asked again after `timeout`, as a single Redis is.
        if (why.find("cannot be reached") != std::string::npos) {
            std::this_thread::sleep_for(timeout);
            return false;
        }
        return true;
    }
    // Nothing is ever sent on these connections, so anything to read is their end.
    std::vector<pollfd> fds;
    std::vector<std::string> ids;
    for (auto& [id, w] : watched_)
        if (w.conn) {
            fds.push_back({w.conn->context()->fd, POLLIN, 0});
            ids.push_back(id);
        }
    if (fds.empty()) {
        std::this_thread::sleep_for(timeout);
        return false;
    }
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (rc == 0 || (rc < 0 && errno == EINTR)) return false;
    for (std::size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0) {
            log_debug("publish", where_ + ": the connection to master " + watched_[ids[i]].endpoint + " closed");
            watched_[ids[i]].conn.reset();
        }
    breaks_.fetch_add(1);
    return true;
}

}  // namespace docsync::publish
