#pragma once
// The stream's handler in docsync-worker: hands each decoded record to the engine, and keeps the
// definitions and the plugin's `tables` option current (a reload at a definitions change, coalesced
// when messages flood in). Every member runs on the stream thread, except the setters, called
// before the stream starts.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "executor/definitions_source.hpp"
#include "progress/commit_latency.hpp"
#include "publish/watermark.hpp"
#include "replication/stream.hpp"

namespace docsync::lifecycle {

class Pipeline final : public StreamHandler {
public:
    Pipeline(Engine& engine, DefinitionsSource& definitions, CommitLatency& latency, std::vector<std::string> warm)
        : engine_(engine), definitions_(definitions), latency_(latency), warm_(std::move(warm)) {}

    void set_stream(Stream* stream) { stream_ = stream; }
    // Called on the stream thread when a recompute of every live doc starts that covers a gap in
    // the stream: the status file should say so at once (docsync.wait_published reads it).
    void on_gap(std::function<void()> callback) { on_gap_ = std::move(callback); }
    // With Redis: docsync:watermark, told each session's generation before its acknowledgements.
    void set_watermark(publish::RedisWatermark* watermark) { watermark_ = watermark; }

    // Stream thread, at every session start: the newest definitions and their `tables` option.
    std::optional<std::string> session_tables();

    void on_session(const SessionInfo& session) override;
    void on_record(const Record& record, Lsn, std::uint64_t ticket) override;
    void on_idle() override {
        if (reload_pending_) maybe_reload();
    }
    int idle_tick_ms() const override { return reload_pending_ ? 20 : 0; }

private:
    // A coalesced reload, once the interval since the last one has passed: a flood of definitions
    // messages costs one reload per interval, and the interval grows with what a reload costs, so
    // reloads never take more than a fifth of the stream thread's time.
    void maybe_reload();
    // A transaction changed the definitions. The engine holds its ticket until the definitions are
    // loaded (and their recomputes done); the stream restarts only when the plugin must emit other
    // tables or columns. A redelivered definitions transaction finds nothing new and completes.
    void reload_definitions();

    static constexpr std::chrono::milliseconds kMinReloadInterval{250};

    Engine& engine_;
    DefinitionsSource& definitions_;
    CommitLatency& latency_;
    Stream* stream_ = nullptr;
    std::function<void()> on_gap_;
    publish::RedisWatermark* watermark_ = nullptr;
    const std::vector<std::string> warm_;
    std::string tables_;
    std::uint64_t sessions_ = 0;
    std::uint64_t xid_ = 0;          // of the transaction being decoded
    std::uint64_t pending_xid_ = 0;  // of the last transaction that asked for a reload
    bool reload_pending_ = false;    // a coalesced reload is due (maybe_reload)
    std::uint64_t ignored_messages_ = 0;
    std::chrono::steady_clock::time_point last_reload_{};
    std::chrono::steady_clock::duration reload_interval_ = kMinReloadInterval;
    std::int64_t commit_time_ = 0;  // its commit timestamp (PostgreSQL epoch, microseconds)
};

}  // namespace docsync::lifecycle
