// Keys lookups; see lookups.hpp.
#include "engine/lookups.hpp"

#include <algorithm>
#include <limits>

namespace docsync {

void Lookup::merge(Lookup&& other) {
    seqs.insert(seqs.end(), other.seqs.begin(), other.seqs.end());
    for (auto xid : other.xids)
        if (std::find(xids.begin(), xids.end(), xid) == xids.end()) xids.push_back(xid);
    end_lsn = std::max(end_lsn, other.end_lsn);
    epoch = std::max(epoch, other.epoch);
}

void LookupQueue::enqueue(Lookup lookup) {
    auto key = lookup.key();
    if (busy_.count(key)) {
        auto [it, fresh] = again_.try_emplace(key);
        if (fresh) {
            it->second = std::move(lookup);
        } else {
            it->second.merge(std::move(lookup));
        }
        return;
    }
    auto [it, fresh] = queued_.try_emplace(key);
    if (!fresh) {
        it->second.merge(std::move(lookup));
        return;
    }
    it->second = std::move(lookup);
    order_.push_back(std::move(key));
    wake_.notify_one();
}

bool LookupQueue::take(std::vector<Lookup>& out, std::size_t max) {
    out.clear();
    if (order_.empty()) return false;
    const Definitions* defs = std::get<0>(order_.front());
    std::uint16_t watch = std::get<1>(order_.front());
    // The oldest, then more of the same watch from a bounded window after it (as DocSet::take).
    std::vector<Lookup::Key> others;
    for (std::size_t seen = 0; out.size() < max && !order_.empty() && seen < 4 * max; ++seen) {
        Lookup::Key key = std::move(order_.front());
        order_.pop_front();
        if (std::get<0>(key) != defs || std::get<1>(key) != watch) {
            others.push_back(std::move(key));
            continue;
        }
        auto node = queued_.extract(key);
        busy_.insert(node.key());
        out.push_back(std::move(node.mapped()));
        ++running_;
    }
    order_.insert(order_.begin(), std::make_move_iterator(others.begin()), std::make_move_iterator(others.end()));
    return true;
}

void LookupQueue::retry(Nanos due, Lookup lookup) { delayed_.emplace(due, std::move(lookup)); }

void LookupQueue::finish(const Lookup::Key& key, Nanos due, Nanos now) {
    --running_;
    busy_.erase(key);
    auto again = again_.find(key);
    if (again == again_.end()) return;
    if (due > now) {
        busy_.insert(key);
        paced_.emplace(due, key);
    } else {
        Lookup next = std::move(again->second);
        again_.erase(again);
        enqueue(std::move(next));
    }
}

void LookupQueue::promote_due(Nanos t) {
    while (!delayed_.empty() && delayed_.begin()->first <= t) {
        auto node = delayed_.extract(delayed_.begin());
        enqueue(std::move(node.mapped()));
    }
    while (!paced_.empty() && paced_.begin()->first <= t) {
        auto key = paced_.begin()->second;
        paced_.erase(paced_.begin());
        busy_.erase(key);
        auto node = again_.extract(key);
        if (!node.empty()) enqueue(std::move(node.mapped()));
    }
}

Nanos LookupQueue::next_due() const {
    Nanos due = std::numeric_limits<Nanos>::max();
    if (!delayed_.empty()) due = delayed_.begin()->first;
    if (!paced_.empty()) due = std::min(due, paced_.begin()->first);
    return due;
}

void LookupQueue::forget_waiters() {
    for (auto& [key, lookup] : queued_) lookup.seqs.clear();
    for (auto& [key, lookup] : again_) lookup.seqs.clear();
    for (auto& [due, lookup] : delayed_) lookup.seqs.clear();
}

std::uint64_t LookupQueue::depth() const {
    return queued_.size() + again_.size() + delayed_.size() + running_;
}

}  // namespace docsync
