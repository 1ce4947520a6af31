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
// The subscriber thread owns its connections. It is told which channels to follow
// (set_following), sends SUBSCRIBE / UNSUBSCRIBE for the difference, and reports each message and
// each subscription it (re)establishes. After a reconnect every channel is subscribed again and
// reported again: messages published while the connection was down are lost to pub/sub, so whoever
// listens reads the retained doc after each `subscribed` (subscribe first, then read: nothing falls
// between the two). A connection counts as up once it has answered (a confirmation or a PONG), not
// when its TCP connect succeeds: a frozen node still completes connects. A PING every second finds
// a connection that died silently (no answer in 2 intervals).
//
// Reads, announcements and health PINGs go through FeedReaders (feed_readers.hpp): a lane per node,
// each command answered by its deadline.
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

#include "gateway/feed_port.hpp"
#include "gateway/feed_readers.hpp"
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
    unsigned readers = 2;  // per lane (per cluster master)
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};
    std::chrono::milliseconds ping_interval{1000};  // a subscriber with no answer in 2 intervals is dead
    std::chrono::milliseconds max_backoff{5000};
};

class Feed : public FeedPort {
public:
    Feed(publish::RedisAddress address, FeedEvents events, FeedOptions options = {});
    Feed(publish::RedisClusterAddress cluster, FeedEvents events, FeedOptions options = {});
    ~Feed() override;  // stops
    Feed(const Feed&) = delete;
    Feed& operator=(const Feed&) = delete;

    void start();
    void stop();

    // As FeedPort; set_following is applied by the subscriber thread, `done` runs on a reader
    // thread or the readers' sweeper.
    void set_following(const std::string& channel, bool follow) override;
    void read(const std::string& channel, std::function<void(FeedRead)> done) override;
    void announce(const std::string& channel, bool warm) override;
    // PING on every master (the Redis), ahead of the reads waiting for it.
    void probe(std::chrono::milliseconds timeout, std::function<void(FeedRead)> done) override;

    bool up() const override { return up_; }
    std::string display() const {
        return cluster_address_ ? cluster_address_->display() : "Redis at " + address_.display();
    }

private:
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
    void wake();
    bool stopping() const;

    const publish::RedisAddress address_;
    const std::optional<publish::RedisClusterAddress> cluster_address_;
    const FeedEvents events_;
    const FeedOptions options_;

    mutable std::mutex mutex_;
    std::condition_variable stop_cv_;
    bool stopping_ = false;
    std::set<std::string> wanted_;  // what clients follow (guarded by mutex_)
    // Channels followed anew since the subscriber last looked (guarded by mutex_): one whose
    // subscription stayed in place (dropped and taken up again in between) is reported as
    // subscribed at once, since no confirmation will come for it.
    std::set<std::string> renewed_;
    int wake_fd_ = -1;              // an eventfd: set_following and stop wake the subscriber's poll
    std::atomic<bool> up_{false};
    std::thread subscriber_;
    FeedReaders readers_;
};

}  // namespace docsync::gateway
