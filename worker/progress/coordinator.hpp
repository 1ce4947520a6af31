#pragma once
// The delivery progress coordinator: acknowledges the slot only at contiguous transaction boundaries.
//
// Work is registered in source (stream) order before it is dispatched; completions arrive in any order
// from any thread. The checkpoint — and with it the acknowledgement sent upstream — advances only when
// every item of the oldest closed group has a durable outcome, and then over every group that became
// contiguous. A group is one source transaction; its position is the COMMIT's end LSN.
//
// Tickets name registered items. They increase across the coordinator's life; each stream session
// (epoch) starts at a fresh ticket, and new_epoch() forgets every pending group, so a completion from an
// older epoch is ignored (a transaction redelivered after a reconnect is registered again under a new
// ticket) instead of tripping "completed before registration".
//
// Thread safety: every member may be called from any thread. The acknowledger is called with the
// coordinator's lock held, in increasing order; it must be cheap and must not call back into the
// coordinator.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "common/lsn.hpp"
#include "common/thread_annotations.hpp"

namespace docsync {

// Receives the positions that became durable. Implemented by the replication stream (which sends
// them in its standby status updates) and by fakes in unit tests.
class Acknowledger {
public:
    virtual ~Acknowledger() = default;
    // `lsn` is durable: everything before it has a durable outcome. Called with increasing values.
    virtual void acknowledge(Lsn lsn) = 0;
};

struct CoordinatorStats {
    std::uint64_t epoch = 0;
    Lsn checkpoint = 0;             // highest position acknowledged
    std::size_t pending_groups = 0;  // registered groups not yet advanced past (open one included)
    std::size_t pending_items = 0;
    std::size_t pending_bytes = 0;
    std::uint64_t registered = 0;   // items, over the coordinator's life
    std::uint64_t completed = 0;    // items completed in their own epoch
    std::uint64_t stale_completions = 0;  // completions from older epochs, ignored
};

class DeliveryProgressCoordinator {
public:
    explicit DeliveryProgressCoordinator(Acknowledger* acknowledger = nullptr, Lsn checkpoint = 0);
    DeliveryProgressCoordinator(const DeliveryProgressCoordinator&) = delete;
    DeliveryProgressCoordinator& operator=(const DeliveryProgressCoordinator&) = delete;

    // Sets the acknowledger (before the stream starts; the stream and the coordinator refer to each
    // other).
    void set_acknowledger(Acknowledger* acknowledger);

    // Registers one item of the current source group at `position`; `group_end` closes the group (its
    // position is then the last item's). `bytes` counts toward the backpressure cap until the group
    // is advanced past. Returns the item's ticket (never 0).
    std::uint64_t register_item(Lsn position, bool group_end, std::size_t bytes = 0);

    // A whole source transaction as one item, registered at its COMMIT: `end_lsn` is the COMMIT's end
    // LSN. Returns its ticket.
    std::uint64_t register_txn(Lsn end_lsn, std::size_t bytes = 0) { return register_item(end_lsn, true, bytes); }

    // Marks the item durably resolved and advances every newly contiguous group. Returns the
    // checkpoint after the call. A ticket from an older epoch is ignored; a ticket never issued, or
    // completed twice, throws docsync::Error (a bug in the caller, never a data condition).
    Lsn complete(std::uint64_t ticket);

    // Closes the last group at a clean end of the stream and advances. Returns the checkpoint.
    Lsn finalize();

    // The keepalive rule: when nothing is registered and pending, every position up to `wal_end` is
    // durable (the server never places a commit still being decoded before a keepalive's WAL end).
    // The caller must not offer a position while it is inside a transaction it has not registered
    // yet. Returns true when the checkpoint moved.
    bool acknowledge_idle(Lsn wal_end);

    // Starts a new stream epoch: forgets every pending group; completions of their tickets are
    // ignored from now on. Returns the new epoch.
    std::uint64_t new_epoch();

    // A new epoch on a new slot or server: forgets every pending group and sets the checkpoint to
    // `lsn`, lower or not (positions of the old slot or server mean nothing on the new one).
    std::uint64_t rebase(Lsn lsn);

    // Raises the checkpoint to `lsn` without acknowledging (the slot's confirmed position at start),
    // never lowering it. Used so redelivered transactions at or below it are recognised as done.
    void set_checkpoint_floor(Lsn lsn);

    Lsn checkpoint() const;
    std::size_t pending_groups() const;
    std::size_t pending_bytes() const;
    bool idle() const;  // nothing registered and pending
    CoordinatorStats stats() const;

private:
    struct Group {
        std::uint64_t first_ticket = 0;  // tickets first_ticket … first_ticket + items - 1
        std::size_t items = 0;
        std::size_t done = 0;
        std::vector<bool> completed;
        Lsn position = 0;
        std::size_t bytes = 0;
        bool closed = false;
    };

    void advance_locked() REQUIRES(mutex_);  // pops every closed, fully completed group at the front

    mutable Mutex mutex_;
    Acknowledger* acknowledger_ GUARDED_BY(mutex_);
    std::deque<Group> groups_ GUARDED_BY(mutex_);
    std::uint64_t next_ticket_ GUARDED_BY(mutex_) = 1;
    std::uint64_t epoch_first_ticket_ GUARDED_BY(mutex_) = 1;
    std::uint64_t epoch_ GUARDED_BY(mutex_) = 1;
    Lsn checkpoint_ GUARDED_BY(mutex_);
    std::size_t pending_bytes_ GUARDED_BY(mutex_) = 0;
    std::size_t pending_items_ GUARDED_BY(mutex_) = 0;
    std::uint64_t registered_ GUARDED_BY(mutex_) = 0;
    std::uint64_t completed_ GUARDED_BY(mutex_) = 0;
    std::uint64_t stale_ GUARDED_BY(mutex_) = 0;
};

}  // namespace docsync
