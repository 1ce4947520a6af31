#pragma once
// The worker's metrics: the status thread's readings and the snapshot the status file is written
// from, as Prometheus families named docsync_*. The counters are the status file's totals, so
// /metrics and docsync.status agree (at the same status tick); a few figures the file has no room
// for (per-query publishes, the valve's retained WAL, the histograms) come from the same readings.
//
//   server.publish(metrics::render(readings, snapshot, std::chrono::system_clock::now()));

#include <string>

#include "status/snapshot.hpp"

namespace docsync::metrics {

// The exposition text for one status tick. `now` is the snapshot's moment (ack lag in seconds).
std::string render(const status::Readings& readings, const status::StatusSnapshot& snapshot, status::WallTime now);
// The exposition of a hot spare waiting for the slot's lease since `since` (--standby): docsync_standby
// 1 and no stream or counters (docsync_streaming is absent, so "not streaming" alerts only the active).
std::string render_standby(status::WallTime since, status::WallTime now);

}  // namespace docsync::metrics
