// The Redis sink: retain + publish in one Lua script, versioned tombstones, a reconnecting pool.
#include "publish/redis_sink.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "common/log.hpp"
#include "envelope/envelope.hpp"
#include "publish/redis_eviction.hpp"
#include "publish/redis_script.hpp"

namespace docsync::publish {

namespace {

// Set once, never changed by docsync: its loss means Redis lost its data (RedisSink::lost_docs).
constexpr std::string_view kEpochKey = "docsync:epoch";
constexpr ScriptKind kKind = ScriptKind::Single;

}  // namespace

const char* RedisSink::script() { return doc_script(kKind); }

RedisSink::RedisSink(RedisAddress address, RedisSinkOptions options)
    : address_(std::move(address)), where_("Redis at " + address_.display()), options_(options),
      backoff_(options.initial_backoff) {
    std::unique_ptr<RedisConnection> conn;
    try {
        conn = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
    } catch (const Error& e) {
        // The failing step's reply says which part of --sink to fix.
        std::string text = e.what();
        std::string fix = "start Redis there, or fix HOST:PORT in --sink redis://HOST:PORT[/DB]";
        if (text.find("AUTH failed") != std::string::npos) {
            if (text.find("without any password configured") != std::string::npos)
                fix = "this Redis has no password: remove the PASSWORD@ part from --sink";
            else
                fix = "Redis refused the user or password: fix [USER]:PASSWORD@ in --sink "
                      "redis://[USER]:PASSWORD@HOST:PORT";
        } else if (text.find("SELECT failed") != std::string::npos) {
            fix = "this Redis has no such database (see its `databases` setting): fix /DB in --sink";
        }
        throw Error("--sink: " + text + "; " + fix, {}, true);
    }
    auto reply = conn->command({"SCRIPT", "LOAD", script()});
    if (reply->type == REDIS_REPLY_ERROR && reply_text(reply.get()).rfind("NOAUTH", 0) == 0)
        throw Error("--sink: " + where_ + " requires a password (" + reply_text(reply.get()) +
                        "): give it in --sink redis://:PASSWORD@HOST:PORT (USER:PASSWORD@ for an ACL user)",
                    {}, true);
    if (reply->type != REDIS_REPLY_STRING)
        throw Error(where_ + " refused the docsync script: " + reply_text(reply.get()) +
                    "; docsync needs Redis 5 or newer with Lua scripting (EVAL) allowed");
    script_sha_ = reply_text(reply.get());
    auto policy = read_eviction_policy([&conn](const auto& args) { return conn->command(args); });
    if (auto refusal = eviction_refusal(policy, where_)) throw Error("--sink: " + *refusal);
    if (policy.policy.empty())
        log_warning("publish", where_ + " tells its maxmemory-policy neither through CONFIG GET nor INFO memory: "
                                        "make sure it is noeviction (an allkeys-* policy drops retained docs)");
    release(std::move(conn));
}

std::unique_ptr<RedisConnection> RedisSink::acquire() {
    std::chrono::steady_clock::time_point wait_until;
    {
        std::lock_guard lock(mutex_);
        if (!idle_.empty()) {
            auto conn = std::move(idle_.back());
            idle_.pop_back();
            return conn;
        }
        wait_until = next_connect_;
    }
    auto now = std::chrono::steady_clock::now();
    if (wait_until > now) std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(wait_until - now, options_.max_backoff));
    try {
        auto conn = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
        check_eviction(*conn);  // a reconnect may reach a Redis configured anew
        std::lock_guard lock(mutex_);
        backoff_ = options_.initial_backoff;
        return conn;
    } catch (const Error& e) {
        std::lock_guard lock(mutex_);
        next_connect_ = std::chrono::steady_clock::now() + backoff_;
        backoff_ = std::min(backoff_ * 2, options_.max_backoff);
        throw;
    }
}

void RedisSink::release(std::unique_ptr<RedisConnection> conn) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(conn));
}

void RedisSink::failed(const std::string& why) {
    breaks_.fetch_add(1);
    // The other pooled connections most likely died with this one (a Redis restart): drop them all
    // rather than fail once on each.
    std::vector<std::unique_ptr<RedisConnection>> dead;
    bool first;
    {
        std::lock_guard lock(mutex_);
        dead.swap(idle_);
        first = !down_;
        down_ = true;
    }
    // One line per outage, not one per retried doc.
    if (first) log_warning("publish", why + "; docs are retried and hold the slot until Redis is back");
}

void RedisSink::publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) {
    auto out = publish_many({Publication{&channel, &doc, version}});
    if (out.front()) throw *out.front();
}

std::vector<std::optional<Error>> RedisSink::publish_many(const std::vector<Publication>& docs) {
    if (auto refusal = eviction_refused()) return std::vector<std::optional<Error>>(docs.size(), Error(*refusal, {}, true));
    std::vector<ScriptCall> calls;
    std::vector<PatchPlan> plans;
    calls.reserve(docs.size());
    std::vector<std::optional<Error>> out(docs.size());
    Patcher* patcher = options_.patcher.get();
    for (const auto& d : docs) {
        if (!patcher) {
            calls.push_back(script_call(*d.channel, *d.channel, *d.doc, d.version, address_.tombstone_ttl));
            continue;
        }
        plans.push_back(patcher->plan(*d.channel, *d.doc, d.version));
        calls.push_back(script_call(*d.channel, std::move(plans.back()), address_.tombstone_ttl, !d.doc->has_value()));
    }
    // What became of each doc, for the cache: a stale refusal changes nothing, a failure drops the entry.
    auto record = [&](const std::vector<Reply>* replies) {
        if (!patcher) return;
        for (std::size_t i = 0; i < docs.size(); ++i) {
            std::optional<PatchOutcome> outcome;
            if (replies && !out[i]) outcome = script_outcome((*replies)[i]);
            patcher->record(*docs[i].channel, plans[i], outcome.value_or(PatchOutcome::Failed));
        }
    };
    std::unique_ptr<RedisConnection> conn;
    try {
        conn = acquire();
        std::vector<std::vector<std::string_view>> commands;
        for (const auto& call : calls) commands.push_back(call.args(kKind, script_sha_, false));
        const std::string wait_replicas = std::to_string(address_.wait_replicas);
        const std::string wait_timeout = std::to_string(address_.wait_timeout.count());
        const bool wait = address_.wait_replicas > 0;
        if (wait) commands.push_back({"WAIT", wait_replicas, wait_timeout});
        auto replies = conn->pipeline(commands);
        bool resent = false;
        for (std::size_t i = 0; i < calls.size(); ++i) {
            // Redis restarted (or SCRIPT FLUSH): send the script itself, which caches it again.
            if (no_script(replies[i])) {
                replies[i] = conn->command(calls[i].args(kKind, script(), true));
                resent = true;
            }
            out[i] = judge_script_reply(replies[i], where_, *docs[i].channel);
        }
        // With wait-replicas, a doc counts once that many replicas have it too (a failover then keeps it).
        if (wait) {
            Reply acked = resent ? conn->command({"WAIT", wait_replicas, wait_timeout}) : std::move(replies.back());
            if (acked->type != REDIS_REPLY_INTEGER || acked->integer < address_.wait_replicas)
                for (auto& o : out)
                    if (!o) o = Error(where_ + ": " + wait_shortfall(acked, address_), {}, true);
        }
        record(&replies);
    } catch (const Error& e) {
        if (conn) failed(std::string("lost the connection to ") + e.what());
        for (auto& o : out)
            if (!o) o = e;
        record(nullptr);
        return out;
    }
    release(std::move(conn));
    // Error replies (LOADING, READONLY, OOM) are Redis not taking docs yet.
    if (std::any_of(out.begin(), out.end(), [](const auto& o) { return o.has_value(); })) return out;
    bool was_down;
    {
        std::lock_guard lock(mutex_);
        was_down = down_;
        down_ = false;
    }
    if (was_down) log_info("publish", where_ + " takes docs again");
    return out;
}

std::vector<std::string> RedisSink::retained_channels() {
    auto conn = acquire();
    std::vector<std::string> channels;
    std::string cursor = "0";
    try {
        do {
            Reply reply = conn->command({"SCAN", cursor, "MATCH", "db:*", "COUNT", "1000"});
            if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
                reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_ARRAY)
                throw Error(where_ + " answered SCAN with " + reply_text(reply.get()), {},
                            true);
            cursor = reply_text(reply->element[0]);
            const redisReply* keys = reply->element[1];
            for (std::size_t i = 0; i < keys->elements; ++i)
                if (keys->element[i]->type == REDIS_REPLY_STRING) channels.push_back(reply_text(keys->element[i]));
        } while (cursor != "0");
    } catch (const Error& e) {
        failed(e.what());
        throw;
    }
    release(std::move(conn));
    // SCAN may return a key more than once.
    std::sort(channels.begin(), channels.end());
    channels.erase(std::unique(channels.begin(), channels.end()), channels.end());
    return channels;
}

Reply RedisSink::get(const std::string& key) {
    auto conn = acquire();
    Reply reply;
    try {
        reply = conn->command({"GET", key});
    } catch (const Error& e) {
        failed(e.what());
        throw;
    }
    release(std::move(conn));
    return reply;
}

void RedisSink::describe_keys(const std::string& key_types_json) {
    {
        std::lock_guard lock(mutex_);
        key_types_ = key_types_json;
    }
    try {
        auto conn = acquire();
        Reply reply = conn->command({"SET", kKeyTypesKey, key_types_json});
        release(std::move(conn));
        if (reply->type == REDIS_REPLY_ERROR) throw Error(reply_text(reply.get()));
    } catch (const std::exception& e) {
        log_warning("publish", where_ + " did not take " + std::string(kKeyTypesKey) + " (" + e.what() +
                                   "): written again once Redis is back");
    }
}

void RedisSink::keep_key_types() {
    std::optional<std::string> want;
    {
        std::lock_guard lock(mutex_);
        want = key_types_;
    }
    if (!want) return;
    try {
        Reply held = get(std::string(kKeyTypesKey));
        if (held->type == REDIS_REPLY_STRING && std::string_view(held->str, held->len) == *want) return;
        auto conn = acquire();
        Reply reply = conn->command({"SET", kKeyTypesKey, *want});
        release(std::move(conn));
        if (reply->type == REDIS_REPLY_ERROR) throw Error(reply_text(reply.get()));
        log_info("publish", where_ + " holds " + std::string(kKeyTypesKey) + " again");
    } catch (const std::exception&) {
        // Redis is down: its outage is logged where docs are published; tried again next second
    }
}

void RedisSink::expire_orphans(const std::vector<std::string>& channels) {
    std::string ttl_ms = std::to_string(std::chrono::milliseconds(address_.tombstone_ttl).count());
    try {
        auto conn = acquire();
        for (const auto& channel : channels) {
            Reply reply = conn->command({"EVAL", kExpireOrphanScript, "1", channel, ttl_ms});
            if (reply->type == REDIS_REPLY_ERROR) throw Error(reply_text(reply.get()));
        }
        release(std::move(conn));
    } catch (const std::exception& e) {
        log_warning("publish", where_ + " did not take the expiry of channels that name no doc (" + e.what() + ")");
    }
}

std::uint64_t RedisSink::max_generation() {
    Reply reply = get(std::string(kMaxGenerationKey));
    if (reply->type == REDIS_REPLY_NIL) return 0;
    std::string text = reply_text(reply.get());
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (reply->type != REDIS_REPLY_STRING || ec != std::errc() || end != text.data() + text.size())
        throw Error(where_ + " holds '" + text + "' at " + std::string(kMaxGenerationKey) +
                    ", not a generation; delete that key (docsync rewrites it with the next doc)");
    return value;
}

DocVersion RedisSink::max_version() {
    Reply reply = get(std::string(kMaxVersionKey));
    if (reply->type == REDIS_REPLY_STRING) {
        std::string text = reply_text(reply.get());
        unsigned long long generation = 0;
        unsigned hi = 0, lo = 0;
        char end = 0;
        if (std::sscanf(text.c_str(), "%llu/%X/%X%c", &generation, &hi, &lo, &end) == 3)
            return {generation, (static_cast<Lsn>(hi) << 32) | lo};
    }
    return {max_generation(), 0};
}

std::optional<RetainedDoc> RedisSink::read_back(const std::string& channel) {
    Reply reply = get(channel);
    if (reply->type == REDIS_REPLY_NIL) return std::nullopt;
    if (reply->type != REDIS_REPLY_STRING)
        throw Error(where_ + " answered GET " + channel + " with " + reply_text(reply.get()),
                    {}, true);
    auto doc = retained_doc(std::string_view(reply->str, reply->len), channel);
    if (!doc)
        throw Error(where_ + " holds at " + channel +
                        " something other than its docsync envelope",
                    {}, true);
    return doc;
}

bool RedisSink::wait_for_break(std::chrono::milliseconds timeout) {
    if (!watch_) {
        try {
            watch_ = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
        } catch (const Error& e) {
            failed(where_ + ": " + e.what());
            std::this_thread::sleep_for(timeout);
            return false;
        }
    }
    // Nothing is ever sent on this connection, so anything to read is its end.
    pollfd p{watch_->context()->fd, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (rc == 0 || (rc < 0 && errno == EINTR)) return false;
    watch_.reset();
    failed(where_ + ": the connection closed (Redis stopped or restarted)");
    return true;
}

std::optional<std::string> RedisSink::lost_docs() {
    auto conn = acquire();
    std::string run_id, replid;
    EpochMarker marker;
    long long evicted = -1;
    try {
        check_eviction(*conn);
        run_id = info_field(conn->command({"INFO", "server"}), "run_id");
        replid = info_field(conn->command({"INFO", "replication"}), "master_replid");
        marker = check_epoch_marker([&conn](const auto& args) { return conn->command(args); },
                                    std::string(kEpochKey), replid);
        if (!epoch_.empty() && marker.token != epoch_)
            evicted = evicted_keys([&conn](const auto& args) { return conn->command(args); });
    } catch (const Error& e) {
        failed(where_ + ": " + e.what());
        throw;
    }
    release(std::move(conn));
    std::optional<std::string> lost;
    bool was_evicting;
    {
        std::lock_guard lock(mutex_);
        was_evicting = std::exchange(eviction_fixed_, false);
    }
    if (!run_id_.empty() && run_id != run_id_)
        lost = where_ + " restarted (run_id " + run_id_.substr(0, 8) + "… is now " +
               run_id.substr(0, 8) + "…): docs written just before may be lost";
    else if (was_evicting)
        lost = where_ + " had an evicting maxmemory-policy, now fixed: docs it held may have been evicted";
    else if (!epoch_.empty() && marker.token != epoch_)
        lost = where_ + " no longer holds the marker key " + std::string(kEpochKey) +
               " (FLUSHALL, FLUSHDB, or a restart without persistence" +
               (evicted > 0 ? "; it has evicted " + std::to_string(evicted) + " keys since it started" : std::string()) +
               "): its docs may be gone";
    else if (marker.other_history)
        lost = where_ + " has another replication history (master_replid " +
               replid.substr(0, 8) + "…) than when docsync marked it: it restarted or was promoted; docs it took "
               "may be lost";
    run_id_ = run_id;
    epoch_ = marker.token;
    keep_key_types();
    return lost;
}

// The eviction policy (publish/redis_eviction.hpp), on a new connection and at every lost-docs check.
void RedisSink::check_eviction(RedisConnection& conn) {
    auto policy = read_eviction_policy([&conn](const auto& args) { return conn.command(args); });
    auto refusal = eviction_refusal(policy, where_);
    std::lock_guard lock(mutex_);
    if (refusal) {
        // One line per occurrence; until it is fixed docs hold the slot and waits hold (a break).
        if (!evicting_) log_error("publish", *refusal + "; docs are held until it is fixed");
        evicting_ = where_ + " may evict docs (maxmemory-policy " + policy.policy + "): held until it is fixed";
        down_ = true;
        breaks_.fetch_add(1);
        throw Error(*refusal, {}, true);
    }
    if (!evicting_) return;
    log_warning("publish", where_ + " no longer evicts (maxmemory-policy " + policy.policy + ")");
    evicting_.reset();
    eviction_fixed_ = true;  // lost_docs reports what may have been evicted meanwhile
}

std::optional<std::string> RedisSink::eviction_refused() {
    std::lock_guard lock(mutex_);
    return evicting_;
}

}  // namespace docsync::publish
