// The subscriber and reader threads of the gateway's Redis side.
#include "gateway/feed.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/log.hpp"
#include "publish/liveness.hpp"

namespace docsync::gateway {

using publish::Reply;
using publish::RedisConnection;
using publish::reply_text;

namespace {

constexpr std::chrono::milliseconds kInitialBackoff{100};
constexpr std::size_t kChannelsPerCommand = 256;  // SUBSCRIBE / UNSUBSCRIBE arguments per command

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

Feed::Feed(publish::RedisAddress address, FeedEvents events, FeedOptions options)
    : address_(std::move(address)), events_(std::move(events)), options_(options) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) throw Error(std::string("eventfd: ") + std::strerror(errno));
}

Feed::~Feed() {
    stop();
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Feed::start() {
    subscriber_ = std::thread([this] { subscriber_loop(); });
    for (unsigned i = 0; i < std::max(1u, options_.readers); ++i) readers_.emplace_back([this] { reader_loop(); });
}

void Feed::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ && !subscriber_.joinable()) return;
        stopping_ = true;
    }
    jobs_cv_.notify_all();
    stop_cv_.notify_all();
    wake();
    if (subscriber_.joinable()) subscriber_.join();
    for (auto& t : readers_)
        if (t.joinable()) t.join();
    readers_.clear();
    // Jobs never run are answered, so that no caller waits forever.
    std::deque<Job> left;
    {
        std::lock_guard lock(mutex_);
        left.swap(jobs_);
    }
    for (auto& job : left)
        if (job.done) job.done(FeedRead{false, std::nullopt, "the gateway is stopping"});
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
        if (follow ? !wanted_.insert(channel).second : wanted_.erase(channel) == 0) return;
    }
    wake();
}

void Feed::read(const std::string& channel, std::function<void(FeedRead)> done) {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            jobs_.push_back(Job{{"GET", channel}, std::move(done)});
            jobs_cv_.notify_one();
            return;
        }
    }
    done(FeedRead{false, std::nullopt, "the gateway is stopping"});
}

void Feed::announce(const std::string& channel, bool warm) {
    std::string verb = warm ? publish::kWarmChannel : publish::kTouchChannel;
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    jobs_.push_back(Job{{"PUBLISH", verb, channel}, [verb, channel](FeedRead r) {
                            if (!r.ok) log_warning("gateway", "PUBLISH " + verb + " " + channel + " failed: " + r.error);
                        }});
    jobs_cv_.notify_one();
}

void Feed::reader_loop() {
    std::unique_ptr<RedisConnection> conn;
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            jobs_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
            if (stopping_) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        run_job(conn, job);
    }
}

void Feed::run_job(std::unique_ptr<RedisConnection>& conn, Job& job) {
    FeedRead result;
    // One attempt on a pooled connection that may have died idle, then one on a fresh one.
    for (int attempt = 0; attempt < 2; ++attempt) {
        bool fresh = !conn;
        try {
            if (!conn) conn = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
            std::vector<std::string_view> args(job.args.begin(), job.args.end());
            Reply reply = conn->command(args);
            if (reply->type == REDIS_REPLY_ERROR) {
                result.error = display() + " answered " + reply_text(reply.get());
            } else {
                result.ok = true;
                if (reply->type == REDIS_REPLY_STRING) result.value = reply_text(reply.get());
            }
            break;
        } catch (const std::exception& e) {
            conn.reset();
            result.error = e.what();
            if (fresh) break;
        }
    }
    if (job.done) job.done(std::move(result));
}

void Feed::subscriber_loop() {
    auto backoff = kInitialBackoff;
    bool reported = false;
    while (!stopping()) {
        try {
            subscribe_once();
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

// One connection's life: subscribe to what is wanted, keep the subscriptions in line with it and
// dispatch messages, until stopping (returns) or the connection fails (throws).
void Feed::subscribe_once() {
    auto conn = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
    redisContext* ctx = conn->context();
    std::set<std::string> sent;  // channels SUBSCRIBE was sent for on this connection
    using clock = std::chrono::steady_clock;
    auto last_ping = clock::now();
    std::optional<clock::time_point> ping_unanswered;
    bool announced_up = false;
    for (;;) {
        // Bring the subscriptions in line with what is wanted.
        std::vector<std::string> add, drop;
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return;
            std::set_difference(wanted_.begin(), wanted_.end(), sent.begin(), sent.end(), std::back_inserter(add));
            std::set_difference(sent.begin(), sent.end(), wanted_.begin(), wanted_.end(), std::back_inserter(drop));
        }
        append_chunked(ctx, "SUBSCRIBE", add);
        append_chunked(ctx, "UNSUBSCRIBE", drop);
        sent.insert(add.begin(), add.end());
        for (const auto& c : drop) sent.erase(c);
        auto now = clock::now();
        if (now - last_ping >= options_.ping_interval) {
            if (ping_unanswered && now - *ping_unanswered >= 2 * options_.ping_interval)
                throw Error(display() + " did not answer PING for " +
                                std::to_string(2 * options_.ping_interval.count()) + " ms",
                            {}, true);
            append(ctx, {"PING"});
            if (!ping_unanswered) ping_unanswered = now;
            last_ping = now;
        }
        flush(ctx);
        if (!announced_up) {
            // Connected and every wanted channel asked for; each reports `subscribed` as Redis confirms.
            announced_up = true;
            if (!up_.exchange(true)) {
                log_info("gateway", "subscriber connected to " + display());
                if (events_.state) events_.state(true);
            }
        }

        pollfd fds[2] = {{ctx->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(options_.ping_interval - (clock::now() - last_ping));
        int rc = ::poll(fds, 2, static_cast<int>(std::clamp<long long>(wait.count(), 10, 1000)));
        if (rc < 0 && errno != EINTR) throw Error(std::string("poll failed: ") + std::strerror(errno), {}, true);
        if (rc <= 0) continue;
        if (fds[1].revents & POLLIN) {
            std::uint64_t n;
            [[maybe_unused]] auto r = ::read(wake_fd_, &n, sizeof n);
        }
        if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (redisBufferRead(ctx) != REDIS_OK) throw Error("lost the connection to " + display() + ": " + ctx->errstr, {}, true);
        for (;;) {
            void* raw = nullptr;
            if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK)
                throw Error(std::string("bad reply from ") + display() + ": " + ctx->errstr, {}, true);
            if (!raw) break;
            Reply reply(static_cast<redisReply*>(raw));
            if (reply->type == REDIS_REPLY_ERROR) throw Error(display() + " answered " + reply_text(reply.get()), {}, true);
            if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) continue;
            std::string kind = reply_text(reply->element[0]);
            if (kind == "pong") {
                ping_unanswered.reset();
            } else if (kind == "message" && reply->elements >= 3) {
                if (events_.message) events_.message(reply_text(reply->element[1]), reply_text(reply->element[2]));
            } else if (kind == "subscribe") {
                std::string channel = reply_text(reply->element[1]);
                // A confirmation for a channel dropped meanwhile is not reported: its UNSUBSCRIBE follows.
                bool still = false;
                {
                    std::lock_guard lock(mutex_);
                    still = wanted_.count(channel) > 0;
                }
                if (still && events_.subscribed) events_.subscribed(channel);
            }
        }
    }
}

}  // namespace docsync::gateway
