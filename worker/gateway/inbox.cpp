// The Inbox: docs received from Redis (or handed over by the Hub) and not yet taken, one per channel.
#include "gateway/hub.hpp"

namespace docsync::gateway {

bool Inbox::put(DocPtr doc) {
    std::lock_guard lock(mutex_);
    bool was_empty = docs_.empty() && reread_.empty();
    if (auto it = at_.find(doc->channel); it != at_.end()) {
        DocPtr& queued = docs_[it->second];
        if (doc->version < queued->version || (doc->version == queued->version && !other_text(*doc, *queued)))
            return was_empty;
        bytes_ = bytes_ - queued->bytes() + doc->bytes();
        queued = std::move(doc);
        ++replaced_;
        return was_empty;
    }
    if (bytes_ + doc->bytes() > max_bytes_) {
        ++overflowed_;
        reread_.insert(doc->channel);
        return was_empty;
    }
    bytes_ += doc->bytes();
    at_.emplace(doc->channel, docs_.size());
    docs_.push_back(std::move(doc));
    return was_empty;
}

bool Inbox::reread(const std::string& channel) {
    std::lock_guard lock(mutex_);
    bool was_empty = docs_.empty() && reread_.empty();
    reread_.insert(channel);
    return was_empty;
}

Inbox::Batch Inbox::take() {
    Batch batch;
    std::lock_guard lock(mutex_);
    batch.docs.swap(docs_);
    batch.reread.assign(reread_.begin(), reread_.end());
    reread_.clear();
    at_.clear();
    bytes_ = 0;
    return batch;
}

std::uint64_t Inbox::replaced() const {
    std::lock_guard lock(mutex_);
    return replaced_;
}

std::uint64_t Inbox::overflowed() const {
    std::lock_guard lock(mutex_);
    return overflowed_;
}

}  // namespace docsync::gateway
