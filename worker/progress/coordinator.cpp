// The delivery progress coordinator (see coordinator.hpp).
#include "progress/coordinator.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/lsn.hpp"

namespace docsync {

DeliveryProgressCoordinator::DeliveryProgressCoordinator(Acknowledger* acknowledger, Lsn checkpoint)
    : acknowledger_(acknowledger), checkpoint_(checkpoint) {}

void DeliveryProgressCoordinator::set_acknowledger(Acknowledger* acknowledger) {
    MutexLock lock(mutex_);
    acknowledger_ = acknowledger;
}

std::uint64_t DeliveryProgressCoordinator::register_item(Lsn position, bool group_end, std::size_t bytes) {
    MutexLock lock(mutex_);
    if (groups_.empty() || groups_.back().closed) {
        Group g;
        g.first_ticket = next_ticket_;
        groups_.push_back(std::move(g));
    }
    Group& group = groups_.back();
    std::uint64_t ticket = next_ticket_++;
    group.items++;
    group.completed.push_back(false);
    group.position = std::max(group.position, position);
    group.bytes += bytes;
    group.closed = group_end;
    // Debug lines "register/complete <end_lsn>" and "ack <lsn>" (stream) let a checker prove from
    // the log that no acknowledgement ever passed an incomplete transaction.
    if (group_end && log_enabled(LogLevel::Debug)) log_debug("progress", "register " + format_lsn(group.position));
    pending_bytes_ += bytes;
    pending_items_++;
    registered_++;
    return ticket;
}

Lsn DeliveryProgressCoordinator::complete(std::uint64_t ticket) {
    MutexLock lock(mutex_);
    if (ticket == 0 || ticket >= next_ticket_)
        throw Error("delivery progress completed before registration (ticket " + std::to_string(ticket) + ")");
    if (ticket < epoch_first_ticket_) {  // an older stream session: its groups were forgotten
        stale_++;
        return checkpoint_;
    }
    // Groups hold contiguous, increasing ticket ranges: find the last one starting at or before it.
    auto it = std::upper_bound(groups_.begin(), groups_.end(), ticket,
                               [](std::uint64_t t, const Group& g) { return t < g.first_ticket; });
    if (it == groups_.begin())
        throw Error("delivery progress completed twice (ticket " + std::to_string(ticket) + ")");
    Group& group = *std::prev(it);
    std::size_t index = ticket - group.first_ticket;
    if (index >= group.items || group.completed[index])
        throw Error("delivery progress completed twice (ticket " + std::to_string(ticket) + ")");
    group.completed[index] = true;
    group.done++;
    completed_++;
    if (group.closed && group.done == group.items && log_enabled(LogLevel::Debug))
        log_debug("progress", "complete " + format_lsn(group.position));
    advance_locked();
    return checkpoint_;
}

Lsn DeliveryProgressCoordinator::finalize() {
    MutexLock lock(mutex_);
    if (!groups_.empty()) groups_.back().closed = true;
    advance_locked();
    return checkpoint_;
}

void DeliveryProgressCoordinator::advance_locked() {
    Lsn advanced = checkpoint_;
    while (!groups_.empty() && groups_.front().closed && groups_.front().done == groups_.front().items) {
        const Group& g = groups_.front();
        advanced = std::max(advanced, g.position);
        pending_bytes_ -= g.bytes;
        pending_items_ -= g.items;
        groups_.pop_front();
    }
    if (advanced > checkpoint_) {
        checkpoint_ = advanced;
        if (acknowledger_) acknowledger_->acknowledge(checkpoint_);
    }
}

bool DeliveryProgressCoordinator::acknowledge_idle(Lsn wal_end) {
    MutexLock lock(mutex_);
    if (!groups_.empty() || wal_end <= checkpoint_) return false;
    checkpoint_ = wal_end;
    if (acknowledger_) acknowledger_->acknowledge(checkpoint_);
    return true;
}

std::uint64_t DeliveryProgressCoordinator::new_epoch() {
    MutexLock lock(mutex_);
    groups_.clear();
    pending_bytes_ = 0;
    pending_items_ = 0;
    epoch_first_ticket_ = next_ticket_;
    return ++epoch_;
}

std::uint64_t DeliveryProgressCoordinator::rebase(Lsn lsn) {
    MutexLock lock(mutex_);
    groups_.clear();
    pending_bytes_ = 0;
    pending_items_ = 0;
    epoch_first_ticket_ = next_ticket_;
    checkpoint_ = lsn;
    if (log_enabled(LogLevel::Debug)) log_debug("progress", "rebase " + format_lsn(lsn));
    return ++epoch_;
}

void DeliveryProgressCoordinator::set_checkpoint_floor(Lsn lsn) {
    MutexLock lock(mutex_);
    checkpoint_ = std::max(checkpoint_, lsn);
}

Lsn DeliveryProgressCoordinator::checkpoint() const {
    MutexLock lock(mutex_);
    return checkpoint_;
}

std::size_t DeliveryProgressCoordinator::pending_groups() const {
    MutexLock lock(mutex_);
    return groups_.size();
}

std::size_t DeliveryProgressCoordinator::pending_bytes() const {
    MutexLock lock(mutex_);
    return pending_bytes_;
}

bool DeliveryProgressCoordinator::idle() const {
    MutexLock lock(mutex_);
    return groups_.empty();
}

CoordinatorStats DeliveryProgressCoordinator::stats() const {
    MutexLock lock(mutex_);
    CoordinatorStats s;
    s.epoch = epoch_;
    s.checkpoint = checkpoint_;
    s.pending_groups = groups_.size();
    s.pending_items = pending_items_;
    s.pending_bytes = pending_bytes_;
    s.registered = registered_;
    s.completed = completed_;
    s.stale_completions = stale_;
    return s;
}

}  // namespace docsync
