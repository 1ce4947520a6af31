#pragma once
// The gateway's reads of Redis (GET of retained docs, PUBLISH docsync:warm / docsync:touch, the
// health PINGs), each on the lane of the node that serves it, each answered by its deadline.
//
// A lane is a queue and its own reader threads (--redis-connections of them). A single Redis has
// one lane. On a Redis Cluster each master has its own, chosen by the slot map the readers'
// cluster client holds (the lane is only where a command waits: the client still follows MOVED and
// ASK), so a frozen or slow master holds up only the commands that hash to it; a read for a healthy
// master never waits behind another master's.
//
// Every command carries a deadline (--redis-connections' command timeout from when it was asked
// for, or the probe's own timeout): a sweeper thread answers whatever passed it, waiting in its
// lane or still out on the wire, with an error naming the node, so no caller waits longer on a
// node that does not answer. An answer that comes later is dropped.
//
// probe() PINGs every master of the cluster (the single Redis otherwise), each ahead of the
// commands waiting in its lane, and says which ones did not answer.
//
// On a Redis Cluster the readers' cluster client is made by a thread of its own from start(): it
// asks every seed of --redis for the map at once (each attempt with the seeds in another order)
// and keeps the first client that learns it, so a frozen seed delays nothing. Until then a
// command waits for it at most kMapWait (and its own deadline), then is answered that no seed has
// answered yet. run(), probe() and route() never do Redis I/O and never wait on a lock held
// across it: they read the client already made, or find none (the caller may be the hub's thread).
//
// Threads: the lanes' readers, the sweeper and the cluster client's maker; `done` callbacks run
// on them (the hub posts them on to its own thread). Every member may be called from any thread.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gateway/feed_port.hpp"
#include "redis/cluster_client.hpp"
#include "redis/connection.hpp"

namespace docsync::gateway {

struct ReaderOptions {
    unsigned readers = 2;  // threads (and connections) per lane
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};
};

class FeedReaders {
public:
    // `cluster`: the cluster's address (then `address` is its first seed), or nullopt for a single Redis.
    FeedReaders(publish::RedisAddress address, std::optional<publish::RedisClusterAddress> cluster,
                std::string display, ReaderOptions options);
    ~FeedReaders();  // stops
    FeedReaders(const FeedReaders&) = delete;
    FeedReaders& operator=(const FeedReaders&) = delete;

    void start();
    // Joins the threads; commands not answered yet are answered "the gateway is stopping".
    void stop();

    // `args` on the node that serves `key` (a cluster) or on the Redis; `done` gets the reply's
    // text (nullopt for nil) or the error, by the command timeout.
    void run(std::vector<std::string> args, std::string key, std::function<void(FeedRead)> done);
    // PING on every master (on the Redis), each within `timeout`; `done` gets ok, or an error naming
    // the nodes that did not answer.
    void probe(std::chrono::milliseconds timeout, std::function<void(FeedRead)> done);

private:
    using clock = std::chrono::steady_clock;
    // A command's answer, given once: by the reader that ran it or by the sweeper at the deadline.
    struct Answer {
        std::mutex mutex;
        std::function<void(FeedRead)> done;  // empty once answered
        void give(FeedRead result);
        bool given();
    };
    struct Job {
        std::vector<std::string> args;
        std::string key;                             // routes it on a cluster
        std::optional<publish::ClusterNode> node;    // a PING for this node (no routing)
        clock::time_point deadline;
        std::chrono::milliseconds timeout{0};        // what the deadline allows, for the error
        std::string where;                           // the node it waits for, for the timeout's error
        std::shared_ptr<Answer> answer;
    };
    struct Lane {
        std::string endpoint;  // "" for the single Redis, or before the cluster's map is known
        std::deque<Job> jobs;
        std::vector<Job*> running;  // one per reader at most (the job lives on the reader's stack)
        std::condition_variable cv;
        std::vector<std::thread> threads;
    };

    // The lane of `endpoint`, made (with its readers) on first use. Requires mutex_.
    Lane& lane(const std::string& endpoint);
    // The master endpoint that serves `key` now ("" when the map is not known yet).
    std::string route(const std::string& key);
    void submit(Job job, bool urgent);
    void reader_loop(Lane& lane);
    FeedRead execute(std::unique_ptr<publish::RedisConnection>& conn, const Job& job);
    // The cluster client once made, or null (never waits on Redis).
    std::shared_ptr<publish::ClusterClient> cluster_now();
    // The cluster client, waiting for its maker until `until` at most; null when none is made by then.
    std::shared_ptr<publish::ClusterClient> cluster_by(clock::time_point until);
    // The maker's thread: asks every seed at once until one answers, or the readers stop.
    void make_cluster_loop();
    // Why no cluster client is made yet, for the errors of the commands that wait for it.
    std::string no_map_yet();
    void sweep_loop();
    // The error of a command answered at its deadline: which node did not answer what, within what.
    static std::string too_late(const Job& job);

    const publish::RedisAddress address_;
    const std::optional<publish::RedisClusterAddress> cluster_address_;
    const std::string display_;
    const ReaderOptions options_;

    // Guards only the published client and the maker's last error: never held across Redis I/O.
    std::mutex cluster_mutex_;
    std::condition_variable cluster_cv_;                // the client was made, or the readers stop
    std::shared_ptr<publish::ClusterClient> cluster_;   // made by cluster_maker_ (guarded by cluster_mutex_)
    std::string cluster_error_;                         // its last attempt's failure (guarded by cluster_mutex_)
    bool cluster_stopping_ = false;                     // guarded by cluster_mutex_
    std::thread cluster_maker_;

    std::mutex mutex_;
    std::condition_variable sweep_cv_;
    bool started_ = false;   // guarded by mutex_
    bool stopping_ = false;  // guarded by mutex_
    std::map<std::string, std::unique_ptr<Lane>> lanes_;  // by endpoint (guarded by mutex_)
    std::thread sweeper_;
};

}  // namespace docsync::gateway
