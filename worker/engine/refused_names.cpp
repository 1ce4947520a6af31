// A bounded memory of channel names; see refused_names.hpp.
#include "engine/refused_names.hpp"

namespace docsync {

void RefusedNames::add(const std::string& name) {
    order_.push_back(name);
    auto it = std::prev(order_.end());
    index_.emplace(std::string_view(*it), it);
    bytes_ += name.size();
}

bool RefusedNames::insert_if_room(const std::string& name) {
    if (contains(name) || index_.size() >= max_count_ || bytes_ + name.size() > max_bytes_) return false;
    add(name);
    return true;
}

void RefusedNames::insert_evicting(const std::string& name) {
    if (contains(name) || name.size() > max_bytes_ || max_count_ == 0) return;
    while (!order_.empty() && (index_.size() >= max_count_ || bytes_ + name.size() > max_bytes_)) {
        bytes_ -= order_.front().size();
        index_.erase(std::string_view(order_.front()));
        order_.pop_front();
    }
    add(name);
}

void RefusedNames::erase(std::string_view name) {
    auto it = index_.find(name);
    if (it == index_.end()) return;
    auto node = it->second;
    index_.erase(it);
    bytes_ -= node->size();
    order_.erase(node);
}

void RefusedNames::clear() {
    index_.clear();
    order_.clear();
    bytes_ = 0;
}

}  // namespace docsync
