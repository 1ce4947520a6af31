#pragma once
// The worker's status board: publishes what the worker knows into its status file
// (<status-dir>/<database>.<slot>.status, layout in shared/docsync_status.h) for the extension's
// docsync.status view, and holds the slot's lock file for the worker's lifetime so a second worker
// for the same slot is refused.
//
// The board never reaches into other components: the wiring reads the stream, the coordinator and
// Engine::stats() into plain values, StatusHistory (status/snapshot.hpp) makes a StatusSnapshot of
// them, and the wiring hands it over at least every 500 ms and on state changes.
// publish() takes only the board's own mutex (never one the hot path waits on) and writes the file
// through a Boost.Interprocess mapping under a seqlock, so readers never block the writer.
//
// Threads: publish() and heartbeat() may be called from any thread.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/lsn.hpp"
#include "docsync_status.h"

namespace docsync::status {

enum class WorkerState : std::uint32_t {
    Starting = DOCSYNC_STATE_STARTING,
    Streaming = DOCSYNC_STATE_STREAMING,
    Reconnecting = DOCSYNC_STATE_RECONNECTING,
    Draining = DOCSYNC_STATE_DRAINING,
    ValveReset = DOCSYNC_STATE_VALVE_RESET,
    Stopped = DOCSYNC_STATE_STOPPED,
    Connecting = DOCSYNC_STATE_CONNECTING,
};

// "streaming", as the views show it.
std::string_view state_name(WorkerState state);

using WallTime = std::chrono::system_clock::time_point;

// Counters of one doc query.
struct QueryCounters {
    std::string name;
    std::uint64_t recomputes = 0;          // computes finished, failed ones included
    std::uint64_t permanent_failures = 0;
    std::uint64_t compute_us_total = 0;    // time spent computing, microseconds
    std::string last_error;                // last permanent failure (with SQLSTATE), empty: none
    WallTime last_error_at{};              // epoch: none
    std::string batch_set_aside;           // why its batched forms are set aside, empty: none
};

// The last recompute of every live doc (startup or WAL safety valve).
struct RecomputeStatus {
    std::uint32_t reason = DOCSYNC_RECOMPUTE_NONE;  // DocsyncStatusRecompute
    std::uint64_t id = 0;    // tells one recompute from the next (not in the file)
    std::uint64_t total = 0;
    std::uint64_t done = 0;
    WallTime started_at{};   // epoch: never
    WallTime finished_at{};  // epoch: still running
    bool gap = false;        // it covers changes the stream will never deliver (DOCSYNC_STATUS_RECOMPUTE_GAP)
};

// The running totals since the worker started, each named alike in the engine, the status file and
// the docsync.status view.
struct Totals {
    std::uint64_t changes = 0;              // row changes handled
    std::uint64_t recomputes = 0;           // computes finished, failed ones included
    std::uint64_t publishes = 0;            // docs published
    std::uint64_t permanent_failures = 0;   // computes that failed for good
    std::uint64_t transient_retries = 0;    // computes, lookups, publishes and sessions retried
    std::uint64_t valve_resets = 0;         // slots recreated by the WAL safety valve
    std::uint64_t not_visible_retries = 0;  // computes retried because a commit was not visible yet
    std::uint64_t audit_samples = 0;        // live docs the continuous audit compared with the sink
    std::uint64_t audit_divergences = 0;    // of them, docs the sink held wrongly (published again)
};

// Everything the worker reports (made by StatusHistory). Plain values, no references into components.
struct StatusSnapshot {
    WorkerState state = WorkerState::Starting;
    bool sink_unchecked = false;  // DOCSYNC_STATUS_SINK_UNCHECKED
    std::uint64_t generation = 0;
    Lsn received_lsn = 0;
    Lsn acked_lsn = 0;
    WallTime acked_at{};  // epoch: never
    std::uint64_t open_txns = 0;
    std::uint64_t dirty_depth = 0;
    std::uint64_t in_flight = 0;
    std::uint64_t live_docs = 0;
    Totals totals;
    RecomputeStatus recompute;
    std::string last_error;  // last error of any kind, empty: none
    WallTime last_error_at{};
    std::vector<QueryCounters> queries;  // the first DOCSYNC_STATUS_MAX_QUERIES are kept
};

// The status file's name for a database and slot: "<database>.<slot>.status", with '/', '%', a
// leading '.' and control characters of the database name written as %XX.
std::string status_file_name(std::string_view database, std::string_view slot);
// The lock file's name: "<database>.<slot>.lock", escaped the same way.
std::string lock_file_name(std::string_view database, std::string_view slot);

// Copies text into a fixed field: NUL-terminated, cut at a UTF-8 character boundary, with invalid
// UTF-8 bytes and NULs replaced by '?'.
void copy_field(char* field, std::size_t field_size, std::string_view text);

// One line on a recompute of every live doc, as the log shows it (the docsync.status view computes
// the same figures): "startup recompute: 4000 of 10000 live docs (40%), 1210 docs/s, about 5 s left",
// or "... done: 10000 live docs in 8.3 s (1205 docs/s)". The rate is the mean since it started.
std::string describe_recompute(const RecomputeStatus& recompute, WallTime now);

// Fills a status file body from a snapshot (the identity fields and times given separately).
void fill_body(DocsyncStatusBody& body, const StatusSnapshot& snapshot, std::string_view database,
               std::string_view slot, std::int32_t pid, WallTime started_at, WallTime heartbeat_at);

// An exclusive flock() on the slot's lock file, held for the owner's lifetime. The lock file holds
// the owner's pid. flock (not fcntl) locks belong to the open file description, so no other
// descriptor of the file closing in this process can drop it.
class SlotLock {
public:
    // Takes the lock or throws docsync::Error naming the pid that holds it.
    SlotLock(const std::filesystem::path& dir, std::string_view database, std::string_view slot);
    ~SlotLock();
    SlotLock(const SlotLock&) = delete;
    SlotLock& operator=(const SlotLock&) = delete;

    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    int fd_ = -1;
};

// The pid of the process on this host (this kernel's boot id) that holds the slot's lock file, or
// nullopt when nobody does or it is held from another host. Asks with a shared flock() tried without
// waiting, so a worker starting at that very instant may be refused once.
std::optional<int> local_lock_owner(const std::filesystem::path& dir, std::string_view database,
                                    std::string_view slot);
// Fences a hung worker (replication/hung_watch.hpp): SIGKILLs process `pid` when it is a
// docsync-worker of this host holding the slot's lock file; true when it did.
bool kill_lock_owner(const std::filesystem::path& dir, std::string_view database, std::string_view slot, int pid);

struct BoardOptions {
    std::chrono::seconds summary_interval{60};  // a summary log line at most this often; 0: never
    std::chrono::seconds recompute_interval{10};  // a running recompute's progress line this often
    bool log = true;                            // log state changes and summaries
};

class StatusBoard {
public:
    // Creates the status directory (mode 0755) if missing, takes the slot's lock (throws
    // docsync::Error naming the owning pid when another worker holds it), creates or resizes the
    // status file (mode 0644), maps it and publishes state `starting`, its sink unchecked (waits hold
    // until the worker's first publish).
    StatusBoard(const std::filesystem::path& dir, std::string database, std::string slot, BoardOptions options = {});
    // Publishes state `stopped` (keeping the last values) and releases the lock; after withdraw(),
    // removes the status file instead.
    ~StatusBoard();
    StatusBoard(const StatusBoard&) = delete;
    StatusBoard& operator=(const StatusBoard&) = delete;

    // Writes the snapshot with a fresh heartbeat. Logs a line when the state changes, and a periodic
    // summary.
    void publish(const StatusSnapshot& snapshot);
    // Refreshes only the heartbeat, keeping the last snapshot.
    void heartbeat();
    // Republishes the last snapshot with its sink checked or not (status/sink_start_watch.hpp).
    void set_sink_unchecked(bool unchecked);

    const std::filesystem::path& file_path() const { return file_path_; }
    // The file showed a recompute of every live doc that covered a gap in the stream and had not
    // finished (its worker stopped or died mid-way). The file goes on showing it until the first
    // publish; the caller's own recompute must cover that gap (Engine::recompute_all_live).
    bool inherited_gap() const { return inherited_gap_; }
    std::uint64_t sequence() const;
    // This board created its status file (none was there before it).
    bool created() const { return created_; }
    // A start that failed before its slot existed: the file describes no worker anyone can run, so
    // it goes at the end instead of staying as a `stopped` row that only docsync.forget_slot removes.
    void withdraw() { withdrawn_ = true; }

private:
    void write_locked(const StatusSnapshot& snapshot);
    void log_locked(const StatusSnapshot& snapshot);

    std::string database_;
    std::string slot_;
    BoardOptions options_;
    std::unique_ptr<SlotLock> lock_;
    std::filesystem::path file_path_;
    struct Mapping;
    std::unique_ptr<Mapping> mapping_;
    std::int32_t pid_;
    WallTime started_at_;
    mutable std::mutex mutex_;
    StatusSnapshot last_;
    bool inherited_gap_ = false;
    bool created_ = false;
    bool withdrawn_ = false;
    bool logged_any_ = false;
    WorkerState logged_state_ = WorkerState::Starting;
    std::chrono::steady_clock::time_point last_summary_;
    std::uint64_t logged_recompute_ = 0;  // id of the recompute last logged as started
    bool logged_recompute_done_ = false;
    std::chrono::steady_clock::time_point last_recompute_line_;
};

}  // namespace docsync::status
