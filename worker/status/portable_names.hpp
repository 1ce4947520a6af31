#pragma once
// The names a portable install's docsync.worker_status uses (docs/portable.md, "The status
// contract"; its CHECK constraints in sql/portable/40_status.sql) for what the status file spells as
// numbers.

#include <cstdint>
#include <optional>
#include <string>

#include "status/status_board.hpp"

namespace docsync::status {

// starting, connecting, streaming, reconnecting (also while the WAL safety valve makes the slot
// anew), draining or stopped.
std::string portable_state_name(WorkerState state);
// startup, valve, gap (a new slot, server or timeline; a publication that gained a table), sink or
// definitions (a setting doc queries follow); nullopt for none or a value outside the enum.
std::optional<std::string> portable_recompute_name(std::uint32_t reason);

}  // namespace docsync::status
