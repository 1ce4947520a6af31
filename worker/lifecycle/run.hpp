#pragma once
// The active worker: from holding the slot's lease (or about to take it) to a clean stop. Builds the
// components, connects them and runs their threads:
//
//   Stream (stream thread) ──records──▶ Pipeline ──▶ Engine.on_* ──tickets──▶ Coordinator ──ack──▶
//   Stream
//   Engine worker threads ──▶ Executor (Runner) ──▶ Publisher (sink)
//   audit thread: Engine's live docs ──▶ Executor (one at a time) ──▶ Publisher read-back, compared
//   status thread (the caller's): Stream/Coordinator/Engine/Auditor stats ──▶ StatusBoard, /metrics
//   sink watch thread: lost docs after a break ──▶ recompute every live doc
//   signal thread: SIGTERM/SIGINT drain and stop, SIGHUP reopens the log file

#include <signal.h>

#include "config/settings.hpp"
#include "metrics/server.hpp"
#include "replication/lease.hpp"

namespace docsync::lifecycle {

// Runs the worker until the stream ends, a signal in `signals` (blocked in every thread) asks it to
// drain, or it steps down. Returns the process's exit code: 0 after a clean stop, 1 after a fatal
// error (logged), kSteppedDown (lifecycle/start.hpp) when another worker took the lease. Throws
// docsync::Error when the start fails (StartUnavailable for a spare whose start failed for a reason of the moment).
int run(const Settings& settings, Lease& lease, const sigset_t& signals, metrics::Server* metrics_server);

}  // namespace docsync::lifecycle
