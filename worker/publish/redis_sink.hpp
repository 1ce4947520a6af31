#pragma once
// The Redis sink: `--sink redis://HOST:PORT[/DB]`.
//
// Every doc is retained and published. The retained doc lives at the key named like its channel
// (`db:order:42`), as a string holding its envelope (envelope/envelope.hpp), so a late subscriber gets
// the current doc and its version with one `GET db:order:42`. One Lua script does retain + publish
// atomically: it reads the version at the end of the retained envelope, and only when the new
// version (generation, lsn) is greater than or equal to it does it SET the key and PUBLISH the
// envelope on the channel; an older doc is dropped without a trace, so it never overwrites a newer
// one. A null doc is published and leaves a tombstone (its envelope, with "doc":null) that expires
// after the tombstone TTL instead of the retained value. With a patcher (--patches on) the message is
// the patch from the doc published before when the key held exactly that doc (docs/patches.md); the
// key always holds the whole doc. The script also keeps
// `docsync:max_generation`, the highest generation ever retained (`max_generation()`).
//
// Connections: a small pool, one connection per concurrently publishing thread. Any I/O error or
// timeout drops the pool and makes publish() throw a transient docsync::Error: the engine retries
// and the doc's transactions hold the slot until Redis takes it. Reconnects back off exponentially
// (100 ms doubling to 5 s); a publish waits out the current backoff before it reconnects.
//
// Thread-safety: every member may be called from any thread, concurrently.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/seams.hpp"
#include "publish/patcher.hpp"
#include "redis/connection.hpp"

namespace docsync::publish {

struct RedisSinkOptions {
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};  // a publish waits this long for Redis's reply
    std::chrono::milliseconds initial_backoff{100};
    std::chrono::milliseconds max_backoff{5000};
    // --patches on: the cache patches are made from (publish/patcher.hpp, shared by whoever reads
    // its counters); null: every message is the whole doc.
    std::shared_ptr<Patcher> patcher;
};

class RedisSink final : public Publisher {
public:
    // Connects once and loads the script: throws docsync::Error naming the address and the fix when
    // Redis cannot be reached or refuses the script.
    RedisSink(RedisAddress address, RedisSinkOptions options = {});

    void publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) override;
    // The scripts of every doc in one pipelined round trip on one connection.
    std::vector<std::optional<Error>> publish_many(const std::vector<Publication>& docs) override;
    // SCAN of the db:* keys (docs and tombstones).
    std::vector<std::string> retained_channels() override;
    std::uint64_t max_generation() override;
    // docsync:max_version (the script raises it with every doc), or {max_generation(), 0} when it
    // is missing or unreadable (docs published by an older worker).
    DocVersion max_version() override;
    // Redis restarted (its run_id changed: with appendfsync everysec the last writes may be lost) or
    // no longer holds the marker key docsync:epoch (FLUSHALL, FLUSHDB, a restart without persistence),
    // or an evicting maxmemory-policy was fixed. Throws (transient) while the policy may evict docs
    // (publish/redis_eviction.hpp): the start refuses one, this catches a CONFIG SET since.
    std::optional<std::string> lost_docs() override;
    // Counted by every failure that drops the pool (failed()).
    std::uint64_t breaks() const override { return breaks_.load(); }
    // Polls an idle connection of its own: Redis closes it when it stops or restarts, so the break is
    // seen at once, not at the next publish or check. A connection that cannot be made waits out
    // `timeout` (the outage is counted once per failed attempt).
    bool wait_for_break(std::chrono::milliseconds timeout) override;
    bool retains() const override { return true; }
    // SET docsync:key_types (kKeyTypesKey); a failure is logged. The list is kept: lost_docs()
    // (the sink watch, every second) writes it again whenever Redis holds another one or none (a
    // failed write, a reconnect to a restarted or flushed Redis), so docsync-gateway never checks
    // channels against a stale list for longer than a second or two.
    void describe_keys(const std::string& key_types_json) override;
    // An expiry of the tombstone TTL on each key that has none (a script: PTTL, then PEXPIRE).
    void expire_orphans(const std::vector<std::string>& channels) override;
    // GET of the channel's key: its envelope's doc and version (a tombstone's null doc too), nullopt
    // when the key is missing (never written, or an expired tombstone). Throws docsync::Error when
    // Redis cannot be asked or the key holds something other than a docsync envelope of the channel.
    // restore() is publish(): the script never lets an older version replace a newer one.
    std::optional<RetainedDoc> read_back(const std::string& channel) override;

    const RedisAddress& address() const { return address_; }
    // The Lua script (for the tests; docs/internals.md describes it).
    static const char* script();

private:
    std::unique_ptr<RedisConnection> acquire();
    void release(std::unique_ptr<RedisConnection> conn);
    void failed(const std::string& why);
    // GET of `key` on a pooled connection; a failure is recorded (failed()) and thrown.
    Reply get(const std::string& key);
    // docsync:key_types as describe_keys gave it, written again when Redis holds anything else.
    void keep_key_types();
    // Reads the eviction policy on `conn`; one that may evict docs is recorded (publishes refused,
    // a break counted, logged once) and thrown as a transient docsync::Error.
    void check_eviction(RedisConnection& conn);
    std::optional<std::string> eviction_refused();

    const RedisAddress address_;
    const std::string where_;  // "Redis at HOST:PORT/DB", for messages
    const RedisSinkOptions options_;
    std::string script_sha_;

    std::mutex mutex_;
    std::string run_id_;  // lost_docs: what Redis said last time
    std::string epoch_;
    std::vector<std::unique_ptr<RedisConnection>> idle_;
    std::optional<std::string> key_types_;  // what describe_keys was given last
    std::chrono::steady_clock::time_point next_connect_{};
    std::chrono::milliseconds backoff_;
    bool down_ = false;  // logged as lost, not yet as back
    std::optional<std::string> evicting_;  // why the eviction policy is refused, while it is
    bool eviction_fixed_ = false;          // it was, and lost_docs has not said so yet
    std::atomic<std::uint64_t> breaks_{0};
    std::unique_ptr<RedisConnection> watch_;  // wait_for_break's; one caller at a time
};

}  // namespace docsync::publish
