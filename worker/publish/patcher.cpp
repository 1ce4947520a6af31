// The cache of last-published docs and the patches made from it.
#include "publish/patcher.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>
#include <utility>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync::publish {

namespace {

// The whole envelope's doc text: between `,"doc":` (which a JSON string, the channel, cannot hold
// unescaped) and the `,"generation":` of the tail.
std::string_view doc_of(std::string_view whole) {
    constexpr std::string_view doc_key = R"(,"doc":)";
    auto at = whole.find(doc_key) + doc_key.size();
    auto end = whole.rfind(R"(,"generation":)");
    return whole.substr(at, end - at);
}

bool older(DocVersion a, DocVersion b) {
    return a.generation < b.generation || (a.generation == b.generation && a.lsn < b.lsn);
}

}  // namespace

Patcher::Patcher(PatcherOptions options, Differ differ) : options_(options), differ_(std::move(differ)) {}

std::size_t Patcher::entry_bytes(std::size_t channel_size, std::size_t text_size) {
    // A std::list node (two links and the Entry), a hash node (a link, the key view, the iterator,
    // the cached hash) and its bucket, the text's shared block (counts, the std::string) and the heap
    // blocks of the channel and text (their lengths plus one, rounded up by the allocator to 16).
    constexpr std::size_t list_node = 2 * sizeof(void*) + sizeof(Entry);
    constexpr std::size_t hash_node = sizeof(void*) + sizeof(std::string_view) + sizeof(Lru::iterator) +
                                      sizeof(std::size_t) + sizeof(void*);
    constexpr std::size_t shared_block = 2 * sizeof(int) + sizeof(void*) + sizeof(std::string);
    auto heap = [](std::size_t n) { return n < 16 ? 0 : (n + 1 + 15) / 16 * 16; };  // SSO below 16
    return list_node + hash_node + shared_block + heap(channel_size) + heap(text_size);
}

PatchPlan Patcher::plan(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) {
    PatchPlan out;
    out.version = version;
    out.whole = make_envelope(channel, doc, version);
    out.whole_size = out.whole.size();
    if (!doc) {
        out.reason = PatchPlan::Reason::Tombstone;
        return out;
    }
    std::string_view text = doc_of(out.whole);
    if (text.size() < options_.min_bytes) {
        out.reason = PatchPlan::Reason::Small;
        return out;
    }
    out.text = std::make_shared<const std::string>(text);
    {
        MutexLock lock(mutex_);
        auto it = index_.find(channel);
        if (it == index_.end() || it->second->ambiguous || !older(it->second->version, version)) {
            out.reason = PatchPlan::Reason::NoBase;
            return out;
        }
        out.base = it->second->version;
        out.base_text = it->second->text;
    }
    std::optional<patch::Patch> made;
    if (*out.base_text == *out.text) {
        // The same doc at a newer version (a row changed that the doc does not show): an empty patch
        // moves a reader's version on for a few dozen bytes.
        made = patch::Patch{patch::Form::JsonPatch, "[]"};
    } else {
        try {
            made = differ_(*out.base_text, *out.text);
        } catch (const Error&) {
            made.reset();  // a base or doc the patch core will not take: sent whole
        } catch (const std::exception& e) {
            // Out of memory (std::bad_alloc) or another failure inside the diff: the doc is sent
            // whole, which needs no more than the publish already holds. Logged once a minute at most.
            made.reset();
            static std::atomic<std::int64_t> logged_at{std::numeric_limits<std::int64_t>::min()};
            const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                                         std::chrono::steady_clock::now().time_since_epoch())
                                         .count();
            std::int64_t last = logged_at.load(std::memory_order_relaxed);
            if ((last == std::numeric_limits<std::int64_t>::min() || now - last >= 60) &&
                logged_at.compare_exchange_strong(last, now, std::memory_order_relaxed))
                log_warning("publish", "could not make a patch for " + channel + " (" + e.what() +
                                           "): the doc is sent whole (logged once a minute at most)");
        }
    }
    if (!made) {
        out.reason = PatchPlan::Reason::NotSmaller;
        return out;
    }
    auto kind = made->form == patch::Form::JsonPatch ? EnvelopeKind::JsonPatch : EnvelopeKind::MergePatch;
    std::string envelope = make_patch_envelope(channel, kind, made->text, out.base, version);
    if (envelope.size() * 2 > out.whole.size()) {
        out.reason = PatchPlan::Reason::NotSmaller;
        return out;
    }
    out.patch_size = envelope.size();
    out.patch = std::move(envelope);
    out.reason = PatchPlan::Reason::Patch;
    return out;
}

void Patcher::count(const PatchPlan& plan, bool patch_sent) {
    if (patch_sent) {
        patches_.fetch_add(1, std::memory_order_relaxed);
        bytes_saved_.fetch_add(plan.whole_size - plan.patch_size, std::memory_order_relaxed);
    } else if (plan.reason == PatchPlan::Reason::NoBase || plan.reason == PatchPlan::Reason::Patch) {
        // Patch: the sink sent the whole doc instead (the key held another version)
        whole_no_base_.fetch_add(1, std::memory_order_relaxed);
    } else if (plan.reason == PatchPlan::Reason::NotSmaller) {
        whole_not_smaller_.fetch_add(1, std::memory_order_relaxed);
    }
}

void Patcher::record(const std::string& channel, const PatchPlan& plan, PatchOutcome outcome) {
    if (outcome == PatchOutcome::Stale) return;  // the sink holds a newer doc, which the cache may too
    if (outcome != PatchOutcome::Failed) count(plan, outcome == PatchOutcome::PatchSent);
    MutexLock lock(mutex_);
    if (outcome == PatchOutcome::Failed || !plan.text) {
        drop(channel);
        return;
    }
    auto it = index_.find(channel);
    // A doc taken after a newer one (two threads published the channel at once): the sink checked it
    // against what it holds, the cache keeps the newer one.
    if (it != index_.end() && older(plan.version, it->second->version)) return;
    if (outcome == PatchOutcome::WholeSentEqual) {
        // The sink already held this version: readers that took it keep the text they hold, which is
        // this one only if the entry recorded every publish at this version and they were all this
        // text. An entry dropped meanwhile (evicted, a failure, below min_bytes, a tombstone) or
        // holding another text or an older version knows nothing of what readers hold: the entry
        // becomes this doc marked, never a base, so that a publish at this version recorded after
        // this one (two threads) cannot make it one either.
        const bool known = it != index_.end() && !it->second->ambiguous && it->second->version == plan.version &&
                           *it->second->text == *plan.text;
        put(channel, plan);
        if (!known) mark(channel);
        return;
    }
    put(channel, plan);
}

bool Patcher::claim(const std::string& channel, const PatchPlan& plan, bool patch_allowed) {
    MutexLock lock(mutex_);
    auto it = index_.find(channel);
    const bool patch = patch_allowed && plan.patch && it != index_.end() && !it->second->ambiguous &&
                       it->second->version == plan.base && it->second->text == plan.base_text;
    if (plan.text)
        put(channel, plan);
    else
        drop(channel);
    lock.unlock();
    count(plan, patch);
    return patch;
}

void Patcher::failed(const std::string& channel) {
    MutexLock lock(mutex_);
    drop(channel);
}

void Patcher::clear() {
    MutexLock lock(mutex_);
    index_.clear();
    lru_.clear();
    bytes_ = 0;
}

void Patcher::drop(const std::string& channel) {
    auto it = index_.find(channel);
    if (it == index_.end()) return;
    auto entry = it->second;
    bytes_ -= entry->bytes;
    index_.erase(it);
    lru_.erase(entry);
}

void Patcher::put(const std::string& channel, const PatchPlan& plan) {
    auto it = index_.find(channel);
    if (it != index_.end()) {
        Entry& entry = *it->second;
        // The same version again: with the same text it is the same doc; with another text (a query
        // whose result's order is not fixed), neither may be a base, as a reader may hold either.
        if (entry.version == plan.version) {
            if (*entry.text != *plan.text) entry.ambiguous = true;
        } else {
            entry.version = plan.version;
            entry.ambiguous = false;
        }
        bytes_ -= entry.bytes;
        entry.text = plan.text;
        entry.bytes = entry_bytes(entry.channel.size(), entry.text->size());
        bytes_ += entry.bytes;
        lru_.splice(lru_.begin(), lru_, it->second);
    } else {
        lru_.push_front(Entry{channel, plan.text, plan.version, false, entry_bytes(channel.size(), plan.text->size())});
        bytes_ += lru_.front().bytes;
        index_.emplace(lru_.front().channel, lru_.begin());
    }
    evict();
}

void Patcher::mark(const std::string& channel) {
    if (auto it = index_.find(channel); it != index_.end()) it->second->ambiguous = true;  // unless evicted
}

void Patcher::evict() {
    while (bytes_ > options_.memory && !lru_.empty()) {
        const Entry& last = lru_.back();
        bytes_ -= last.bytes;
        index_.erase(last.channel);
        lru_.pop_back();
    }
}

PatcherCounters Patcher::counters() const {
    PatcherCounters out;
    out.patches = patches_.load(std::memory_order_relaxed);
    out.whole_no_base = whole_no_base_.load(std::memory_order_relaxed);
    out.whole_not_smaller = whole_not_smaller_.load(std::memory_order_relaxed);
    out.bytes_saved = bytes_saved_.load(std::memory_order_relaxed);
    MutexLock lock(mutex_);
    out.cache_bytes = bytes_;
    out.cache_entries = lru_.size();
    return out;
}

}  // namespace docsync::publish
