// The Redis Cluster sink: the doc script per slot, routed over the cluster's masters.
#include "publish/redis_cluster_sink.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "common/log.hpp"
#include "envelope/envelope.hpp"
#include "publish/redis_eviction.hpp"
#include "publish/redis_script.hpp"

namespace docsync::publish {

namespace {

constexpr ScriptKind kKind = ScriptKind::Cluster;

// Raises KEYS[1] to ARGV[1], never lowers it.
constexpr const char* kRaiseScript =
    "local old = tonumber(redis.call('GET', KEYS[1]) or '0') or 0\n"
    "if tonumber(ARGV[1]) > old then redis.call('SET', KEYS[1], ARGV[1]) end\n"
    "return 1\n";

ClusterOptions cluster_options(const RedisSinkOptions& o) {
    ClusterOptions c;
    c.connect_timeout = o.connect_timeout;
    c.command_timeout = o.command_timeout;
    c.initial_backoff = o.initial_backoff;
    c.max_backoff = o.max_backoff;
    return c;
}

// docsync:epoch:{TAG}, TAG putting it on `slot` (appended: GCC 12 warns falsely on a chain of +).
std::string marker_key(int slot) {
    std::string key = "docsync:epoch:{";
    key += slot_tag(slot);
    key += '}';
    return key;
}

// The error of an outcome that did not come back as an answer.
std::optional<Error> outcome_error(const Outcome& o, const std::string& what) {
    if (o.error) return o.error;
    if (o.reply->type == REDIS_REPLY_ERROR) return Error(what + ": " + reply_text(o.reply.get()), {}, true);
    return std::nullopt;
}

}  // namespace

const char* RedisClusterSink::script() { return doc_script(kKind); }

RedisClusterSink::RedisClusterSink(RedisClusterAddress address, RedisSinkOptions options)
    : client_(address, cluster_options(options)),
      watch_(address, cluster_options(options)),
      where_(address.display()),
      options_(options) {
    auto map = client_.map();
    std::string unreachable;
    for (const ClusterNode* master : map->masters()) {
        Reply info;
        try {
            info = client_.on_node(*master, {"INFO", "server"});
        } catch (const Error&) {
            // A master down (failing over) must not keep the worker from starting: its docs wait.
            unreachable += (unreachable.empty() ? "" : ", ") + master->endpoint();
            continue;
        }
        if (info->type == REDIS_REPLY_ERROR && reply_text(info.get()).rfind("NOAUTH", 0) == 0)
            throw Error("--sink: Redis Cluster node " + master->endpoint() + " requires a password (" +
                            reply_text(info.get()) +
                            "): give it in --sink redis-cluster://:PASSWORD@HOST:PORT (USER:PASSWORD@ for an ACL user)",
                        {}, true);
        std::string version = info_field(info, "redis_version");
        int major = 0;
        std::from_chars(version.data(), version.data() + version.size(), major);
        if (major < 7)
            throw Error("--sink: Redis Cluster node " + master->endpoint() + " runs Redis " +
                        (version.empty() ? std::string("of an unknown version") : version) +
                        "; the cluster sink needs Redis 7 or newer on every node (sharded pub/sub, SPUBLISH)");
        Reply loaded = client_.on_node(*master, {"SCRIPT", "LOAD", script()});
        if (loaded->type != REDIS_REPLY_STRING)
            throw Error("Redis Cluster node " + master->endpoint() + " refused the docsync script: " +
                        reply_text(loaded.get()) + "; docsync needs Lua scripting (EVAL) allowed");
        script_sha_ = reply_text(loaded.get());
        auto policy = read_eviction_policy([&](const auto& args) { return client_.on_node(*master, args); });
        if (auto refusal = eviction_refusal(policy, "Redis Cluster node " + master->endpoint()))
            throw Error("--sink: " + *refusal + " (on every master)");
        if (policy.policy.empty())
            log_warning("publish", "Redis Cluster node " + master->endpoint() +
                                       " tells its maxmemory-policy neither through CONFIG GET nor INFO memory: make "
                                       "sure it is noeviction (an allkeys-* policy drops retained docs)");
    }
    if (script_sha_.empty())
        throw Error("--sink: " + where_ +
                        (map->masters().empty() ? std::string(" has no master serving slots yet: finish creating the "
                                                              "cluster (redis-cli --cluster create) and start the worker "
                                                              "again")
                                                : " answers, but none of its masters (" + unreachable +
                                                      ") does: start them, or wait for their replicas' promotion"),
                    {}, true);
    if (!unreachable.empty())
        log_warning("publish", where_ + ": masters " + unreachable +
                                   " are unreachable at start; the docs of their slots are retried and hold the slot "
                                   "until they or promoted replicas answer");
    if (map->covered() < static_cast<std::size_t>(kClusterSlots))
        log_warning("publish", where_ + " serves " + std::to_string(map->covered()) +
                                   " of 16384 hash slots: docs hashing to the others hold the slot until they are "
                                   "assigned");
}

void RedisClusterSink::describe_keys(const std::string& key_types_json) {
    {
        std::lock_guard lock(key_types_mutex_);
        key_types_ = key_types_json;
    }
    Outcome o = client_.run(KeyedCommand{kKeyTypesKey, {"SET", kKeyTypesKey, key_types_json}, {}});
    if (auto e = outcome_error(o, where_ + " did not take " + std::string(kKeyTypesKey)))
        log_warning("publish", std::string(e->what()) + ": written again once the cluster takes it");
}

void RedisClusterSink::keep_key_types() {
    std::optional<std::string> want;
    {
        std::lock_guard lock(key_types_mutex_);
        want = key_types_;
    }
    if (!want) return;
    Outcome held = client_.run(KeyedCommand{kKeyTypesKey, {"GET", kKeyTypesKey}, {}});
    if (outcome_error(held, where_)) return;  // unreachable: tried again next second
    if (held.reply && held.reply->type == REDIS_REPLY_STRING &&
        std::string_view(held.reply->str, held.reply->len) == *want)
        return;
    Outcome o = client_.run(KeyedCommand{kKeyTypesKey, {"SET", kKeyTypesKey, *want}, {}});
    if (!outcome_error(o, where_)) log_info("publish", where_ + " holds " + std::string(kKeyTypesKey) + " again");
}

void RedisClusterSink::expire_orphans(const std::vector<std::string>& channels) {
    std::string ttl_ms = std::to_string(std::chrono::milliseconds(client_.address().tombstone_ttl).count());
    for (const auto& channel : channels) {
        std::string key = cluster_key(channel);
        Outcome o = client_.run(KeyedCommand{key, {"EVAL", kExpireOrphanScript, "1", key, ttl_ms}, {}});
        if (auto e = outcome_error(o, where_ + " did not take the expiry of " + channel)) {
            log_warning("publish", std::string(e->what()) + " (a channel that names no doc)");
            return;
        }
    }
}

std::optional<Error> RedisClusterSink::raise_max_generation(std::uint64_t generation) {
    std::string value = std::to_string(generation);
    Outcome o = client_.run(KeyedCommand{kMaxGenerationKey, {"EVAL", kRaiseScript, "1", kMaxGenerationKey, value}, {}, true});
    if (auto e = outcome_error(o, where_ + " refused to raise " + std::string(kMaxGenerationKey))) return e;
    std::uint64_t seen = max_generation_raised_.load();
    while (seen < generation && !max_generation_raised_.compare_exchange_weak(seen, generation)) {
    }
    return std::nullopt;
}

void RedisClusterSink::publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) {
    auto out = publish_many({Publication{&channel, &doc, version}});
    if (out.front()) throw *out.front();
}

std::vector<std::optional<Error>> RedisClusterSink::publish_many(const std::vector<Publication>& docs) {
    {
        std::lock_guard lock(eviction_mutex_);
        if (evicting_) return std::vector<std::optional<Error>>(docs.size(), Error(*evicting_, {}, true));
    }
    std::vector<std::optional<Error>> out(docs.size());
    std::uint64_t top = 0;
    for (const auto& d : docs) top = std::max(top, d.version.generation);
    // Write-ahead: the floor of the next generation covers this one before any of its docs is retained.
    if (top > max_generation_raised_.load()) {
        if (auto e = raise_max_generation(top)) {
            for (auto& o : out) o = e;
            return out;
        }
    }
    std::vector<ScriptCall> calls;
    std::vector<PatchPlan> plans;
    calls.reserve(docs.size());
    Patcher* patcher = options_.patcher.get();
    for (const auto& d : docs) {
        if (!patcher) {
            calls.push_back(script_call(cluster_key(*d.channel), *d.channel, *d.doc, d.version, client_.address().tombstone_ttl));
            continue;
        }
        plans.push_back(patcher->plan(*d.channel, *d.doc, d.version));
        calls.push_back(script_call(cluster_key(*d.channel), std::move(plans.back()), client_.address().tombstone_ttl,
                                    !d.doc->has_value()));
    }
    // Write-ahead positions: each master's docsync:max_version:{TAG} is raised to the highest version
    // of its docs in this batch, first in its pipelined group (publish order is kept per node).
    auto raises = position_raises(docs, calls);
    std::vector<KeyedCommand> commands;
    commands.reserve(raises.size() + calls.size());
    for (const auto& r : raises) commands.push_back({r.key, r.args(), {}, false});
    for (const auto& call : calls)
        commands.push_back({call.key, call.args(kKind, script_sha_, false), call.args(kKind, script(), true), true});
    auto outcomes = client_.run(commands);
    for (std::size_t i = 0; i < calls.size(); ++i) {
        const Outcome& o = outcomes[raises.size() + i];
        out[i] = o.error ? o.error : judge_script_reply(o.reply, where_, *docs[i].channel);
    }
    // A doc whose master did not take its position first is not published: the position may be below it.
    for (std::size_t r = 0; r < raises.size(); ++r)
        if (auto e = outcome_error(outcomes[r], where_ + " refused to raise " + raises[r].key))
            for (std::size_t i : raises[r].docs)
                if (!out[i]) out[i] = e;
    // What became of each doc, for the cache: a stale refusal changes nothing, a failure drops the entry.
    if (patcher)
        for (std::size_t i = 0; i < docs.size(); ++i) {
            std::optional<PatchOutcome> outcome;
            if (!out[i]) outcome = script_outcome(outcomes[raises.size() + i].reply);
            patcher->record(*docs[i].channel, plans[i], outcome.value_or(PatchOutcome::Failed));
        }
    return out;
}

std::vector<std::string> RedisClusterSink::retained_channels() {
    client_.refresh(false);
    std::vector<std::string> channels;
    for (const ClusterNode* master : client_.map()->masters()) {
        std::string cursor = "0";
        do {
            Reply reply = client_.on_node(*master, {"SCAN", cursor, "MATCH", "{db:*", "COUNT", "1000"});
            if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
                reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_ARRAY)
                throw Error("Redis Cluster node " + master->endpoint() + " answered SCAN with " + reply_text(reply.get()),
                            {}, true);
            cursor = reply_text(reply->element[0]);
            const redisReply* keys = reply->element[1];
            for (std::size_t i = 0; i < keys->elements; ++i)
                if (keys->element[i]->type == REDIS_REPLY_STRING)
                    channels.emplace_back(channel_of_cluster_key(reply_text(keys->element[i])));
        } while (cursor != "0");
    }
    // SCAN may return a key more than once, and a key being migrated is on two masters.
    std::sort(channels.begin(), channels.end());
    channels.erase(std::unique(channels.begin(), channels.end()), channels.end());
    return channels;
}

std::uint64_t RedisClusterSink::max_generation() {
    Outcome o = client_.run(KeyedCommand{kMaxGenerationKey, {"GET", kMaxGenerationKey}, {}});
    if (auto e = outcome_error(o, where_ + " refused GET " + std::string(kMaxGenerationKey))) throw *e;
    if (o.reply->type == REDIS_REPLY_NIL) return 0;
    std::string text = reply_text(o.reply.get());
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (o.reply->type != REDIS_REPLY_STRING || ec != std::errc() || end != text.data() + text.size())
        throw Error(where_ + " holds '" + text + "' at " + std::string(kMaxGenerationKey) +
                    ", not a generation; delete that key (docsync rewrites it with the next doc)");
    std::uint64_t seen = max_generation_raised_.load();
    while (seen < value && !max_generation_raised_.compare_exchange_weak(seen, value)) {
    }
    return value;
}

std::optional<RetainedDoc> RedisClusterSink::read_back(const std::string& channel) {
    std::string key = cluster_key(channel);
    Outcome o = client_.run(KeyedCommand{key, {"GET", key}, {}});
    if (auto e = outcome_error(o, where_ + " refused GET " + key)) throw *e;
    if (o.reply->type == REDIS_REPLY_NIL) return std::nullopt;
    if (o.reply->type != REDIS_REPLY_STRING)
        throw Error(where_ + " answered GET " + key + " with " + reply_text(o.reply.get()), {}, true);
    auto doc = retained_doc(std::string_view(o.reply->str, o.reply->len), channel);
    if (!doc) throw Error(where_ + " holds at " + key + " something other than the docsync envelope of " + channel, {}, true);
    return doc;
}

std::optional<std::string> RedisClusterSink::lost_docs() {
    watch_.refresh(true);
    auto map = watch_.map();
    auto masters = map->masters();
    std::lock_guard lock(lost_mutex_);
    std::optional<std::string> lost;
    for (const ClusterNode* m : masters) {
        auto before = was_master_.find(m->id);
        if (!lost && before != was_master_.end() && !before->second)
            lost = where_ + ": replica " + m->endpoint() + " was promoted to master (failover); with asynchronous "
                   "replication it may lack the last docs its master took";
    }
    was_master_.clear();
    for (const auto& n : map->nodes) was_master_[n.id] = false;
    for (const ClusterNode* m : masters) was_master_[m->id] = true;

    std::set<std::string> current;
    const bool first_call = seen_.empty();
    std::string unreachable;             // masters that could not be checked
    std::string unmarked;                // masters whose marker this call had to write
    bool marked = false;                 // a master held its marker already
    std::optional<std::string> refusal;  // a master whose eviction policy may drop docs
    std::string policies;                // each master's, for the line that says it is fixed
    for (const ClusterNode* m : masters) {
        current.insert(m->id);
        Seen now;
        try {
            auto policy = read_eviction_policy([&](const auto& args) { return watch_.on_node(*m, args); });
            if (!refusal) refusal = eviction_refusal(policy, "Redis Cluster node " + m->endpoint());
            policies += (policies.empty() ? "" : ", ") + m->endpoint() + " " + policy.policy;
            now.run_id = info_field(watch_.on_node(*m, {"INFO", "server"}), "run_id");
            std::string replid = info_field(watch_.on_node(*m, {"INFO", "replication"}), "master_replid");
            now.marker_slot = map->first_slot_of(*m);
            auto marker = check_epoch_marker([&](const auto& args) { return watch_.on_node(*m, args); },
                                             marker_key(now.marker_slot), replid);
            now.token = marker.token;
            if (marker.created)
                unmarked += (unmarked.empty() ? "" : ", ") + m->endpoint();
            else
                marked = true;
            // A promoted replica holds its old master's marker under a new history: a failover, seen
            // even by a worker that was not running then. A marker slot that changed (a reshard moved
            // slots) says nothing.
            auto it = seen_.find(m->id);
            bool same_slot = it == seen_.end() || it->second.marker_slot == now.marker_slot;
            if (marker.other_history && same_slot && !lost)
                lost = where_ + ": master " + m->endpoint() + " has another replication history (master_replid " +
                       replid.substr(0, 8) + "…) than when docsync marked it (" + marker.replid.substr(0, 8) +
                       "…): a failover promoted it, or it restarted; docs it took may be lost";
        } catch (const Error&) {
            // unreachable: a failover may follow, which the next call sees; until then what it holds is unknown
            unreachable += (unreachable.empty() ? "" : ", ") + m->endpoint();
            continue;
        }
        auto it = seen_.find(m->id);
        if (it != seen_.end() && !lost) {
            const Seen& old = it->second;
            if (!old.run_id.empty() && !now.run_id.empty() && old.run_id != now.run_id)
                lost = where_ + ": master " + m->endpoint() + " restarted (run_id " + old.run_id.substr(0, 8) +
                       "… is now " + now.run_id.substr(0, 8) + "…): docs written just before may be lost";
            else if (old.marker_slot == now.marker_slot && !old.token.empty() && old.token != now.token)
                lost = where_ + ": master " + m->endpoint() + " no longer holds its marker key " +
                       marker_key(now.marker_slot) + " (FLUSHALL, or a restart without persistence): its docs may be gone";
        }
        seen_[m->id] = now;
    }
    for (auto it = seen_.begin(); it != seen_.end();) it = current.count(it->first) ? std::next(it) : seen_.erase(it);
    if (auto fixed = judge_eviction(refusal, policies)) lost = lost ? lost : fixed;
    // Seen by a worker that was not running: one master lost everything, marker included.
    if (!lost && first_call && marked && !unmarked.empty())
        lost = where_ + ": master " + unmarked + " held no marker key while the others held theirs: it restarted "
               "empty (or joined the cluster) while no worker watched; its docs may be gone";
    keep_key_types();
    // A master not checked may have lost docs: waits hold (the caller keeps the sink unchecked).
    if (!lost && !unreachable.empty())
        throw Error(where_ + ": masters " + unreachable + " could not be checked for lost docs", {}, true);
    return lost;
}

// Records what lost_docs found of the masters' eviction policies: a refusal is logged once per
// occurrence, refuses publishes and is thrown (transient: waits hold); the fix of one is returned as
// a loss (docs may have been evicted meanwhile).
std::optional<std::string> RedisClusterSink::judge_eviction(const std::optional<std::string>& refusal,
                                                            const std::string& policies) {
    std::lock_guard lock(eviction_mutex_);
    if (refusal) {
        if (!evicting_) log_error("publish", *refusal + "; docs are held until it is fixed on every master");
        evicting_ = where_ + " has a master that may evict docs (its maxmemory-policy): held until it is fixed";
        breaks_.fetch_add(1);
        throw Error(*refusal, {}, true);
    }
    if (!evicting_) return std::nullopt;
    evicting_.reset();
    log_warning("publish", where_ + " no longer evicts (maxmemory-policy: " + policies + ")");
    return where_ + " had a master with an evicting maxmemory-policy, now fixed: docs it held may have been evicted";
}

}  // namespace docsync::publish
