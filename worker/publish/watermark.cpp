// docsync:watermark: the acknowledged position, kept in Redis by one coalescing thread.
#include "publish/watermark.hpp"

#include <algorithm>
#include <csignal>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync::publish {

namespace {

// KEYS[1] docsync:watermark; ARGV[1] the new position as pg_lsn prints it (X/X, hex).
// Positions compare as (high, low) 32-bit halves, each exact as a Lua number, never as text
// ("9/0" < "10/0"). A value that is not a position (set by hand) is replaced.
// Returns 1 when the key was set and the position published, 0 when it held one at least as new.
constexpr const char* kScript = R"LUA(local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('DOCSYNC key ' .. KEYS[1] .. ' holds a ' .. kind ..
    ', not a docsync watermark: the key belongs to docsync')
end
local function position(text)
  local h, l = string.match(text, '^(%x+)/(%x+)$')
  if h then return tonumber(h, 16), tonumber(l, 16) end
end
local nh, nl = position(ARGV[1])
if not nh then return redis.error_reply('DOCSYNC not a WAL position: ' .. ARGV[1]) end
if kind == 'string' then
  local oh, ol = position(redis.call('GET', KEYS[1]))
  if oh and (nh < oh or (nh == oh and nl <= ol)) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1
)LUA";

constexpr const char* kComponent = "publish";

// WAL pages (8 kB) start with a header that no record ends in: 24 bytes, 40 on a segment's first
// page. After a record that filled its page, pg_current_wal_insert_lsn() points past that header,
// while the record (and so the acknowledgement) ends at the page's start. A position at a page's
// start is written 40 bytes on, where a client's target is then reached: no record ends within
// those bytes either (the next one starts after the header and is 24 bytes at least), so both
// positions are passed by the same transactions.
constexpr Lsn kWalPage = 8192;
constexpr Lsn kLongPageHeader = 40;

Lsn watermark_position(Lsn lsn) { return lsn != 0 && lsn % kWalPage == 0 ? lsn + kLongPageHeader : lsn; }

}  // namespace

const char* RedisWatermark::script() { return kScript; }

RedisWatermark::RedisWatermark(RedisAddress address, Acknowledger& next, WatermarkOptions options)
    : address_(std::move(address)), next_(next), options_(options) {
    std::signal(SIGPIPE, SIG_IGN);  // a write to a socket Redis closed must be an error, not the end
    thread_ = std::thread([this] { run(); });
}

RedisWatermark::~RedisWatermark() { stop(); }

void RedisWatermark::acknowledge(Lsn lsn) {
    next_.acknowledge(lsn);
    {
        std::lock_guard lock(mutex_);
        if (lsn <= latest_) return;
        latest_ = lsn;
    }
    wake_.notify_one();
}

void RedisWatermark::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

Lsn RedisWatermark::published() const {
    std::lock_guard lock(mutex_);
    return published_;
}

std::uint64_t RedisWatermark::updates() const {
    std::lock_guard lock(mutex_);
    return updates_;
}

void RedisWatermark::send(Lsn lsn) {
    try {
        if (!conn_) {
            conn_ = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
            script_sha_.clear();
        }
        if (script_sha_.empty()) {
            Reply loaded = conn_->command({"SCRIPT", "LOAD", kScript});
            if (loaded->type != REDIS_REPLY_STRING)
                throw Error("Redis at " + address_.display() + " refused the watermark script: " +
                                reply_text(loaded.get()),
                            {}, true);
            script_sha_ = reply_text(loaded.get());
        }
        std::string text = format_lsn(watermark_position(lsn));
        Reply reply = conn_->command({"EVALSHA", script_sha_, "1", kWatermarkKey, text});
        // Redis restarted between two updates, or SCRIPT FLUSH: send the script itself, which caches it.
        if (reply->type == REDIS_REPLY_ERROR && reply_text(reply.get()).rfind("NOSCRIPT", 0) == 0)
            reply = conn_->command({"EVAL", kScript, "1", kWatermarkKey, text});
        if (reply->type != REDIS_REPLY_INTEGER)
            throw Error("Redis at " + address_.display() + " answered the update to " + text + " with " +
                            reply_text(reply.get()),
                        {}, true);
    } catch (const std::exception&) {
        conn_.reset();
        throw;
    }
}

void RedisWatermark::run() {
    auto backoff = options_.initial_backoff;
    bool down = false;  // an outage is logged once, and its end once
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stopping_ || latest_ > published_; });
        // Stopping: one last update over a live connection, never a reconnect that would delay the exit.
        if (stopping_ && (latest_ <= published_ || !conn_)) return;
        bool last = stopping_;
        Lsn lsn = latest_;
        lock.unlock();
        std::string error;
        try {
            send(lsn);
        } catch (const std::exception& e) {
            error = e.what();
        }
        lock.lock();
        if (error.empty()) {
            published_ = std::max(published_, lsn);
            ++updates_;
            backoff = options_.initial_backoff;
            if (down)
                log_info(kComponent, std::string(kWatermarkKey) + " is written again, at " +
                                         format_lsn(watermark_position(lsn)));
            down = false;
        } else {
            if (!down)
                log_warning(kComponent, std::string("could not update ") + kWatermarkKey + ": " + error +
                                            "; retrying with backoff (docs and acknowledgements go on)");
            down = true;
            if (last) return;
            wake_.wait_for(lock, backoff, [this] { return stopping_; });
            backoff = std::min(backoff * 2, options_.max_backoff);
        }
        if (last) return;
    }
}

}  // namespace docsync::publish
