#pragma once
// The worker's life: with --standby, stand by until the slot's lease is free, run as the active
// worker (lifecycle/run.hpp), and stand by again after stepping down; without it, run once.

#include "config/settings.hpp"

namespace docsync::lifecycle {

// Blocks SIGTERM, SIGINT and SIGHUP in every thread (one thread waits for them), listens for
// /metrics, then serves. Returns the process's exit code; throws docsync::Error when the start fails.
int serve(const Settings& settings);

}  // namespace docsync::lifecycle
