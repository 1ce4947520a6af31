#pragma once
// The ticket ledger: which transactions' tickets may complete, in stream order.
//
// A transaction that waits on anything (a doc's next compute, a keys lookup, a definitions reload)
// gets the next sequence number at its COMMIT, and its ticket is queued under that sequence.
// Whatever it waits on holds a sequence; a queued ticket completes once nothing holds its sequence
// or any earlier one. Queued tickets therefore complete in stream order.
//
// That order is what lets one thing hold only the oldest sequence waiting on it: a doc dirtied by
// a thousand transactions holds the first of them, and the later ones cannot complete before it
// anyway. So a doc costs one hold however many transactions wait on it, and a waiting transaction
// costs 8 bytes (its ticket). The coordinator acknowledges only contiguous prefixes of transactions
// (invariant 1 (docs/design.md)); completing in order never reports a transaction done while
// something it dirtied still lacks a durable outcome.
//
// Sequence 0 means "none": holding or releasing it does nothing. Not thread-safe: the engine calls
// it under its mutex.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace docsync {

class TicketLedger {
public:
    // The sequence the transaction being committed gets when it waits on something.
    std::uint64_t next_seq() const { return next_seq_; }

    // Something waits on `seq` until the matching release. Holds count: a sequence is free once
    // every hold on it is released.
    void hold(std::uint64_t seq);
    // A sequence nothing holds (0, or forgotten by reset) is ignored.
    void release(std::uint64_t seq);

    // `slot` is one thing's oldest waiting sequence (0: none) and `seq` waits on it too. The slot
    // keeps a single hold, on the older of the two.
    void wait(std::uint64_t& slot, std::uint64_t seq);
    // The thing `slot` stands for has a durable outcome: its hold is released, the slot emptied.
    void settle(std::uint64_t& slot);
    // The waiters of `from` wait on `to` now (which keeps the older); `from` is emptied.
    void hand_over(std::uint64_t& from, std::uint64_t& to);

    // Queues the ticket of the transaction that got next_seq(); the next one gets the sequence
    // after. A transaction that waits on nothing is not queued: its ticket is complete at once, and
    // its sequence goes to the next transaction.
    void enqueue(std::uint64_t ticket);

    // Appends to `out`, in order, the queued tickets whose sequences nothing holds any more, and
    // forgets them. Returns how many.
    std::size_t collect_completed(std::vector<std::uint64_t>& out);

    // A new stream epoch: forgets every queued ticket (it is never completed) and every hold.
    // Sequences keep growing, so a release of a forgotten sequence is ignored.
    void reset();

    std::size_t waiting() const { return tickets_.size(); }  // queued tickets not yet completed

private:
    std::uint64_t next_seq_ = 1;
    std::uint64_t ticket_base_ = 1;  // tickets_[i] belongs to sequence ticket_base_ + i
    std::deque<std::uint64_t> tickets_;
    std::map<std::uint64_t, std::uint32_t> holds_;  // sequence → how many things wait on it
};

}  // namespace docsync
