#pragma once
// The gateway's side of Redis: one subscriber connection that follows the channels clients want, and
// a few reader connections for the retained docs and the liveness announcements.
//
// On a Redis Cluster (`redis-cluster://`) the subscriber holds one connection per master and
// follows each channel with SSUBSCRIBE on the master of its key's slot (`{db:order:42}`). A slot
// that moves (resharding: the node answers MOVED, or ends the subscription with an unasked
// `sunsubscribe`) or a master that fails (its connection drops; a replica is promoted) makes it
// refresh the map and subscribe again where the slot now lives; each such subscription is
// reported like any other, so the retained doc is read again there. Reads go through the cluster
// client, which follows redirects.
//
// The subscriber thread owns its connection. It is told which channels to follow
// (set_following), sends SUBSCRIBE / UNSUBSCRIBE for the difference, and reports each message and
// each subscription it (re)establishes. After a reconnect every channel is subscribed again and
// reported again: messages published while the connection was down are lost to pub/sub, so whoever
// listens reads the retained doc after each `subscribed` (subscribe first, then read: nothing falls
// between the two). A PING every few seconds finds a connection that died silently.
//
// The reader threads run GET (the retained envelope) and PUBLISH docsync:warm / docsync:touch.
// Callbacks run on the feed's threads; the hub posts them onto its own.

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster_client.hpp"
#include "redis/connection.hpp"

namespace docsync::gateway {

struct FeedEvents {
    // A message on a followed channel: its payload (an envelope).
    std::function<void(const std::string& channel, std::string payload)> message;
    // The subscription to `channel` is in place (again): read its retained doc now.
    std::function<void(const std::string& channel)> subscribed;
    // The subscriber connection is up (every followed channel subscribed) or lost.
    std::function<void(bool up)> state;
};

struct FeedOptions {
    unsigned readers = 2;
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};
    std::chrono::milliseconds ping_interval{5000};  // a subscriber with no answer in 2 intervals is dead
    std::chrono::milliseconds max_backoff{5000};
};

// The outcome of a read: the value (nullopt for a missing key), or why it failed.
struct FeedRead {
    bool ok = false;
    std::optional<std::string> value;
    std::string error;
};

class Feed {
public:
    Feed(publish::RedisAddress address, FeedEvents events, FeedOptions options = {});
    Feed(publish::RedisClusterAddress cluster, FeedEvents events, FeedOptions options = {});
    ~Feed();  // stops
    Feed(const Feed&) = delete;
    Feed& operator=(const Feed&) = delete;

    void start();
    void stop();

    // Follow `channel` or stop following it. Cheap: applied by the subscriber thread.
    void set_following(const std::string& channel, bool follow);
    // GET `channel`; `done` runs on a reader thread.
    void read(const std::string& channel, std::function<void(FeedRead)> done);
    // PUBLISH docsync:warm (warm) or docsync:touch `channel`; failures are logged.
    void announce(const std::string& channel, bool warm);
    // PING on a reader connection, ahead of the reads waiting; `done` runs on a reader thread.
    void probe(std::function<void(FeedRead)> done);

    bool up() const { return up_; }
    std::string display() const {
        return cluster_address_ ? cluster_address_->display() : "Redis at " + address_.display();
    }

private:
    struct Job {
        std::vector<std::string> args;
        std::function<void(FeedRead)> done;
        std::string key;  // what routes it on a cluster: its key or channel (args[1] when empty)
    };
    void subscriber_loop();
    void subscribe_once();
    void cluster_subscribe_once();
    // The subscriptions wanted now, and a wait on the wake descriptor and `fds` for at most `ms`.
    std::set<std::string> wanted() const;
    // The channels followed anew since the last call (see renewed_).
    std::set<std::string> take_renewed();
    void wait(std::vector<pollfd>& fds, int ms);
    // A reply of a subscriber connection: a message, a (s)subscribe confirmation, a pong.
    // Returns false for an unasked sunsubscribe (the slot moved).
    bool dispatch(const publish::Reply& reply, bool& pong);
    void reader_loop();
    void run_job(std::unique_ptr<publish::RedisConnection>& conn, Job& job);
    void wake();
    bool stopping() const;

    const publish::RedisAddress address_;
    const std::optional<publish::RedisClusterAddress> cluster_address_;
    std::unique_ptr<publish::ClusterClient> cluster_;  // the readers' (thread-safe), made on first use
    std::mutex cluster_mutex_;
    const FeedEvents events_;
    const FeedOptions options_;

    mutable std::mutex mutex_;
    std::condition_variable jobs_cv_;
    std::condition_variable stop_cv_;
    bool stopping_ = false;
    std::set<std::string> wanted_;  // what clients follow (guarded by mutex_)
    // Channels followed anew since the subscriber last looked (guarded by mutex_): one whose
    // subscription stayed in place (dropped and taken up again in between) is reported as
    // subscribed at once, since no confirmation will come for it.
    std::set<std::string> renewed_;
    std::deque<Job> jobs_;          // guarded by mutex_
    int wake_fd_ = -1;              // an eventfd: set_following and stop wake the subscriber's poll
    std::atomic<bool> up_{false};
    std::thread subscriber_;
    std::vector<std::thread> readers_;
};

}  // namespace docsync::gateway
