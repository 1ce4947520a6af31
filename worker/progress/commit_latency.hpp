#pragma once
// Commit → publish latency: for each decoded transaction, the time from its commit on the server
// (the commit timestamp the plugin sends with BEGIN) until the engine completed it, that is until
// every doc it changed was published (or failed for good). A transaction that changed no live doc
// completes as soon as it is decoded, so the figure never hides decoding delay.
//
// The server's clock and the worker's must agree (one host, or NTP) for the figure to mean anything;
// a negative difference (clock skew) counts as 0.
//
// Threads: committed() and forget_all() from the stream thread, completed() from the engine's
// threads, histogram() from the status thread; one mutex, held for a hash-map operation.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "common/histogram.hpp"

namespace docsync {

class CommitLatency {
public:
    // Microseconds between the Unix epoch and PostgreSQL's (2000-01-01 00:00 UTC).
    static constexpr std::int64_t kPgEpochOffsetUs = 946684800LL * 1000000;

    // The transaction with `ticket` committed at `commit_time` (microseconds since 2000-01-01 UTC, as
    // the stream's BEGIN record carries it). Call before the engine may complete the ticket.
    void committed(std::uint64_t ticket, std::int64_t commit_time) {
        std::lock_guard lock(mutex_);
        pending_[ticket] = commit_time;
    }

    // The ticket completed at `now`: observes its latency. A ticket not registered (forgotten at a
    // new session) is ignored.
    void completed(std::uint64_t ticket, std::chrono::system_clock::time_point now) {
        auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
        std::lock_guard lock(mutex_);
        auto it = pending_.find(ticket);
        if (it == pending_.end()) return;
        std::int64_t waited_us = now_us - (it->second + kPgEpochOffsetUs);
        pending_.erase(it);
        histogram_.observe(static_cast<double>(waited_us > 0 ? waited_us : 0) / 1e6);
    }

    // A new session: the last one's tickets that never complete would otherwise stay.
    void forget_all() {
        std::lock_guard lock(mutex_);
        pending_.clear();
    }

    Histogram histogram() const {
        std::lock_guard lock(mutex_);
        return histogram_;
    }

private:
    mutable std::mutex mutex_;
    std::unordered_map<std::uint64_t, std::int64_t> pending_;
    Histogram histogram_{kCommitPublishSecondsBounds};
};

}  // namespace docsync
