// The liveness poller (PUBSUB CHANNELS db:*) and the warm/touch listener.
#include "publish/liveness.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync::publish {

namespace {

constexpr std::chrono::milliseconds kInitialBackoff{100};
constexpr int kListenTick = 200;  // ms between checks of the stop flag while listening

bool is_doc_channel(std::string_view channel) { return channel.size() > 3 && channel.substr(0, 3) == "db:"; }

std::vector<std::string> array_of_strings(const Reply& reply, std::string_view what) {
    if (kind_of(reply) != ReplyKind::Array) throw refused(std::string(what) + " answered " + reply_text(reply.get()));
    std::vector<std::string> out;
    out.reserve(reply->elements);
    for (std::size_t i = 0; i < reply->elements; ++i)
        if (kind_of(reply->element[i]) == ReplyKind::String)
            out.emplace_back(channel_of_cluster_key(reply_text(reply->element[i])));
    return out;
}

}  // namespace

RedisLiveness::RedisLiveness(RedisClusterAddress cluster, LivenessCallbacks callbacks, LivenessOptions options)
    : RedisLiveness(cluster.seeds.front(), std::move(callbacks), options) {
    cluster_address_ = std::move(cluster);
}

std::string RedisLiveness::display() const {
    return cluster_address_ ? cluster_address_->display() : "Redis at " + address_.display();
}

std::vector<std::string> RedisLiveness::subscribed_channels(std::unique_ptr<RedisConnection>& conn) {
    if (!cluster_address_) {
        if (!conn) conn = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
        return array_of_strings(conn->command({"PUBSUB", "CHANNELS", "db:*"}), "PUBSUB CHANNELS");
    }
    if (!cluster_) {
        cluster_ = std::make_unique<ClusterClient>(*cluster_address_, cluster_options());
    } else {
        cluster_->refresh(true);
    }
    std::vector<std::string> channels;
    auto map = cluster_->map();
    for (const auto& node : map->nodes) {
        if (!node.healthy) continue;  // a failed node's subscribers are gone with it
        auto some = array_of_strings(cluster_->on_node(node, {"PUBSUB", "SHARDCHANNELS", "{db:*"}),
                                     "PUBSUB SHARDCHANNELS on " + node.endpoint());
        channels.insert(channels.end(), some.begin(), some.end());
    }
    std::sort(channels.begin(), channels.end());
    channels.erase(std::unique(channels.begin(), channels.end()), channels.end());
    return channels;
}

std::unique_ptr<RedisConnection> RedisLiveness::connect_listener() {
    if (!cluster_address_) return RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
    // A node of the seeds, or of a map of the listener's own: not the poller's client, which is its thread's.
    std::string errors;
    for (const auto& seed : cluster_address_->seeds) {
        try {
            return RedisConnection::connect(seed, options_.connect_timeout, options_.command_timeout);
        } catch (const Error& e) {
            errors += (errors.empty() ? "" : "; ") + std::string(e.what());
        }
    }
    return ClusterClient(*cluster_address_, cluster_options()).connect_any();
}

ClusterOptions RedisLiveness::cluster_options() const {
    ClusterOptions o;
    o.connect_timeout = options_.connect_timeout;
    o.command_timeout = options_.command_timeout;
    return o;
}

RedisLiveness::RedisLiveness(RedisAddress address, LivenessCallbacks callbacks, LivenessOptions options)
    : address_(std::move(address)), callbacks_(std::move(callbacks)), options_(options) {
    if ((options_.poll_subscribers && !callbacks_.sync_live) || !callbacks_.warm || !callbacks_.touch)
        throw Error("RedisLiveness needs the warm and touch callbacks, and sync_live when it polls");
}

RedisLiveness::~RedisLiveness() { stop(); }

void RedisLiveness::start() {
    std::lock_guard lock(mutex_);
    if (listener_.joinable() || stopping_) return;
    if (options_.poll_subscribers) poller_ = std::thread([this] { poll_loop(); });
    listener_ = std::thread([this] { listen_loop(); });
}

void RedisLiveness::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    stop_cv_.notify_all();
    if (poller_.joinable()) poller_.join();
    if (listener_.joinable()) listener_.join();
}

bool RedisLiveness::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mutex_);
    stop_cv_.wait_for(lock, d, [this] { return stopping_; });
    return !stopping_;
}

void RedisLiveness::poll_loop() {
    std::unique_ptr<RedisConnection> conn;
    auto backoff = kInitialBackoff;
    bool reported_down = false;
    do {
        auto started = std::chrono::steady_clock::now();
        try {
            auto channels = subscribed_channels(conn);
            ++polls_;
            if (reported_down) log_info("publish", "liveness poll of " + display() + " works again");
            reported_down = false;
            backoff = kInitialBackoff;
            callbacks_.sync_live(channels, true);
        } catch (const std::exception& e) {
            conn.reset();
            ++failed_polls_;
            if (!reported_down)
                log_warning("publish", std::string("liveness poll failed (live docs are kept): ") + e.what());
            reported_down = true;
            try {
                callbacks_.sync_live({}, false);
            } catch (const std::exception& inner) {
                log_error("publish", std::string("sync_live failed: ") + inner.what());
            }
            if (!sleep_for(backoff)) break;
            backoff = std::min(backoff * 2, options_.max_backoff);
            continue;
        }
        auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
        if (!sleep_for(std::max(std::chrono::milliseconds(0), options_.poll_interval - elapsed))) break;
    } while (true);
}

void RedisLiveness::listen_loop() {
    auto backoff = kInitialBackoff;
    bool reported = false;  // one line per outage
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return;
        }
        try {
            listen_once();
            return;  // stopping
        } catch (const std::exception& e) {
            if (listening_.exchange(false)) {
                backoff = kInitialBackoff;
                reported = false;
            }
            if (!reported)
                log_warning("publish", std::string("warm/touch listener: ") + e.what() + "; reconnecting with backoff");
            reported = true;
        }
        if (!sleep_for(backoff)) return;
        backoff = std::min(backoff * 2, options_.max_backoff);
    }
}

// One connection's life: subscribe, then dispatch messages until stopping (returns) or the
// connection fails (throws).
void RedisLiveness::listen_once() {
    auto conn = connect_listener();
    redisContext* ctx = conn->context();
    const char* argv[] = {"SUBSCRIBE", kWarmChannel, kTouchChannel};
    if (redisAppendCommandArgv(ctx, 3, argv, nullptr) != REDIS_OK)
        throw unreachable(std::string("cannot subscribe: ") + ctx->errstr);
    int done = 0;
    while (!done) {
        if (redisBufferWrite(ctx, &done) != REDIS_OK) throw unreachable(std::string("cannot subscribe: ") + ctx->errstr);
    }
    for (;;) {
        void* raw = nullptr;
        if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK)
            throw unreachable(std::string("bad reply from Redis: ") + ctx->errstr);
        if (raw != nullptr) {
            Reply reply(static_cast<redisReply*>(raw));
            if (kind_of(reply) != ReplyKind::Array || reply->elements < 3) continue;
            std::string kind = reply_text(reply->element[0]);
            if (kind == "subscribe") {
                if (!listening_.exchange(true))
                    log_info("publish", "listening on docsync:warm and docsync:touch at " + display());
                continue;
            }
            if (kind != "message") continue;
            std::string on = reply_text(reply->element[1]);
            std::string channel(channel_of_cluster_key(reply_text(reply->element[2])));
            if (!is_doc_channel(channel)) {
                log_warning("publish", "ignored a message on " + on + ": the payload must be a db: channel, not '" +
                                           channel.substr(0, 80) + "'");
                continue;
            }
            try {
                if (on == kWarmChannel)
                    callbacks_.warm(channel);
                else if (on == kTouchChannel)
                    callbacks_.touch(channel);
            } catch (const std::exception& e) {
                log_error("publish", "handling " + on + " " + channel + " failed: " + e.what());
            }
            continue;
        }
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return;
        }
        pollfd pfd{ctx->fd, POLLIN, 0};
        int rc = ::poll(&pfd, 1, kListenTick);
        if (rc < 0 && errno != EINTR) throw unreachable(std::string("poll failed: ") + std::strerror(errno));
        if (rc > 0 && redisBufferRead(ctx) != REDIS_OK)
            throw unreachable("lost the connection to " + display() + ": " + ctx->errstr);
    }
}

}  // namespace docsync::publish
