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
// How long a spare that could not start its sink waits before standing by again.
inline constexpr std::chrono::seconds kSinkRetry{2};

// Takes the slot's lease for a worker without --standby: retried for kLeaseGrace, then an error
// naming the holder.
void take_lease(Lease& lease, const std::string& slot);

// The slot's status board. Without --standby, a lock file held on this host refuses the start at
// once. A spare that just took the lease may find it still held by the worker it replaces, which
// drains (up to its --drain-timeout) or hangs: it waits kLeaseGrace, then runs without the board
// (nullptr) and opens it once it is free (run()'s status thread).
std::unique_ptr<status::StatusBoard> open_board(const Settings& settings, const std::string& database);

// A spare that took the lease but cannot start its sink (Redis down): it gives the lease back and
// stands by again, as a running worker rides out the same outage; serve() catches it.
class SinkUnavailable : public Error {
public:
    explicit SinkUnavailable(const Error& e) : Error(e.what(), e.sqlstate(), true) {}
};

// The sink. For a spare, a sink that cannot be reached now is SinkUnavailable; for anyone else, a
// failed start (the command line's sink is wrong, or down at a cold start) ends the worker.
std::unique_ptr<Publisher> open_sink(const Settings& settings, const publish::SinkSpec& sink);

}  // namespace docsync::lifecycle
