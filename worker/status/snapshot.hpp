#pragma once
// The status snapshot: what the board publishes, made from the figures the status thread reads from
// the stream, the coordinator and the engine, plus what the thread remembers between readings (when
// the acknowledged position last moved, when each error was first seen).
//
// The wiring copies those figures into Readings as plain values, so this component links none of
// the components it reports on. StatusHistory::snapshot() decides the rest: the worker's state, the
// most recent error of any kind and when it was first seen, the recompute's wall-clock times.
//
//   status::StatusHistory history;
//   board.publish(history.snapshot(readings, std::chrono::system_clock::now()));
//
// Threads: one StatusHistory belongs to one thread (the status thread).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/histogram.hpp"
#include "common/lsn.hpp"
#include "status/status_board.hpp"

namespace docsync::status {

// Where the stream is, in the terms the status view tells apart.
enum class StreamPhase {
    Idle,        // not started yet
    Connecting,  // connecting, or backing off before the next attempt
    Streaming,   // streaming, or paused by backpressure
    Ended,       // stopped or failed
};

// One doc query's figures as the engine counts them.
struct QueryReading {
    std::string name;
    std::uint64_t recomputes = 0;
    std::uint64_t permanent_failures = 0;
    std::uint64_t compute_ns = 0;          // time spent computing
    // For the metrics endpoint only (the status file has no room for them).
    std::uint64_t publishes = 0;
    Histogram compute_seconds{kComputeSecondsBounds};
    std::string last_error;                // empty: none
    std::string last_sqlstate;             // of last_error, empty: none
    std::string last_channel;              // the doc (or "keys:<table>") of last_error, empty: none
    bool error_cleared = false;            // last_channel's doc has been published since last_error
    std::string batch_set_aside;           // why its batched forms are set aside, empty: none
};

// How a last error whose doc has been published since is shown (query_stats and docsync.status):
// the cause is gone, so the health no longer counts it as failing (the SQL views test this prefix).
inline constexpr std::string_view kRecoveredPrefix = "recovered: ";

// The last recompute of every live doc as the engine tracks it: its times are nanoseconds of the
// engine's clock, and now_ns is that clock when read, so they can be put on the wall clock.
struct RecomputeReading {
    std::uint32_t reason = DOCSYNC_RECOMPUTE_NONE;  // DocsyncStatusRecompute
    std::uint64_t id = 0;
    std::uint64_t total = 0;
    std::uint64_t done = 0;
    std::int64_t started_ns = 0;
    std::int64_t finished_ns = 0;  // 0: still running
    std::int64_t now_ns = 0;
    bool gap = false;  // it covers changes the stream will never deliver (engine RecomputeProgress)
};

// What the status thread read at one moment.
// What the cache patches are made from did (publish/patcher.hpp's counters, as plain values).
struct PatchReading {
    std::uint64_t patches = 0;            // patches published
    std::uint64_t whole_no_base = 0;      // whole docs sent with no usable base
    std::uint64_t whole_not_smaller = 0;  // whole docs sent because the patch was not smaller
    std::uint64_t bytes_saved = 0;        // whole envelope bytes not sent
    std::uint64_t cache_bytes = 0;
    std::uint64_t cache_entries = 0;
};

struct Readings {
    // The sink's connection broke and it was not checked for lost docs since (lifecycle/run.cpp's sink
    // watch).
    bool sink_unchecked = false;
    // The stream's.
    StreamPhase phase = StreamPhase::Idle;
    std::uint64_t sessions = 0;  // sessions started so far
    std::uint64_t reconnects = 0;
    std::uint64_t generation = 0;
    Lsn received_lsn = 0;
    Lsn acked_lsn = 0;  // the flush position sent upstream
    std::string stream_error;  // the stream's last error, empty: none
    Lsn retained_wal = 0;  // the server's WAL past acked_lsn at the valve's last poll (metrics only)
    // The coordinator's.
    std::uint64_t open_txns = 0;
    // The engine's.
    std::uint64_t dirty_depth = 0;
    std::uint64_t in_flight = 0;
    std::uint64_t live_docs = 0;
    // The totals: the engine's, but valve_resets, the stream's; the stream's reconnects are added
    // to transient_retries in the snapshot.
    Totals totals;
    std::string last_transient_error;  // what the last retried failure said, empty: none
    RecomputeReading recompute;
    std::vector<QueryReading> queries;
    Histogram batch_size{kBatchSizeBounds};  // docs per doc-query statement (metrics only)
    std::uint64_t refused_channels = 0;         // channels refused for their keys' spelling (metrics only)
    std::uint64_t batched_forms_set_aside = 0;  // batched forms that failed where docs alone ran (metrics only)
    Histogram commit_publish_seconds{kCommitPublishSecondsBounds};  // commit → published (metrics only)
    // --patches on: the cache of last-published docs and what it made (publish/patcher.hpp; metrics
    // only). Absent with patches off, so the families are too.
    std::optional<PatchReading> patches;
    // The worker's: draining after a signal, the error it ends with, what the stream waits for.
    bool draining = false;
    std::string fatal;
    std::string waiting;
};

// The board's state for a reading: stopped once the worker ends with an error, draining after a
// signal, else the stream's phase (connecting is `reconnecting` once a session has run).
WorkerState worker_state(const Readings& readings);

// The recompute's progress with its times on the wall clock, `now` being the reading's moment.
RecomputeStatus recompute_status(const RecomputeReading& recompute, WallTime now);

// What the status thread remembers between snapshots.
class StatusHistory {
public:
    // The snapshot of `readings`, taken at `now`. An error counts from the first snapshot that
    // shows it (to the status interval); a wait (Readings::waiting) is fresh at every snapshot
    // while it lasts.
    StatusSnapshot snapshot(const Readings& readings, WallTime now);

private:
    // When the acknowledged position last moved.
    Lsn lsn_ = 0;
    WallTime lsn_at_{};
    // What the errors were when last seen: the stream's last error, each query's failure count
    // (and when it changed), the engine's count of retried failures.
    std::string stream_error_;
    std::map<std::string, std::pair<std::uint64_t, WallTime>> query_errors_;
    std::uint64_t transient_retries_ = 0;
    // The most recent error of any kind, which docsync.status shows.
    std::string last_error_;
    WallTime last_error_at_{};
    // The query whose failure is last_error_, or empty when it came from elsewhere.
    std::string last_error_query_;
};

}  // namespace docsync::status
