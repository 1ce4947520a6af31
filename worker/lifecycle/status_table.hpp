#pragma once
// The status contract of a portable install (docs/portable.md, "The status contract"): a server
// that loads no docsync library cannot read the worker's status file, so the worker reports in the
// tables docsync.worker_status (its slot's row) and docsync.worker_query_status (one row per doc
// query), through the --dsn role, on a connection of its own. docsync.status, query_stats and
// wait_published read them there.
//
// A row is written at most once a second (the heartbeat), and at once when the state, the gap flag
// of a recompute, a new recompute or the sink check changes: wait_published reads those. A failed
// write is logged (once a minute at most) and tried again on a new connection at the next one;
// reporting never stops the worker.
//
// Threads: the status thread only.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "pg/connection.hpp"
#include "status/portable_names.hpp"
#include "status/status_board.hpp"

namespace docsync::lifecycle {

// Whether the database behind `dsn` holds a portable install (docsync.install_kind() = 'portable';
// the extension, and versions without the function, are not). Throws docsync::Error when it cannot
// tell (the connection fails).
bool portable_install(const std::string& dsn);

class StatusTable {
public:
    StatusTable(std::string dsn, std::string slot, std::int32_t pid, status::WallTime started_at);

    // Writes the snapshot when the heartbeat is due or something waits read changed; `force`: now.
    void publish(const status::StatusSnapshot& snapshot, bool force = false);
    // A start that failed before its slot existed: removes the row this process wrote, so
    // docsync.status shows no stale worker for a slot that never was (failures are only logged).
    void withdraw();

private:
    void write(const status::StatusSnapshot& snapshot);

    std::string dsn_;
    std::string slot_;
    std::int32_t pid_;
    status::WallTime started_at_;
    std::optional<pg::Connection> conn_;
    std::chrono::steady_clock::time_point written_at_{};
    std::chrono::steady_clock::time_point warned_at_{};
    bool written_ = false;
    status::WorkerState state_ = status::WorkerState::Starting;
    bool gap_ = false;
    bool gap_running_ = false;
    std::uint64_t recompute_id_ = 0;
    bool sink_unchecked_ = false;
};

}  // namespace docsync::lifecycle
