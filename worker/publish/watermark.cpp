// docsync:watermark: the acknowledged position, kept in Redis by one coalescing thread.
#include "publish/watermark.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync::publish {

namespace {

// KEYS[1] docsync:watermark, KEYS[2] docsync:watermark_generation; ARGV[1] the new position as
// pg_lsn prints it (X/X, hex), ARGV[2] its generation (decimal). Positions compare as (high, low)
// 32-bit halves, each exact as a Lua number, never as text ("9/0" < "10/0"); a greater generation
// wins whatever its position. A value that is not a position or a generation (set by hand) is
// replaced. Returns 1 when the keys were set and the position published, 0 when they held a pair at
// least as new. This is the script up to the publish: script_of() adds the PUBLISH (SPUBLISH on a
// cluster) and the return.
constexpr const char* kScript = R"LUA(for i = 1, 2 do
  local kind = redis.call('TYPE', KEYS[i]).ok
  if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('DOCSYNC key ' .. KEYS[i] .. ' holds a ' .. kind ..
      ', not a docsync watermark: the key belongs to docsync')
  end
end
local function position(text)
  if not text then return nil end
  local h, l = string.match(text, '^(%x+)/(%x+)$')
  if h then return tonumber(h, 16), tonumber(l, 16) end
end
local nh, nl = position(ARGV[1])
if not nh then return redis.error_reply('DOCSYNC not a WAL position: ' .. ARGV[1]) end
local ng = tonumber(ARGV[2])
if not ng then return redis.error_reply('DOCSYNC not a generation: ' .. ARGV[2]) end
local og = tonumber(redis.call('GET', KEYS[2]) or '') or 0
if ng < og then return 0 end
if ng == og then
  local oh, ol = position(redis.call('GET', KEYS[1]) or nil)
  if oh and (nh < oh or (nh == oh and nl <= ol)) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
)LUA";

// The single node's script PUBLISHes; a cluster's SPUBLISHes on the keys' own slot.
const std::string& script_of(bool cluster) {
    static const std::string single = std::string(kScript) + "redis.call('PUBLISH', KEYS[1], ARGV[1])\nreturn 1\n";
    static const std::string sharded = std::string(kScript) + "redis.call('SPUBLISH', KEYS[1], ARGV[1])\nreturn 1\n";
    return cluster ? sharded : single;
}

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

const char* RedisWatermark::script() { return script_of(false).c_str(); }

RedisWatermark::RedisWatermark(RedisAddress address, Acknowledger& next, WatermarkOptions options,
                               std::function<bool()> holding)
    : address_(std::move(address)), next_(next), options_(options), holding_(std::move(holding)) {
    thread_ = std::thread([this] { run(); });
}

RedisWatermark::RedisWatermark(RedisClusterAddress cluster, Acknowledger& next, WatermarkOptions options,
                               std::function<bool()> holding)
    : address_(cluster.seeds.front()),
      cluster_address_(std::move(cluster)),
      next_(next),
      options_(options),
      holding_(std::move(holding)) {
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

void RedisWatermark::set_generation(std::uint64_t generation) {
    {
        std::lock_guard lock(mutex_);
        if (generation <= generation_) return;
        generation_ = generation;
        restart_ = true;
        latest_ = 0;
        published_ = 0;
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

void RedisWatermark::send(std::uint64_t generation, Lsn lsn) {
    std::string text = format_lsn(watermark_position(lsn));
    std::string gen = std::to_string(generation);
    if (cluster_address_) {
        send_to_cluster(text, gen);
        return;
    }
    const std::string& script = script_of(false);
    try {
        if (!conn_) {
            conn_ = RedisConnection::connect(address_, options_.connect_timeout, options_.command_timeout);
            script_sha_.clear();
        }
        if (script_sha_.empty()) {
            Reply loaded = conn_->command({"SCRIPT", "LOAD", script});
            if (kind_of(loaded) != ReplyKind::String)
                throw refused("Redis at " + address_.display() + " refused the watermark script: " +
                              reply_text(loaded.get()));
            script_sha_ = reply_text(loaded.get());
        }
        Reply reply = conn_->command({"EVALSHA", script_sha_, "2", kWatermarkKey, kWatermarkGenerationKey, text, gen});
        // Redis restarted between two updates, or SCRIPT FLUSH: send the script itself, which caches it.
        if (is_error(reply, "NOSCRIPT"))
            reply = conn_->command({"EVAL", script, "2", kWatermarkKey, kWatermarkGenerationKey, text, gen});
        if (kind_of(reply) != ReplyKind::Integer)
            throw refused("Redis at " + address_.display() + " answered the update to " + text + " with " +
                          reply_text(reply.get()));
    } catch (const std::exception&) {
        conn_.reset();
        throw;
    }
}

void RedisWatermark::send_to_cluster(const std::string& text, const std::string& gen) {
    const std::string& script = script_of(true);
    if (!cluster_) {
        ClusterOptions o;
        o.connect_timeout = options_.connect_timeout;
        o.command_timeout = options_.command_timeout;
        cluster_ = std::make_unique<ClusterClient>(*cluster_address_, o);
    }
    if (script_sha_.empty()) {
        Outcome loaded = cluster_->run(KeyedCommand{kClusterWatermarkKey, {"SCRIPT", "LOAD", script}, {}});
        if (loaded.error) throw *loaded.error;
        if (kind_of(loaded.reply) != ReplyKind::String)
            throw refused(cluster_address_->display() + " refused the watermark script: " +
                          reply_text(loaded.reply.get()));
        script_sha_ = reply_text(loaded.reply.get());
    }
    Outcome o = cluster_->run(KeyedCommand{
        kClusterWatermarkKey,
        {"EVALSHA", script_sha_, "2", kClusterWatermarkKey, kClusterWatermarkGenerationKey, text, gen},
        {"EVAL", script, "2", kClusterWatermarkKey, kClusterWatermarkGenerationKey, text, gen}});
    if (o.error) throw *o.error;
    if (kind_of(o.reply) != ReplyKind::Integer)
        throw refused(cluster_address_->display() + " answered the update to " + text + " with " +
                      reply_text(o.reply.get()));
}

void RedisWatermark::run() {
    auto backoff = options_.initial_backoff;
    bool down = false;  // an outage is logged once, and its end once
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stopping_ || restart_ || latest_ > published_; });
        // Stopping: one last update over a live connection, never a reconnect that would delay the exit.
        if (stopping_ && ((!restart_ && latest_ <= published_) || (!conn_ && !cluster_))) return;
        // A gap is being closed: positions wait (a new generation's 0/0 does not).
        if (!restart_ && holding_) {
            lock.unlock();
            bool held = holding_();
            lock.lock();
            if (held) {
                if (stopping_) return;
                wake_.wait_for(lock, options_.hold_poll, [this] { return stopping_ || restart_; });
                continue;
            }
        }
        bool last = stopping_;
        bool restart = restart_;
        std::uint64_t generation = generation_;
        Lsn lsn = restart ? 0 : latest_;
        lock.unlock();
        std::string error;
        try {
            send(generation, lsn);
        } catch (const std::exception& e) {
            error = e.what();
        }
        lock.lock();
        if (error.empty()) {
            if (generation == generation_) {
                if (restart) restart_ = false;
                published_ = std::max(published_, lsn);
            }
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
