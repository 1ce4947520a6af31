// The subscriber thread of the gateway's Redis side (its reads: feed_readers.cpp).
#include "gateway/feed.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"
#include "redis/cluster_map.hpp"
#include "redis/keys.hpp"

namespace docsync::gateway {

using publish::Reply;
using publish::RedisConnection;
using publish::reply_text;

namespace {

constexpr std::chrono::milliseconds kInitialBackoff{100};
constexpr std::size_t kChannelsPerCommand = 256;  // SUBSCRIBE / UNSUBSCRIBE arguments per command
// How often a cluster subscriber asks for the slot map unprompted. A master demoted by a failover
// may keep its shard subscribers and go on delivering what its new master replicates to it, so
// nothing tells the subscriber to move: the map does, within this.
constexpr std::chrono::seconds kClusterMapCheck{5};

// The oldest PING a subscriber connection has not had answered yet, if any. (A flag and a time, not
// a std::optional: GCC 12 warns falsely, -Wmaybe-uninitialized, on the optional's time at -O2.)
struct UnansweredPing {
    bool pending = false;
    std::chrono::steady_clock::time_point since{};
    bool older_than(std::chrono::steady_clock::time_point now, std::chrono::milliseconds limit) const {
        return pending && now - since >= limit;
    }
    void sent(std::chrono::steady_clock::time_point now) {
        if (!pending) since = now;
        pending = true;
    }
    void answered() { pending = false; }
};

// Appends one command to the context's output buffer.
void append(redisContext* ctx, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lengths.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK)
        throw Error(std::string("cannot queue a command: ") + ctx->errstr, {}, true);
}

// Writes out what append() queued.
void flush(redisContext* ctx) {
    int done = 0;
    while (!done)
        if (redisBufferWrite(ctx, &done) != REDIS_OK)
            throw Error(std::string("cannot write to Redis: ") + ctx->errstr, {}, true);
}

// SUBSCRIBE / UNSUBSCRIBE `channels`, a bounded number per command.
void append_chunked(redisContext* ctx, const char* verb, const std::vector<std::string>& channels) {
    for (std::size_t at = 0; at < channels.size(); at += kChannelsPerCommand) {
        std::vector<std::string> args{verb};
        auto end = std::min(channels.size(), at + kChannelsPerCommand);
        args.insert(args.end(), channels.begin() + static_cast<std::ptrdiff_t>(at),
                    channels.begin() + static_cast<std::ptrdiff_t>(end));
        append(ctx, args);
    }
}

}  // namespace

namespace {

ReaderOptions reader_options(const FeedOptions& o) {
    ReaderOptions r;
    r.readers = o.readers;
    r.connect_timeout = o.connect_timeout;
    r.command_timeout = o.command_timeout;
    return r;
}

}  // namespace

Feed::Feed(publish::RedisAddress address, FeedEvents events, FeedOptions options)
    : address_(std::move(address)), events_(std::move(events)), options_(options),
      readers_(address_, std::nullopt, display(), reader_options(options)) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) throw Error(std::string("eventfd: ") + std::strerror(errno));
}

Feed::Feed(publish::RedisClusterAddress cluster, FeedEvents events, FeedOptions options)
    : address_(cluster.seeds.front()), cluster_address_(std::move(cluster)), events_(std::move(events)), options_(options),
      readers_(address_, cluster_address_, display(), reader_options(options)) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) throw Error(std::string("eventfd: ") + std::strerror(errno));
}

Feed::~Feed() {
    stop();
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Feed::start() {
    readers_.start();
    subscriber_ = std::thread([this] { subscriber_loop(); });
}

void Feed::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    stop_cv_.notify_all();
    wake();
    if (subscriber_.joinable()) subscriber_.join();
    readers_.stop();  // answers what it never ran, so that no caller waits forever
}

bool Feed::stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
}

void Feed::wake() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void Feed::set_following(const std::string& channel, bool follow) {
    {
        std::lock_guard lock(mutex_);
        if (follow) {
            renewed_.insert(channel);
            wanted_.insert(channel);
        } else if (wanted_.erase(channel) == 0) {
            return;
        }
    }
    wake();
}

void Feed::read(const std::string& channel, std::function<void(FeedRead)> done) {
    std::string key = cluster_address_ ? publish::cluster_key(channel) : channel;
    readers_.run({"GET", key}, key, std::move(done));
}

void Feed::announce(const std::string& channel, bool warm) {
    std::string verb = warm ? publish::kWarmChannel : publish::kTouchChannel;
    // PUBLISH routes by its channel on a cluster (classic pub/sub reaches every node).
    readers_.run({"PUBLISH", verb, channel}, verb, [verb, channel](FeedRead r) {
        if (!r.ok) log_warning("gateway", "PUBLISH " + verb + " " + channel.substr(0, 200) + " failed: " + r.error);
    });
}

void Feed::probe(std::chrono::milliseconds timeout, std::function<void(FeedRead)> done) {
    readers_.probe(timeout, std::move(done));
}

void Feed::subscriber_loop() {
    auto backoff = kInitialBackoff;
    bool reported = false;
    while (!stopping()) {
        try {
            if (cluster_address_) cluster_subscribe_once();
            else subscribe_once();
        } catch (const std::exception& e) {
            if (up_.exchange(false)) {
                backoff = kInitialBackoff;
                reported = false;
                if (events_.state) events_.state(false);
            }
            if (!reported) log_warning("gateway", std::string("subscriber: ") + e.what() + "; reconnecting with backoff");
            reported = true;
        }
        std::unique_lock lock(mutex_);
        if (stop_cv_.wait_for(lock, backoff, [&] { return stopping_; })) return;
        backoff = std::min(backoff * 2, options_.max_backoff);
    }
}

std::set<std::string> Feed::wanted() const {
    std::lock_guard lock(mutex_);
    return wanted_;
}

std::set<std::string> Feed::take_renewed() {
    std::lock_guard lock(mutex_);
    std::set<std::string> out;
    out.swap(renewed_);
    return out;
}

void Feed::wait(std::vector<pollfd>& fds, int ms) {
    fds.push_back({wake_fd_, POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), std::clamp(ms, 10, 1000));
    if (rc < 0 && errno != EINTR) throw Error(std::string("poll failed: ") + std::strerror(errno), {}, true);
    if (fds.back().revents & POLLIN) {
        std::uint64_t n;
        [[maybe_unused]] auto r = ::read(wake_fd_, &n, sizeof n);
    }
    fds.pop_back();
}

bool Feed::dispatch(const Reply& reply, bool& pong) {
    if (reply->type == REDIS_REPLY_ERROR) throw Error(display() + " answered " + reply_text(reply.get()), {}, true);
    // A connection subscribed to nothing answers PING with a plain PONG, not the subscriber's array.
    if (reply->type == REDIS_REPLY_STATUS && reply_text(reply.get()) == "PONG") {
        pong = true;
        return true;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) return true;
    std::string kind = reply_text(reply->element[0]);
    if (kind == "pong") {
        pong = true;
        return true;
    }
    if ((kind == "message" || kind == "smessage") && reply->elements >= 3) {
        std::string channel(publish::channel_of_cluster_key(reply_text(reply->element[1])));
        if (events_.message) events_.message(channel, reply_text(reply->element[2]));
        return true;
    }
    if (kind == "subscribe" || kind == "ssubscribe") {
        std::string channel(publish::channel_of_cluster_key(reply_text(reply->element[1])));
        // A confirmation for a channel dropped meanwhile is not reported: its unsubscribe follows.
        bool still = false;
        {
            std::lock_guard lock(mutex_);
            still = wanted_.count(channel) > 0;
        }
        if (still && events_.subscribed) events_.subscribed(channel);
        return true;
    }
    return kind != "sunsubscribe";
}

// One connection's life: subscribe to what is wanted, keep the subscriptions in line with it and
// dispatch messages, until stopping (returns) or the connection fails (throws).
void Feed::subscribe_once() {
    auto conn = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
    redisContext* ctx = conn->context();
    std::set<std::string> sent;  // channels SUBSCRIBE was sent for on this connection
    using clock = std::chrono::steady_clock;
    auto last_ping = clock::now() - options_.ping_interval;  // the first PING goes out with the subscriptions
    UnansweredPing ping_unanswered;
    bool announced_up = false;  // up once the connection answered: a frozen Redis still takes connects
    while (!stopping()) {
        // Bring the subscriptions in line with what is wanted.
        auto renewed = take_renewed();
        auto want = wanted();
        for (const auto& c : renewed)
            if (sent.count(c) && want.count(c) && events_.subscribed) events_.subscribed(c);
        std::vector<std::string> add, drop;
        std::set_difference(want.begin(), want.end(), sent.begin(), sent.end(), std::back_inserter(add));
        std::set_difference(sent.begin(), sent.end(), want.begin(), want.end(), std::back_inserter(drop));
        append_chunked(ctx, "SUBSCRIBE", add);
        append_chunked(ctx, "UNSUBSCRIBE", drop);
        sent.insert(add.begin(), add.end());
        for (const auto& c : drop) sent.erase(c);
        auto now = clock::now();
        if (now - last_ping >= options_.ping_interval) {
            if (ping_unanswered.older_than(now, 2 * options_.ping_interval))
                throw Error(display() + " did not answer PING for " +
                                std::to_string(2 * options_.ping_interval.count()) + " ms",
                            {}, true);
            append(ctx, {"PING"});
            ping_unanswered.sent(now);
            last_ping = now;
        }
        flush(ctx);

        std::vector<pollfd> fds{{ctx->fd, POLLIN, 0}};
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(options_.ping_interval - (clock::now() - last_ping));
        wait(fds, static_cast<int>(left.count()));
        if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (redisBufferRead(ctx) != REDIS_OK) throw Error("lost the connection to " + display() + ": " + ctx->errstr, {}, true);
        for (;;) {
            void* raw = nullptr;
            if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK)
                throw Error(std::string("bad reply from ") + display() + ": " + ctx->errstr, {}, true);
            if (!raw) break;
            bool pong = false;
            dispatch(Reply(static_cast<redisReply*>(raw)), pong);
            if (pong) ping_unanswered.answered();
            if (!announced_up) {
                // Connected, answering, and every wanted channel asked for; each reports
                // `subscribed` as Redis confirms.
                announced_up = true;
                if (!up_.exchange(true)) {
                    log_info("gateway", "subscriber connected to " + display());
                    if (events_.state) events_.state(true);
                }
            }
        }
    }
}

namespace {

// One master's subscriber connection, and the channels SSUBSCRIBE was sent for on it.
struct Link {
    std::unique_ptr<RedisConnection> conn;
    std::set<std::string> sent;
    std::chrono::steady_clock::time_point last_ping{};
    UnansweredPing ping_unanswered;
    bool answered = false;  // a reply came: a frozen master still takes connects and writes
};

}  // namespace

// The cluster's subscriber: a connection per master that serves a followed channel's slot. Returns
// when stopping; throws when the cluster cannot be reached at all.
void Feed::cluster_subscribe_once() {
    using clock = std::chrono::steady_clock;
    publish::ClusterOptions o;
    o.connect_timeout = options_.connect_timeout;
    o.command_timeout = options_.command_timeout;
    publish::ClusterClient client(*cluster_address_, o);
    std::map<std::string, Link> links;  // by master endpoint
    bool refresh = false;
    auto backoff = kInitialBackoff;
    auto map_checked = clock::now();
    while (!stopping()) {
        if (!links.empty() && clock::now() - map_checked >= kClusterMapCheck) refresh = true;
        if (refresh) {
            client.refresh(true);  // throws when no node answers: the outer loop backs off
            refresh = false;
            map_checked = clock::now();
        }
        auto map = client.map();
        auto renewed = take_renewed();
        auto want = wanted();
        // Where each wanted channel lives now.
        std::map<std::string, std::set<std::string>> placed;
        std::map<std::string, const publish::ClusterNode*> masters;
        bool unplaced = false;
        for (const auto& channel : want) {
            const publish::ClusterNode* master = map->master_of(publish::key_slot(publish::cluster_key(channel)));
            if (!master) {
                unplaced = true;  // no master serves the slot now (failing over): ask the map again
                continue;
            }
            placed[master->endpoint()].insert(channel);
            masters[master->endpoint()] = master;
        }
        // Links to masters that serve nothing wanted are closed; the others subscribe the difference.
        for (auto it = links.begin(); it != links.end();)
            it = placed.count(it->first) ? std::next(it) : links.erase(it);
        bool failed = false;
        auto now = clock::now();
        for (auto& [endpoint, channels] : placed) {
            Link& link = links[endpoint];
            try {
                if (!link.conn) {
                    publish::RedisAddress at = cluster_address_->seeds.front();
                    at.host = masters[endpoint]->host;
                    at.port = masters[endpoint]->port;
                    at.db = 0;
                    // Its first PING goes out with the subscriptions: the link is up once answered.
                    link.conn = RedisConnection::connect(at, options_.connect_timeout, options_.command_timeout);
                }
                redisContext* ctx = link.conn->context();
                // One channel per command: every channel of a SSUBSCRIBE must hash to one slot.
                for (const auto& c : channels)
                    if (!link.sent.count(c)) append(ctx, {"SSUBSCRIBE", publish::cluster_key(c)});
                    else if (renewed.count(c) && events_.subscribed) events_.subscribed(c);
                for (const auto& c : link.sent)
                    if (!channels.count(c)) append(ctx, {"SUNSUBSCRIBE", publish::cluster_key(c)});
                link.sent = channels;
                if (now - link.last_ping >= options_.ping_interval) {
                    if (link.ping_unanswered.older_than(now, 2 * options_.ping_interval))
                        throw Error(endpoint + " did not answer PING for " +
                                        std::to_string(2 * options_.ping_interval.count()) + " ms", {}, true);
                    append(ctx, {"PING"});
                    link.ping_unanswered.sent(now);
                    link.last_ping = now;
                }
                flush(ctx);
            } catch (const std::exception& e) {
                log_warning("gateway", "subscriber on " + endpoint + ": " + e.what() + "; following its slots elsewhere");
                links.erase(endpoint);
                failed = true;
            }
        }
        // Down, it comes up only once every link answered (a link remade to a frozen master has
        // not); up, a new link not yet answered keeps it up: its PING timeout fails it soon enough.
        bool answering = std::all_of(links.begin(), links.end(), [](const auto& l) { return l.second.answered; });
        bool healthy = !failed && !unplaced && (up_ || answering);
        if (healthy && !up_.exchange(true)) {
            log_info("gateway", "subscriber connected to " + display());
            if (events_.state) events_.state(true);
        } else if (!healthy && up_.exchange(false)) {
            if (events_.state) events_.state(false);
        }
        if (failed || unplaced) {
            // A master gone: the map changes once a replica is promoted. Ask again, backing off.
            refresh = true;
            std::vector<pollfd> none;
            wait(none, static_cast<int>(backoff.count()));
            backoff = std::min(backoff * 2, options_.max_backoff);
            continue;
        }
        backoff = kInitialBackoff;

        std::vector<pollfd> fds;
        std::vector<std::string> order;
        for (auto& [endpoint, link] : links) {
            fds.push_back({link.conn->context()->fd, POLLIN, 0});
            order.push_back(endpoint);
        }
        wait(fds, static_cast<int>(options_.ping_interval.count()));
        for (std::size_t i = 0; i < fds.size(); ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            Link& link = links[order[i]];
            redisContext* ctx = link.conn->context();
            try {
                if (redisBufferRead(ctx) != REDIS_OK) throw Error(std::string("lost the connection: ") + ctx->errstr, {}, true);
                for (;;) {
                    void* raw = nullptr;
                    if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK)
                        throw Error(std::string("bad reply: ") + ctx->errstr, {}, true);
                    if (!raw) break;
                    Reply reply(static_cast<redisReply*>(raw));
                    link.answered = true;
                    if (reply->type == REDIS_REPLY_ERROR) {
                        // MOVED for a SSUBSCRIBE: the slot lives elsewhere now.
                        auto redirect = publish::parse_redirect(reply_text(reply.get()));
                        if (!redirect) throw Error("answered " + reply_text(reply.get()), {}, true);
                        for (auto it = link.sent.begin(); it != link.sent.end();)
                            it = publish::key_slot(publish::cluster_key(*it)) == redirect->slot ? link.sent.erase(it) : std::next(it);
                        refresh = true;
                        continue;
                    }
                    bool pong = false;
                    if (!dispatch(reply, pong)) {
                        // An unasked sunsubscribe: the slot moved (resharding). Subscribe where it went.
                        std::string channel(publish::channel_of_cluster_key(reply_text(reply->element[1])));
                        if (link.sent.erase(channel)) refresh = true;
                    }
                    if (pong) link.ping_unanswered.answered();
                }
            } catch (const std::exception& e) {
                log_warning("gateway", "subscriber on " + order[i] + ": " + e.what() + "; following its slots elsewhere");
                links.erase(order[i]);
                refresh = true;
            }
        }
    }
}

}  // namespace docsync::gateway
