#pragma once
// What Redis clients ask of the worker: the subscriber set for `--live subscribers`, and the docs
// they ask for on `docsync:warm` and `docsync:touch` in either live mode.
//
// Two threads, each with its own connection:
//   - the poller (only with `poll_subscribers`, i.e. `--live subscribers`) runs
//     `PUBSUB CHANNELS db:*` every poll interval (on a cluster `PUBSUB SHARDCHANNELS {db:*` on every
//     healthy node, masters and replicas, since a sharded subscriber may sit on either) and calls `sync_live(channels, true)`; when a poll
//     fails it calls `sync_live({}, false)` (an incomplete poll only adds, never drops, so the engine
//     keeps what it has);
//   - the listener subscribes to `docsync:warm` and `docsync:touch` and calls `warm(channel)` /
//     `touch(channel)` for each message whose payload is a `db:` channel, or a cluster key
//     `{db:…}` (others are logged and ignored). On a cluster it subscribes on any one node: Redis
//     Cluster carries classic pub/sub to every node.
// Both reconnect with backoff when Redis goes away. The callbacks run on these threads: the wiring
// connects them to Engine::sync_live, Engine::warm and Engine::touch, which never block.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster_client.hpp"
#include "redis/connection.hpp"
#include "redis/keys.hpp"

namespace docsync::publish {

struct LivenessCallbacks {
    std::function<void(const std::vector<std::string>& channels, bool complete)> sync_live;
    std::function<void(const std::string& channel)> warm;
    std::function<void(const std::string& channel)> touch;
};

struct LivenessOptions {
    bool poll_subscribers = true;                   // --live subscribers: run the poller too
    std::chrono::milliseconds poll_interval{5000};  // --live-poll
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};
    std::chrono::milliseconds max_backoff{5000};
};

class RedisLiveness {
public:
    RedisLiveness(RedisAddress address, LivenessCallbacks callbacks, LivenessOptions options = {});
    RedisLiveness(RedisClusterAddress cluster, LivenessCallbacks callbacks, LivenessOptions options = {});
    ~RedisLiveness();  // stops
    RedisLiveness(const RedisLiveness&) = delete;
    RedisLiveness& operator=(const RedisLiveness&) = delete;

    // Starts the listener, and the poller when it polls; the first poll runs at once.
    void start();
    // Stops both threads within about 200 ms plus one command timeout. Idempotent.
    void stop();

    // Completed polls and failed ones so far (for the status board and tests).
    std::uint64_t polls() const { return polls_; }
    std::uint64_t failed_polls() const { return failed_polls_; }
    // True while the listener is subscribed.
    bool listening() const { return listening_; }

private:
    void poll_loop();
    void listen_loop();
    void listen_once();
    // One poll: the channels with subscribers. Throws docsync::Error when it is incomplete.
    std::vector<std::string> subscribed_channels(std::unique_ptr<RedisConnection>& conn);
    std::unique_ptr<RedisConnection> connect_listener();
    ClusterOptions cluster_options() const;  // the timeouts of options_
    std::string display() const;
    // Sleeps up to `d`; false when stopping.
    bool sleep_for(std::chrono::milliseconds d);

    const RedisAddress address_;
    std::optional<RedisClusterAddress> cluster_address_;  // set: a cluster, seeded by these
    std::unique_ptr<ClusterClient> cluster_;  // the poller's, made on its first poll
    const LivenessCallbacks callbacks_;
    const LivenessOptions options_;

    std::mutex mutex_;
    std::condition_variable stop_cv_;
    bool stopping_ = false;
    std::atomic<std::uint64_t> polls_{0};
    std::atomic<std::uint64_t> failed_polls_{0};
    std::atomic<bool> listening_{false};
    std::thread poller_;
    std::thread listener_;
};

}  // namespace docsync::publish
