// The ticket ledger; the model is described in ticket_ledger.hpp.
#include "engine/ticket_ledger.hpp"

namespace docsync {

void TicketLedger::hold(std::uint64_t seq) {
    if (seq) ++holds_[seq];
}

void TicketLedger::release(std::uint64_t seq) {
    if (!seq) return;
    auto it = holds_.find(seq);
    if (it == holds_.end()) return;
    if (--it->second == 0) holds_.erase(it);
}

void TicketLedger::wait(std::uint64_t& slot, std::uint64_t seq) {
    if (!seq) return;
    if (slot == 0) {
        slot = seq;
        hold(seq);
    } else if (seq < slot) {
        hold(seq);
        release(slot);
        slot = seq;
    }
}

void TicketLedger::settle(std::uint64_t& slot) {
    release(slot);
    slot = 0;
}

void TicketLedger::hand_over(std::uint64_t& from, std::uint64_t& to) {
    if (!from) return;
    if (!to) {  // the hold moves as it is
        to = from;
        from = 0;
        return;
    }
    wait(to, from);
    settle(from);
}

void TicketLedger::enqueue(std::uint64_t ticket) {
    tickets_.push_back(ticket);
    ++next_seq_;
}

std::size_t TicketLedger::collect_completed(std::vector<std::uint64_t>& out) {
    std::uint64_t watermark = holds_.empty() ? next_seq_ : holds_.begin()->first;
    std::size_t n = 0;
    while (!tickets_.empty() && ticket_base_ < watermark) {
        out.push_back(tickets_.front());
        tickets_.pop_front();
        ++ticket_base_;
        ++n;
    }
    return n;
}

void TicketLedger::reset() {
    tickets_.clear();
    ticket_base_ = next_seq_;
    holds_.clear();
}

}  // namespace docsync
