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

bool LookupQueue::take(Lookup& out) {
    if (order_.empty()) return false;
    auto node = queued_.extract(order_.front());
    order_.pop_front();
    busy_.insert(node.key());
    out = std::move(node.mapped());
    ++running_;
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
