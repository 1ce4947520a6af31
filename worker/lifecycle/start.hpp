#pragma once
// The active worker's start: the slot's lease, its status board, its sink. Each refuses a start
// with the fix, or, for a spare (--standby), waits out what its predecessor still holds.

#include <chrono>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "config/settings.hpp"
#include "engine/seams.hpp"
#include "publish/sink.hpp"
#include "replication/lease.hpp"
#include "status/status_board.hpp"

namespace docsync::lifecycle {

// run()'s exit code when the worker stepped down because another worker took its lease.
inline constexpr int kSteppedDown = 3;
// How long a worker without --standby retries a held lease (its holder may be exiting), and how long
// a spare that took the lease waits for the slot's lock file on this host (its last holder drains).
inline constexpr std::chrono::seconds kLeaseGrace{5};
// How long a spare that could not start waits before standing by again.
inline constexpr std::chrono::seconds kStartRetry{2};

// Takes the slot's lease for a worker without --standby: retried for kLeaseGrace, then an error
// naming the holder.
void take_lease(Lease& lease, const std::string& slot);

// The slot's status board. Without --standby, a lock file held on this host refuses the start at
// once. A spare that just took the lease may find it still held by the worker it replaces, which
// drains or is frozen: it waits kLeaseGrace, then fences that worker (SIGKILL, only a docsync-worker
// of this host holding the lock file), so that the file docsync.status and wait_published read is
// always the lease holder's. A holder it cannot fence makes the start StartUnavailable.
std::unique_ptr<status::StatusBoard> open_board(const Settings& settings, const std::string& database);

// A start that failed for a reason of the moment (a server that refuses connections for now, a sink
// that cannot be reached, a frozen predecessor that holds a lock): a spare gives the lease back and
// stands by again, as a running worker rides out the same outage; serve() catches it.
class StartUnavailable : public Error {
public:
    StartUnavailable(const std::string& what, const Error& e) : Error(what + ": " + e.what(), e.sqlstate(), true) {}
};

// The sink. For a spare, a sink that cannot be reached now is StartUnavailable (the JSONL file's lock
// held by the worker it replaces is fenced first); for anyone else, a failed start (the command
// line's sink is wrong, or down at a cold start) ends the worker. `patcher` (--patches on, else null)
// is the cache every publish plans its patch from (publish/patcher.hpp).
std::unique_ptr<Publisher> open_sink(const Settings& settings, const publish::SinkSpec& sink, const std::string& database,
                                     std::shared_ptr<publish::Patcher> patcher = nullptr);

}  // namespace docsync::lifecycle
