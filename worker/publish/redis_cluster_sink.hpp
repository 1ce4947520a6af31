#pragma once
// The Redis Cluster sink: `--sink redis-cluster://HOST:PORT[,HOST:PORT…]`.
//
// As the single-node sink (publish/redis_sink.hpp), with these differences:
//   - A doc's key and channel are one name whose hash tag is the whole channel, `{db:order:42}`
//     (cluster_key), so that the script touches one slot; it publishes with SPUBLISH (sharded
//     pub/sub, Redis 7), which only the shard owning that slot carries. The envelope's "channel" is
//     the doc's channel, `db:order:42`.
//   - Each batch of docs is grouped by the master of each doc's slot and pipelined to every master
//     at once (redis/cluster_client.hpp routes, follows MOVED and ASK, and reconnects). A doc
//     counts as published only when its master answered its script: while a master is down or
//     failing over, its docs fail (transient) and hold the slot; the other masters go on.
//   - docsync:max_generation lives on its own slot. Before the first doc of a generation above the
//     one it holds is published, the sink raises it (a script that only ever raises it), so it is
//     never below the generation of a retained doc.
//   - lost_docs() reports a failover (a replica promoted: with Redis's asynchronous replication it
//     may lack the last docs its master answered for), a master that restarted (its run_id changed),
//     and a master that lost its marker key docsync:epoch:{TAG} (FLUSHALL; TAG puts the key on one
//     of that master's slots). The marker also holds the master_replid of the master that wrote it:
//     a promoted replica holds it under a new replication ID, so a failover is reported at the first
//     call too, by a worker that was not running when it happened (the marker is then rewritten).
//     A slot that moved by resharding took its keys along and is no loss.
//   - Positions: each master keeps the highest version of the docs it took,
//     docsync:max_version:{TAG} (GENERATION/HI/LO as on a single node; TAG on the master's first
//     slot, like its marker). Each publish raises it write-ahead: a script that only ever raises it
//     goes first in the master's pipelined group, before that master's docs, so it is never below a
//     doc the master holds. max_version() is the highest over the masters that answer: a restore of
//     the server shows on whichever master holds the newest docs, and a master that restarted empty
//     or was restored from an older copy only lowers its own (lost_docs() reports it).
//   - The break watch: wait_for_break() keeps an idle connection to every master and polls them all;
//     one that closes (a master stopped, restarted or failed over), a master that cannot be reached,
//     and a new connection to a master after the first round (it came back, or a replica was
//     promoted) count a break: waits hold (SINK_UNCHECKED) until lost_docs() has looked at it.
//   - A master found without its marker at the first lost_docs() while another master holds its own
//     restarted empty (or joined the cluster) while no worker watched: reported as lost docs.
//   - retained_channels() SCANs every master.
//   - Every master's eviction policy is checked at start and by every lost_docs() (one that may evict
//     docs is refused: publish/redis_eviction.hpp); while one is, publishes fail (transient) and
//     lost_docs() throws, counting a break.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "engine/seams.hpp"
#include "redis/cluster_client.hpp"
#include "publish/redis_script.hpp"
#include "publish/redis_sink.hpp"

namespace docsync::publish {

class RedisClusterSink final : public Publisher {
public:
    // Discovers the cluster, checks that its masters run Redis 7 or newer and loads the script.
    // Throws docsync::Error naming the address and the fix when it cannot be used.
    RedisClusterSink(RedisClusterAddress address, RedisSinkOptions options = {});

    void publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) override;
    std::vector<std::optional<Error>> publish_many(const std::vector<Publication>& docs) override;
    std::vector<std::string> retained_channels() override;
    std::uint64_t max_generation() override;
    // The highest docsync:max_version:{TAG} over the masters that answer, or {max_generation(), 0}
    // when none holds one. Throws docsync::Error (transient) when no master answers.
    DocVersion max_version() override;
    // Polls an idle connection to every master (see the break watch above).
    bool wait_for_break(std::chrono::milliseconds timeout) override;
    std::optional<std::string> lost_docs() override;
    // Counted by the break watch and by every lost-docs check that finds an evicting master.
    std::uint64_t breaks() const override { return breaks_.load(); }
    bool retains() const override { return true; }
    // SET docsync:key_types (kKeyTypesKey); a failure is logged. Kept as RedisSink keeps it:
    // lost_docs() writes it again whenever the cluster holds another one or none.
    void describe_keys(const std::string& key_types_json) override;
    // An expiry of the tombstone TTL on each key that has none (a script: PTTL, then PEXPIRE).
    void expire_orphans(const std::vector<std::string>& channels) override;
    std::optional<RetainedDoc> read_back(const std::string& channel) override;

    ClusterClient& client() { return client_; }
    static const char* script();

private:
    // One master's write-ahead raise of its docsync:max_version:{TAG} (redis_cluster_positions.cpp).
    struct PositionRaise {
        std::string key;
        std::string generation, hi, lo;
        std::vector<std::size_t> docs;  // the batch's docs routed to that master
        std::vector<std::string_view> args() const;
    };
    // The raises of a batch: one per master its docs are routed to (by the current map).
    std::vector<PositionRaise> position_raises(const std::vector<Publication>& docs,
                                               const std::vector<ScriptCall>& calls) const;
    // Raises docsync:max_generation to `generation` unless it is there already.
    std::optional<Error> raise_max_generation(std::uint64_t generation);

    ClusterClient client_;
    // lost_docs()'s own view of the cluster, refreshed at each call: the publishing client's map then
    // changes only on a MOVED or a node's failure, as Redis Cluster clients do.
    ClusterClient watch_;
    const std::string where_;  // "Redis Cluster via …", for messages
    const RedisSinkOptions options_;
    std::string script_sha_;
    std::atomic<std::uint64_t> max_generation_raised_{0};
    std::atomic<std::uint64_t> breaks_{0};

    // lost_docs: what the cluster looked like at the last call.
    struct Seen {
        std::string run_id;
        int marker_slot = -1;
        std::string token;  // of the marker docsync:epoch:{N}, whose value is TOKEN/MASTER_REPLID
    };
    // docsync:key_types as describe_keys gave it, written again when the cluster holds anything else.
    void keep_key_types();
    std::mutex key_types_mutex_;
    std::optional<std::string> key_types_;  // what describe_keys was given last
    std::optional<std::string> judge_eviction(const std::optional<std::string>& refusal, const std::string& policies);
    std::mutex eviction_mutex_;
    std::optional<std::string> evicting_;  // why a master's eviction policy is refused, while it is
    // The break watch's connections, by master node ID (wait_for_break's: one caller at a time).
    struct Watched {
        std::string endpoint;
        std::unique_ptr<RedisConnection> conn;
    };
    std::map<std::string, Watched> watched_;
    bool watched_once_ = false;  // the first round's connections are no break
    std::mutex lost_mutex_;
    std::map<std::string, Seen> seen_;         // by master node ID
    std::map<std::string, bool> was_master_;  // by node ID: its role at the last call
};

}  // namespace docsync::publish
