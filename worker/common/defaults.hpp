#pragma once
// Defaults shared by the worker's settings (config/settings.hpp) and the components that take them
// as options (the replication stream), so each default is written once.

#include <chrono>
#include <cstdint>

namespace docsync::defaults {

inline constexpr std::uint64_t kMaxPendingTxns = 100000;         // --max-pending-txns
inline constexpr std::uint64_t kMaxPendingBytes = 256ull << 20;  // --max-pending-bytes
inline constexpr std::uint64_t kStreamMemory = 64ull << 20;     // --stream-memory
inline constexpr std::uint64_t kMaxRetainedWal = 1ull << 30;     // --max-retained-wal
inline constexpr std::uint64_t kBatch = 128;                     // --batch
inline constexpr std::chrono::milliseconds kStatusInterval{10000};  // --status-interval

}  // namespace docsync::defaults
