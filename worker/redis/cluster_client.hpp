#pragma once
// A small Redis Cluster client over hiredis (Debian packages no cluster-aware one): it knows which
// node serves each hash slot and sends each command there.
//
//   - Discovery: CLUSTER SHARDS (Redis 7; CLUSTER SLOTS before) from the first node that answers,
//     the known masters first, then the seeds of the URL. The map is refreshed after a MOVED, after
//     a node failed, and when asked (refresh()), at most every 100 ms unless forced.
//   - Redirects: MOVED sends the command to the node named, and refreshes the map; ASK (a slot
//     being migrated) sends ASKING and the command to the node named, once. At most 5 redirects per
//     command, then it fails (transient).
//   - A command that names a script by SHA (EVALSHA) carries its fallback (EVAL with the script),
//     sent instead when that node answers NOSCRIPT (a restarted or new node).
//   - Pipelining: run() groups the commands by node and writes every group out before reading any
//     reply, so all nodes work at once. A group with a durable command ends with WAIT when the
//     address asks for wait-replicas.
//   - Connections: an idle pool per node. An idle connection that fails (the node restarted while it
//     sat in the pool) is replaced once by a new one. A node whose new connection fails is dropped
//     from the pool and backs off (100 ms doubling to 5 s) before the next connect; until then its commands fail at
//     once, so a dead node never slows the commands of the others. One warning per node outage, one
//     line when it answers again.
//
// Thread-safety: every member may be called from any thread, concurrently.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/thread_annotations.hpp"
#include "redis/cluster_map.hpp"
#include "redis/connection.hpp"

namespace docsync::redis {

struct ClusterOptions {
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};
    std::chrono::milliseconds initial_backoff{100};
    std::chrono::milliseconds max_backoff{5000};
    int max_redirects = 5;
};

struct KeyedCommand {
    std::string_view key;                    // routes the command: its hash slot
    std::vector<std::string_view> args;
    std::vector<std::string_view> fallback;  // sent instead after NOSCRIPT; empty: none
    // A write that must reach the address's wait-replicas replicas: WAIT follows it on its node,
    // and fewer replicas acknowledging within wait-timeout fail it (transient).
    bool durable = false;
};

// One command's result: the node's reply (an error reply other than a redirect included), or the
// transient error that kept it from one (the node unreachable, no master for the slot, too many
// redirects).
struct Outcome {
    Reply reply;
    std::optional<Error> error;
};

class ClusterClient {
public:
    // Discovers the map. Throws docsync::Error naming the seeds and the fix when no seed answers
    // (transient) or a seed is not a cluster node (permanent).
    explicit ClusterClient(RedisClusterAddress address, ClusterOptions options = {});

    std::vector<Outcome> run(const std::vector<KeyedCommand>& commands);
    Outcome run(const KeyedCommand& command);

    // One command on one node, with no routing (INFO, SCAN, PUBSUB SHARDCHANNELS). Throws
    // docsync::Error (transient) when the node cannot be reached or does not answer.
    Reply on_node(const ClusterNode& node, const std::vector<std::string_view>& args);
    // A new connection to the first node that answers (a subscriber's). Throws as on_node.
    std::unique_ptr<RedisConnection> connect_any();

    // Asks the nodes for the map now (`force`, after any refresh already running), or when it was
    // marked stale, is older than 100 ms and no refresh is running. Throws docsync::Error
    // (transient) when no node answers.
    void refresh(bool force = true);
    std::shared_ptr<const SlotMap> map() const;

    const RedisClusterAddress& address() const { return address_; }

private:
    struct Endpoint {
        std::string host;
        int port = 0;
        std::string text() const;
        bool operator<(const Endpoint& o) const { return std::tie(host, port) < std::tie(o.host, o.port); }
    };
    struct Pool {
        std::vector<std::unique_ptr<RedisConnection>> idle;
        std::chrono::steady_clock::time_point next_connect{};
        std::chrono::milliseconds backoff{0};
        std::string last_error;
        bool down = false;  // logged as lost, not yet as back
    };

    // A connection to one node, borrowed from its idle pool or new. It goes back to the pool when
    // it goes out of scope only after answered(), which also tells the node's pool it answers; on
    // every other path (an exception, a reply that never came) it is closed, so no connection in an
    // unknown state is reused and none leaks. Belongs to one thread.
    class PooledConnection {
    public:
        PooledConnection(ClusterClient& client, Endpoint at, std::unique_ptr<RedisConnection> conn, bool pooled)
            : client_(&client), at_(std::move(at)), conn_(std::move(conn)), pooled_(pooled) {}
        PooledConnection(PooledConnection&&) noexcept = default;
        PooledConnection& operator=(PooledConnection&&) = delete;
        ~PooledConnection();

        RedisConnection* operator->() { return conn_.get(); }
        // Whether it came from the idle pool (it may have died with a restart of the node).
        bool pooled() const { return pooled_; }
        // Its exchange succeeded: it rejoins the pool at the end of its scope.
        void answered();
        // Its exchange failed: it is closed now.
        void close() { conn_.reset(); }

    private:
        ClusterClient* client_;
        Endpoint at_;
        std::unique_ptr<RedisConnection> conn_;
        bool pooled_ = false;
        bool answered_ = false;
    };

    // An idle connection to `at`, or a new one unless `at` is backing off.
    PooledConnection acquire(const Endpoint& at) EXCLUDES(mutex_);
    // A new connection to `at`, backing off or not.
    std::unique_ptr<RedisConnection> connect(const Endpoint& at) EXCLUDES(mutex_);
    // Drops `at`'s idle connections (they may all have died with a restart of the node).
    void drop_idle(const Endpoint& at) EXCLUDES(mutex_);
    // One command on `at`; an idle connection that fails is replaced once by a new one. Throws
    // docsync::Error (transient) when `at` cannot be reached or does not answer.
    Reply command_on(const Endpoint& at, const std::vector<std::string_view>& args) EXCLUDES(mutex_);
    // `batch` on a new connection to `at`, which joins the pool after.
    std::vector<Reply> exchange(const Endpoint& at, const std::vector<std::vector<std::string_view>>& batch)
        EXCLUDES(mutex_);
    // PooledConnection's: back to `at`'s idle pool.
    void release(const Endpoint& at, std::unique_ptr<RedisConnection> conn) EXCLUDES(mutex_);
    // The connection to `at` failed with `why`: drop its pool, back off, mark the map stale.
    void failed(const Endpoint& at, const std::string& why) EXCLUDES(mutex_);
    void answered(const Endpoint& at) EXCLUDES(mutex_);
    // The map `at` describes, or nullopt when it cannot say (why in `last_error`). Throws
    // docsync::Error (permanent) when `at` is no cluster node or wants a password none was given.
    std::optional<SlotMap> ask_map(const Endpoint& at, std::string& last_error) EXCLUDES(mutex_);
    // refresh()'s work, with the one refresh's lock held.
    void refresh_locked(bool force) REQUIRES(refresh_mutex_) EXCLUDES(mutex_);

    const RedisClusterAddress address_;
    const ClusterOptions options_;

    // refresh_mutex_ is taken first when both are held; I/O happens under it, never under mutex_.
    Mutex refresh_mutex_ ACQUIRED_BEFORE(mutex_);  // one refresh at a time
    mutable Mutex mutex_;
    std::shared_ptr<const SlotMap> map_ GUARDED_BY(mutex_);
    bool stale_ GUARDED_BY(mutex_) = false;
    std::chrono::steady_clock::time_point refreshed_ GUARDED_BY(mutex_) = {};
    std::map<Endpoint, Pool> pools_ GUARDED_BY(mutex_);
};

// The key and the channel of a doc's channel in a cluster: `{db:order:42}`, whose hash tag is the
// whole name, so that the retained doc and its sharded channel live on one slot.
inline std::string cluster_key(std::string_view channel) {
    std::string key;  // appended: GCC 12 warns falsely (-Wrestrict) on "{" + std::string(…)
    key.reserve(channel.size() + 2);
    key += '{';
    key += channel;
    key += '}';
    return key;
}
// The channel a cluster key names (`{db:order:42}` → `db:order:42`); other names unchanged.
inline std::string_view channel_of_cluster_key(std::string_view key) {
    return key.size() >= 2 && key.front() == '{' && key.back() == '}' ? key.substr(1, key.size() - 2) : key;
}

}  // namespace docsync::redis

// The publish sinks and the gateway name the client's parts publish::…, as before its move here.
namespace docsync::publish {
using namespace docsync::redis;
}
