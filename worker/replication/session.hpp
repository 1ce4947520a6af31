#pragma once
// One connection's worth of the replication stream (stream.hpp): Stream::run() makes a Session per
// connection and runs it to its Outcome. The steps, in order: identify the server, check the slot
// (and create or recreate it), raise the generation, start a coordinator epoch, START_REPLICATION
// (retrying "slot is active"), then the CopyBoth loop, which answers keepalives, sends standby status
// updates, runs the control check (the WAL safety valve, a shutting-down server) and ends with a
// final status update.
//
// Thread ownership: the stream thread. A Session reaches into its Stream for what outlives it: the
// options, the coordinator and handler, the acknowledged position, the stop and restart flags, the
// wake-up descriptor, the last server's identity and generation, and the stats.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "pg/connection.hpp"
#include "pg/copy_both.hpp"
#include "replication/decoder.hpp"
#include "replication/pgoutput_decoder.hpp"
#include "replication/stream.hpp"

namespace docsync {

inline constexpr std::string_view kStreamComponent = "stream";

// Milliseconds until `until` for poll(), between 0 and 1000 (flags are looked at every second).
inline int poll_timeout_ms(std::chrono::steady_clock::time_point until) {
    using std::chrono::milliseconds;
    auto left = std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

class Stream::Session {
public:
    // Opens the replication connection (replication=database) with the text forms pinned.
    Session(Stream& stream, SessionInfo& info);
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Every step, filling `info` as it goes; returns how the stream ended. Throws docsync::Error.
    // `valve_recreate`: the last one ended with the safety valve, so the slot is recreated.
    Outcome run(bool valve_recreate);

private:
    using Clock = std::chrono::steady_clock;

    // IDENTIFY_SYSTEM: which server and timeline, and whether that changed since the last one.
    void identify();
    // The slot: check it, and create or recreate it when asked; sets start_lsn.
    void check_slot(bool valve_recreate);
    // With pgoutput: the watches from the catalog, the publication kept in step, a new decoder
    // (session_pgoutput.cpp, as is replay_pgoutput()).
    void prepare_pgoutput();
    // Hands up what the next held message of a committed streamed transaction yields.
    void replay_pgoutput();
    // The generation: contract C (docs/design.md).
    void raise_generation();
    // docsync.advance_generation(), or its in-process stand-in on an older extension.
    void advance_generation(std::uint64_t floor, bool force);
    // How long "slot is active" is retried.
    std::chrono::milliseconds slot_active_grace();
    // A new coordinator epoch from the slot's position; the handler hears of it.
    void begin();
    // START_REPLICATION, retrying "slot is active" for `active_grace`. nullopt: streaming.
    std::optional<Outcome> start_replication(std::chrono::milliseconds active_grace);

    // The CopyBoth loop, until stopped, restarted, lost or the valve fires.
    Outcome receive();
    // Handles the messages libpq already holds, a turn's worth at most; false when none is left.
    bool read_messages();
    void handle_message(std::string_view message);
    void handle_record(const Record& record, Lsn wal_start, std::size_t bytes);
    // A standby status update: what is acknowledged may be confirmed.
    void send_status();
    // WAL up to `wal_end` was received (the handler reads it too: Stream::received).
    void note_received(Lsn wal_end) {
        received_ = std::max(received_, wal_end);
        stream_.received_ = received_;
    }
    // What may be confirmed: the durable position, under the handler's cap.
    Lsn acknowledgeable() const { return std::min(stream_.acked_.load(), stream_.ack_cap_.load()); }
    // The control check on its own connection: the valve, and whether the server is shutting down.
    // nullopt: carry on.
    std::optional<Outcome> control_check();
    // The final status update and the end of the copy.
    Outcome finish(Outcome outcome);

    // The valve's one message: the slot was invalidated (`lost`), or holds `retained` bytes.
    void log_valve(bool lost, std::uint64_t retained) const;
    // Folds this connection's counters into the Stream's stats.
    void publish_stats(StreamState state);
    pg::Deadline cmd_deadline() const { return pg::deadline_in(options_.connect_timeout); }

    Stream& stream_;
    const StreamOptions& options_;
    SessionInfo& info_;
    pg::Connection conn_;
    std::optional<pg::CopyBoth> copy_;  // once streaming
    Decoder decoder_;                   // relations are described again on every connection
    std::string plugin_ = "docsync";    // the slot's output plugin
    std::optional<PgoutputDecoder> pgoutput_;  // when plugin_ is pgoutput
    std::vector<Record> decoded_;       // what the last pgoutput message yielded
    bool pgoutput_streaming_ = false;   // protocol version 2 with streamed transactions
    Lsn replay_wal_start_ = 0;          // the STREAM COMMIT being read back

    // The control check, every valve_interval on a connection of its own: the slot's retained WAL
    // and state for the safety valve, and whether the server still accepts new connections.
    std::unique_ptr<pg::Connection> control_;
    int control_failures_ = 0;  // consecutive failed checks

    Lsn received_ = 0;    // highest WAL end received
    Lsn idle_end_ = 0;    // highest keepalive WAL end received between transactions
    Lsn sent_flush_ = 0;  // highest flush position sent
    bool in_txn_ = false;
    bool skipping_ = false;  // the open transaction was handled before a reconnect
    std::size_t txn_bytes_ = 0;
    StreamStats local_;  // counters of this connection, folded into the Stream's every turn
    Clock::time_point next_status_;
    Clock::time_point next_control_;
};

}  // namespace docsync
