#pragma once
// docsync:watermark: how far the Redis sink is complete, for readers who wait for their own writes.
//
// The key `docsync:watermark` holds a WAL position in pg_lsn's text form (`16/B374D848`), and each
// time it advances the same text is published on the channel `docsync:watermark`. The position is
// the coordinator's acknowledged one: every transaction before it has a durable outcome for all its
// docs (invariant 1 in docs/design.md), which for the Redis sink means retained. So a client that
// committed at LSN L and sees the watermark at or past L finds the docs of that commit with GET.
// A position at the start of a WAL page is written just past the page's header, where
// pg_current_wal_insert_lsn() points after a record that filled its page (watermark.cpp).
//
// RedisWatermark sits between the coordinator and the stream: each acknowledgement is passed on to
// the stream at once, then recorded here, which only stores the position and wakes the publishing
// thread (the coordinator calls it under its lock). That thread sends the newest position recorded,
// one update at a time; positions that arrive while an update is in flight are coalesced into the
// next one, so Redis sees at most one update per round trip and none while nothing moves.
//
// Positions belong to a generation of doc versions (contract C in docs/design.md), which the key
// `docsync:watermark_generation` holds beside the position. One Lua script compares (generation,
// position) pairs, positions as numbers, and only for a greater pair SETs both keys and PUBLISHes
// the position, atomically: within a generation the watermark never moves back, whatever order
// updates arrive in, from a late update, a restarted worker or one that took over. A new generation
// (a recreated slot, another server after a failover or restore, whose positions may be lower than
// the last server's) starts at 0/0 at once: the last server's positions mean nothing on the new one.
//
// Gaps: while a recompute of every live doc runs that covers changes the stream will never deliver
// (`holding`, RecomputeProgress::holds_waits), docs may lack commits before the acknowledged
// position, so the watermark does not advance until it finishes; the new generation's 0/0 is written
// even then.
//
// A failed update (Redis down, busy or refusing) is logged once per outage and retried with backoff
// (100 ms doubling to 5 s), with the newest position by then; acknowledgements never wait for it.
//
// Thread-safety: acknowledge() may be called from any thread; construct and stop from one.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/lsn.hpp"
#include "progress/coordinator.hpp"
#include "redis/cluster_client.hpp"
#include "redis/connection.hpp"

namespace docsync::publish {

// The key and the channel of the watermark, and the key of its generation.
inline constexpr const char* kWatermarkKey = "docsync:watermark";
inline constexpr const char* kWatermarkGenerationKey = "docsync:watermark_generation";
// On a Redis Cluster: both keys on one slot (hash tag docsync:watermark), SPUBLISHed on the first.
inline constexpr const char* kClusterWatermarkKey = "{docsync:watermark}";
inline constexpr const char* kClusterWatermarkGenerationKey = "{docsync:watermark}:generation";

struct WatermarkOptions {
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};
    std::chrono::milliseconds initial_backoff{100};
    std::chrono::milliseconds max_backoff{5000};
    std::chrono::milliseconds hold_poll{50};  // how often a held watermark asks whether the gap closed
};

class RedisWatermark final : public Acknowledger {
public:
    // Starts the publishing thread; connects on the first update. `next` (the stream) receives every
    // acknowledgement first. While `holding` (called on the publishing thread) says true, positions
    // are recorded but not written.
    RedisWatermark(RedisAddress address, Acknowledger& next, WatermarkOptions options = {},
                   std::function<bool()> holding = {});
    // The same on a Redis Cluster, with the keys kClusterWatermarkKey and kClusterWatermarkGenerationKey.
    RedisWatermark(RedisClusterAddress cluster, Acknowledger& next, WatermarkOptions options = {},
                   std::function<bool()> holding = {});
    ~RedisWatermark() override;  // stop()
    RedisWatermark(const RedisWatermark&) = delete;
    RedisWatermark& operator=(const RedisWatermark&) = delete;

    // Passes `lsn` on to `next`, then records it for the publishing thread. Never blocks on Redis.
    void acknowledge(Lsn lsn) override;
    // The generation of the positions acknowledged from now on (each stream session's, before its
    // first acknowledgement). A greater one than before writes 0/0 in it at once.
    void set_generation(std::uint64_t generation);

    // Ends the publishing thread, after one last update of the newest position when the connection
    // is up (a drain's final acknowledgement); never waits for a reconnect. Idempotent.
    void stop();

    // The newest position Redis has answered for: taken, or refused for a greater one it held.
    // 0 before the first. For tests and the log.
    Lsn published() const;
    // Updates Redis answered so far (fewer than acknowledgements: coalesced).
    std::uint64_t updates() const;

    // The Lua script (for the tests; docs/internals.md describes it).
    static const char* script();

private:
    void run();
    // One update of (generation, lsn), connecting (and loading the script) first when needed.
    // Throws docsync::Error on any failure; the connection is then dropped.
    void send(std::uint64_t generation, Lsn lsn);
    void send_to_cluster(const std::string& text, const std::string& gen);

    const RedisAddress address_;
    const std::optional<RedisClusterAddress> cluster_address_{};
    Acknowledger& next_;
    const WatermarkOptions options_;
    const std::function<bool()> holding_;

    std::unique_ptr<RedisConnection> conn_;  // the publishing thread's
    std::unique_ptr<ClusterClient> cluster_;  // the publishing thread's, on a cluster
    std::string script_sha_;                 // of the script loaded on conn_ (or the cluster)

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::uint64_t generation_ = 0;
    bool restart_ = false;  // generation_ is new: write 0/0 in it
    Lsn latest_ = 0;        // the newest position acknowledged in generation_
    Lsn published_ = 0;     // the newest position of generation_ Redis answered for
    std::uint64_t updates_ = 0;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace docsync::publish
