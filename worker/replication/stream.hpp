#pragma once
// The replication stream: consumes the docsync slot over libpq's streaming replication protocol
// (replication=database), decodes each record and hands it to a handler, and acknowledges upstream
// only what the delivery progress coordinator says is durable.
//
// A session (Stream::Session, replication/session.hpp): connect, IDENTIFY_SYSTEM, check (or, when
// asked, create) the slot, raise the generation (docsync.advance_generation, contract C in
// docs/design.md), start a new coordinator epoch, START_REPLICATION with the plugin options, then a
// non-blocking CopyBoth loop (pg::CopyBoth: the messages libpq holds, then poll()). Keepalives that
// ask for a reply are answered at once; standby status updates go out every status_interval and as
// soon as the acknowledged position moves. Every COMMIT is registered with the coordinator (in
// stream order, before the handler sees it) and its ticket handed to the handler, which completes
// it once the transaction's work is durable. A keepalive's WAL end is acknowledged only when
// nothing is registered and pending and no transaction is open. Transactions whose COMMIT starts
// before the acknowledged position (the server resends them after a reconnect) are skipped: they
// were handled.
//
// Connection loss and server restarts end the session; the next one starts after a capped exponential
// backoff with jitter from the slot's own position (LOGICAL 0/0), under a new epoch. "Slot is active"
// (55006) is retried every half second for wal_sender_timeout plus a margin, then is an error naming
// the holder's pid.
// Over the pending caps (transactions, bytes) the stream stops reading the socket but keeps sending
// status updates.
//
// The WAL safety valve polls, over a separate ordinary connection, the WAL the worker has not
// acknowledged (pg_current_wal_lsn() - confirmed_flush_lsn) and wal_status; above max_retained_wal,
// or when the slot was invalidated (lost, also found at the session's start), it drops and recreates
// the slot, raises the generation (force) and starts a session flagged `valve_fired` so the wiring
// recomputes every live doc. The same check leaves the stream when the server is shutting down.
//
// Threads: run() is the stream thread; it owns both connections, the decoder and calls the handler.
// acknowledge(), stop(), request_restart() and stats() may be called from any thread.
//
// A handler may cap what is acknowledged (cap_acknowledgements): pgoutput drops the changes a
// publication edit hid, and what a look at the publication has not yet cleared must not be
// confirmed, or docsync.wait_published would say it was published (lifecycle/pipeline.hpp).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/defaults.hpp"
#include "common/lsn.hpp"
#include "progress/coordinator.hpp"
#include "replication/records.hpp"

namespace docsync {

struct StreamOptions {
    std::string dsn;                // libpq connection string of a role with REPLICATION
    std::string slot = "docsync";
    bool create_slot = false;       // create the slot when it does not exist
    // The output plugin: "docsync", "pgoutput" (PostgreSQL's built-in one, over the publication
    // docsync_<slot> the worker keeps in step with the watches; replication/pgoutput_publication.hpp)
    // or "auto" (the existing slot's plugin; for a new slot docsync when the server may decode with
    // it, by output_plugin_libraries, else pgoutput).
    std::string plugin = "docsync";
    // pgoutput: protocol version 2 with streamed in-progress transactions when the server has it
    // (PostgreSQL 14 and later); false, or an older server: version 1.
    bool pgoutput_streaming = true;
    // pgoutput streaming: bytes of held streamed transactions kept in memory before the largest
    // goes to a temporary file ($TMPDIR, else /tmp).
    std::size_t stream_memory = defaults::kStreamMemory;
    std::string application_name = "docsync-worker";
    // The plugin's `tables` option (contract A), asked at every session start so a re-plan takes
    // effect; nullopt leaves the option out.
    std::function<std::optional<std::string>()> tables;
    // The highest generation the sink already holds (Publisher::max_generation); the generation floor.
    std::function<std::uint64_t()> generation_floor;
    // The highest version the sink holds (Publisher::max_version), asked at every session start:
    // its generation is a floor too, and a position past this server's WAL end within the
    // generation the server keeps means the server was restored to an earlier point, which no
    // process saw (docs/design.md, "restores"): the generation is raised and the session opens a gap.
    std::function<DocVersion()> sink_high_water;
    // standby status updates at least this often
    std::chrono::milliseconds status_interval{defaults::kStatusInterval};
    std::chrono::milliseconds connect_timeout{10000};  // per connection attempt and per command
    std::chrono::milliseconds slot_create_timeout{120000};  // waits for running transactions to end
    std::size_t max_pending_txns = defaults::kMaxPendingTxns;  // backpressure caps
    std::size_t max_pending_bytes = defaults::kMaxPendingBytes;
    std::chrono::milliseconds backoff_initial{200};     // reconnect backoff: doubles, capped, jittered
    std::chrono::milliseconds backoff_max{15000};
    // How long "slot is active" is retried: wal_sender_timeout (read from the server) plus this margin,
    // unless slot_active_timeout is set.
    std::chrono::milliseconds slot_active_margin{5000};
    std::optional<std::chrono::milliseconds> slot_active_timeout;
    // the safety valve's threshold in bytes; 0 disables it
    std::uint64_t max_retained_wal = defaults::kMaxRetainedWal;
    // How often the control check runs on a separate connection: the valve's look at the slot, and
    // whether the server still accepts connections (a shutting-down server waits for this stream).
    std::chrono::milliseconds valve_interval{10000};
};

// What a new session is about; handed to the handler before the session's first record.
struct SessionInfo {
    std::uint64_t epoch = 0;       // the coordinator epoch of this session
    std::uint64_t generation = 0;  // doc generation (contract C)
    bool generation_from_server = false;  // false: docsync.advance_generation() does not exist
    Lsn start_lsn = 0;             // the slot's confirmed position when the session started
    std::string system_identifier;
    int timeline = 0;
    bool slot_created = false;     // this session created the slot
    bool identity_changed = false; // the server's system identifier or timeline differs from the last session's
    bool valve_fired = false;      // the slot was recreated by the safety valve: recompute every live doc
    // pgoutput: this session created the publication or changed its tables before streaming a slot
    // that existed. pgoutput sends a newly published table's changes only from that change on, so
    // those committed since the slot's confirmed position (since the watch that asked for it) are
    // never delivered: every live doc is recomputed as a gap, its computes after the change.
    bool publication_changed = false;
    // With publication_changed: nonzero when transactions were open at the change, the server's next
    // xid then. pgoutput decodes a change with the catalog of its own WAL position, so what such a
    // transaction wrote to a newly published table before the change is never sent, and it may
    // commit after the recompute read the docs: once they have all ended, every live doc is
    // recomputed again.
    std::uint64_t publication_open_below = 0;
    // pgoutput: publication_mark once this session set the publication up; the pipeline looks again
    // every second, and a mark that moved is an edit by hand (even one undone since).
    std::string publication_mark;
    bool pgoutput = false;         // the slot is a pgoutput slot
    bool reconnect = false;        // not the first session of this Stream
    // The sink holds docs of another history than this server's: positions past its WAL end in
    // its generation (a restore), or a generation below the one the server now gives (a new
    // timeline or server since they were published, a slot recreated before any doc was). Changes
    // of that history the stream will never deliver: every live doc is recomputed as a gap.
    bool new_history = false;
};

class StreamHandler {
public:
    virtual ~StreamHandler() = default;
    // A session starts (stream thread). Work handed up in earlier sessions and not completed is
    // forgotten: its tickets belong to an older epoch and their completions are ignored.
    virtual void on_session(const SessionInfo& session) = 0;
    // One decoded record (stream thread). `wal_start` is the message's WAL position. For a COMMIT,
    // `ticket` is the coordinator ticket registered for the transaction (else 0): complete it, from
    // any thread, once every doc the transaction affects has a durable outcome.
    virtual void on_record(const Record& record, Lsn wal_start, std::uint64_t ticket) = 0;
    // Between reads (stream thread), at least every idle_tick_ms() while that is positive: deferred
    // work (a coalesced definitions reload) runs here when no record brings it on.
    virtual void on_idle() {}
    virtual int idle_tick_ms() const { return 0; }
};

enum class StreamState { Idle, Connecting, Streaming, Paused, Backoff, Stopped, Failed };
const char* to_string(StreamState state);

struct StreamStats {
    StreamState state = StreamState::Idle;
    std::uint64_t sessions = 0;
    std::uint64_t reconnects = 0;
    std::uint64_t valve_resets = 0;
    std::uint64_t generation = 0;
    std::uint64_t records = 0;
    std::uint64_t bytes = 0;
    std::uint64_t transactions = 0;
    std::uint64_t redelivered_skipped = 0;  // transactions skipped as already acknowledged
    std::uint64_t keepalives = 0;
    std::uint64_t status_updates = 0;
    Lsn received_lsn = 0;   // highest WAL end received
    Lsn sent_flush_lsn = 0;  // highest flush position sent upstream
    Lsn retained_wal = 0;   // bytes, at the last valve poll
    std::string last_error;
};

class Stream final : public Acknowledger {
public:
    // The coordinator's acknowledger is set to this stream.
    Stream(StreamOptions options, DeliveryProgressCoordinator& coordinator, StreamHandler& handler);
    ~Stream() override;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // Streams until stop(): returns after a final status update. Throws docsync::Error for what a
    // reconnect cannot fix (no slot and no --create-slot, the slot held by another process past the
    // grace, a plugin error at start, a malformed record, an exception from the handler).
    void run();

    // Any thread: the position `lsn` is durable (never moves the sent position backwards).
    void acknowledge(Lsn lsn) override;
    // Stream thread (the handler): acknowledge nothing past `lsn` from now on, even what is durable;
    // kNoCap lifts the cap. Each session starts without one.
    static constexpr Lsn kNoCap = ~Lsn{0};
    void cap_acknowledgements(Lsn lsn);
    // Stream thread: whether the cap holds back a durable position; the highest WAL end received.
    bool acknowledgements_capped() const { return acked_.load() > ack_cap_.load(); }
    Lsn received() const { return received_.load(); }
    // Any thread: end run() cleanly.
    void stop();
    // Any thread: end the session and start a new one from the confirmed position (new epoch), e.g.
    // after the definitions changed. From the handler, takes effect after the current record.
    void request_restart();

    StreamStats stats() const;

private:
    // One connection from IDENTIFY_SYSTEM to its end (replication/session.hpp).
    class Session;
    // How a Session ended: stop(), request_restart(), the connection lost (or left for a shutting-down
    // server: reconnect after a backoff), or the safety valve fired (recreate the slot at once).
    enum class Outcome { Stopped, Restart, Lost, Valve };

    void wake();
    // Reads the wake-ups that arrived so far, so the next poll() sleeps again.
    void drain_wake();
    // Sleeps up to `timeout_ms` or until woken, then drains the wake-ups.
    void wait_wake(int timeout_ms);
    void set_state(StreamState state);
    void record_error(const std::string& message);
    template <class Update>
    void update_stats(Update update) {
        std::lock_guard lock(stats_mutex_);
        update(stats_);
    }

    StreamOptions options_;
    DeliveryProgressCoordinator& coordinator_;
    StreamHandler& handler_;
    std::uint64_t last_generation_ = 0;  // without docsync.advance_generation(): raised in-process
    std::string last_system_identifier_;  // of the last session's server, empty before the first
    int last_timeline_ = 0;
    int wake_fd_ = -1;  // eventfd: acknowledge/stop/restart wake the poll()
    std::atomic<Lsn> acked_{0};
    std::atomic<Lsn> ack_cap_{kNoCap};
    std::atomic<Lsn> received_{0};  // the session's received position, for the handler
    std::atomic<bool> stop_{false};
    std::atomic<bool> restart_{false};
    mutable std::mutex stats_mutex_;
    StreamStats stats_;
};

}  // namespace docsync
