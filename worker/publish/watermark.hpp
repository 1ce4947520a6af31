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
// One Lua script compares the positions as numbers and only for a greater one SETs the key and
// PUBLISHes it, atomically: the watermark never moves back, whatever order updates arrive in, from
// a late update, a restarted worker or one that took over. A failed update (Redis down, busy or
// refusing) is logged once per outage and retried with backoff (100 ms doubling to 5 s), with the
// newest position by then; acknowledgements never wait for it.
//
// Thread-safety: acknowledge() may be called from any thread; construct and stop from one.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/lsn.hpp"
#include "progress/coordinator.hpp"
#include "publish/redis_connection.hpp"

namespace docsync::publish {

// The key and the channel of the watermark.
inline constexpr const char* kWatermarkKey = "docsync:watermark";

struct WatermarkOptions {
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds command_timeout{5000};
    std::chrono::milliseconds initial_backoff{100};
    std::chrono::milliseconds max_backoff{5000};
};

class RedisWatermark final : public Acknowledger {
public:
    // Starts the publishing thread; connects on the first update. `next` (the stream) receives every
    // acknowledgement first.
    RedisWatermark(RedisAddress address, Acknowledger& next, WatermarkOptions options = {});
    ~RedisWatermark() override;  // stop()
    RedisWatermark(const RedisWatermark&) = delete;
    RedisWatermark& operator=(const RedisWatermark&) = delete;

    // Passes `lsn` on to `next`, then records it for the publishing thread. Never blocks on Redis.
    void acknowledge(Lsn lsn) override;

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
    // One update of `lsn`, connecting (and loading the script) first when needed. Throws
    // docsync::Error on any failure; the connection is then dropped.
    void send(Lsn lsn);

    const RedisAddress address_;
    Acknowledger& next_;
    const WatermarkOptions options_;

    std::unique_ptr<RedisConnection> conn_;  // the publishing thread's
    std::string script_sha_;                 // of the script loaded on conn_

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    Lsn latest_ = 0;     // the newest position acknowledged
    Lsn published_ = 0;  // the newest position Redis answered for
    std::uint64_t updates_ = 0;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace docsync::publish
