// The per-connection outbox: each followed channel's floor and its one pending doc.
#include <algorithm>

#include "gateway/session.hpp"

namespace docsync::gateway {

Outbox::Slot* Outbox::find(std::string_view channel) {
    for (auto& s : slots_)
        if (s.channel == channel) return &s;
    return nullptr;
}

Outbox::Slot& Outbox::add(std::string channel, std::optional<DocVersion> floor) {
    slots_.push_back(Slot{std::move(channel), floor, nullptr, false});
    return slots_.back();
}

void Outbox::remove(std::string_view channel) {
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
        if (it->channel != channel) continue;
        if (it->queued) dequeue(&*it);
        slots_.erase(it);
        return;
    }
}

bool Outbox::offer(const DocPtr& doc) {
    Slot* slot = find(doc->channel);
    if (!slot) return false;
    if (slot->floor && doc->version <= *slot->floor) return false;
    // A second text at the pending version replaces it (the client has not had it yet); one at the
    // floor does not go out: the client gets the next version whole (no patch applies on it).
    if (slot->pending && doc->version <= slot->pending->version && !(doc->retexted && other_text(*doc, *slot->pending)))
        return false;
    slot->pending = doc;
    if (!slot->queued) {
        slot->queued = true;
        queue_.push_back(slot);
    }
    return true;
}

DocPtr Outbox::next(bool* patch) {
    while (!queue_.empty()) {
        Slot* slot = queue_.front();
        dequeue(slot);
        DocPtr doc = std::move(slot->pending);
        // raise_floor drops what it passes; this holds the rule even so: the floor never moves down.
        if (!doc || (slot->floor && doc->version <= *slot->floor)) continue;
        if (patch) *patch = doc->base && slot->floor && *slot->floor == *doc->base;
        slot->floor = doc->version;
        return doc;
    }
    return nullptr;
}

void Outbox::raise_floor(Slot& slot, DocVersion floor) {
    if (slot.floor && floor <= *slot.floor) return;
    slot.floor = floor;
    if (slot.pending && slot.pending->version <= floor) {
        slot.pending.reset();
        if (slot.queued) dequeue(&slot);
    }
}

void Outbox::clear() {
    std::vector<Slot*>().swap(queue_);
    slots_.clear();
}

void Outbox::dequeue(Slot* slot) {
    slot->queued = false;
    queue_.erase(std::remove(queue_.begin(), queue_.end(), slot), queue_.end());
    if (queue_.empty()) std::vector<Slot*>().swap(queue_);
}

std::vector<std::optional<DocVersion>> Outbox::floors() const {
    std::vector<std::optional<DocVersion>> out;
    out.reserve(slots_.size());
    for (const auto& s : slots_) out.push_back(s.floor);
    return out;
}

}  // namespace docsync::gateway
