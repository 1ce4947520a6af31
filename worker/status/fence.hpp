#pragma once
// Fencing on this host: a spare that holds a slot's lease kills (SIGKILL) the worker it replaced when
// that worker, frozen or draining after it lost the lease, still holds a file the new active worker
// needs (the JSONL sink file's lock; the slot's lock file: status_board.hpp, kill_lock_owner).

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace docsync::status {

// The pid of the process of this host holding a flock() on `path` (from /proc/locks), or nullopt.
std::optional<int> flock_holder(const std::filesystem::path& path);

// Whether process `pid` is a docsync-worker of the slot: named docsync-worker, and holding the slot's
// lock file in `dir` or naming the slot on its command line (--slot NAME, --slot=NAME).
bool is_slot_worker(int pid, const std::filesystem::path& dir, std::string_view database, std::string_view slot);

// Kills (SIGKILL) the holder of a flock() on `path` when it is another docsync-worker of the slot
// (is_slot_worker); its pid when it did.
std::optional<int> kill_flock_holder(const std::filesystem::path& path, const std::filesystem::path& dir,
                                     std::string_view database, std::string_view slot);

}  // namespace docsync::status
