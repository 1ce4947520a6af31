#pragma once
// A bounded memory of channel names (the refused channels DocSet remembers): at most max_count
// names and max_bytes of their text, the oldest forgotten first. Not thread-safe: DocSet's caller
// holds the engine's mutex.

#include <cstddef>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace docsync {

class RefusedNames {
public:
    RefusedNames(std::size_t max_count, std::size_t max_bytes) : max_count_(max_count), max_bytes_(max_bytes) {}
    RefusedNames(const RefusedNames&) = delete;
    RefusedNames& operator=(const RefusedNames&) = delete;

    bool contains(std::string_view name) const { return index_.count(name) > 0; }
    // Remembers `name` when both bounds leave room for it; false when they do not (or it is known).
    bool insert_if_room(const std::string& name);
    // Remembers `name`, forgetting the oldest names until both bounds hold. A name longer than
    // max_bytes is not remembered.
    void insert_evicting(const std::string& name);
    void erase(std::string_view name);
    void clear();
    std::size_t size() const { return index_.size(); }
    std::size_t bytes() const { return bytes_; }
    bool empty() const { return index_.empty(); }

private:
    void add(const std::string& name);

    std::size_t max_count_;
    std::size_t max_bytes_;
    std::size_t bytes_ = 0;
    std::list<std::string> order_;  // oldest first
    std::unordered_map<std::string_view, std::list<std::string>::iterator> index_;  // views into order_
};

}  // namespace docsync
