#pragma once
// The cache of last-published docs and the patches made from it (docs/patches.md), shared by every
// sink kind. Per channel it holds the compact JSON text and the version of the doc this process last
// published there, for docs of at least `min_bytes`, evicting the least recently published past
// `memory` bytes (channel + text + the nodes that hold them, counted by entry_bytes()).
//
// A sink asks plan() for each doc before it publishes it: the whole envelope always, and a patch
// envelope when the cache holds a base that may be used (strictly older, never published with
// another text at its version, and the patch envelope at most half the whole one). Once the sink
// knows what became of the doc it calls record() (Redis: the script's reply) or, where the order of
// writes decides (JSONL: the previous line of the channel must hold the base), claim() under its
// write lock and then failed() if the write did not go through.
//
// Thread-safety: every member may be called from any thread, concurrently. The diff runs outside the
// lock: plan() takes the base's text by a shared pointer, so an entry replaced meanwhile is never
// read half written.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/thread_annotations.hpp"
#include "engine/seams.hpp"
#include "envelope/envelope.hpp"
#include "patch/json_patch.hpp"

namespace docsync::publish {

struct PatcherOptions {
    std::uint64_t memory = 64ull << 20;  // --patch-memory
    std::uint64_t min_bytes = 1024;      // --patch-min-bytes
};

// What to send for one doc.
struct PatchPlan {
    std::string whole;                  // the whole envelope, always
    std::optional<std::string> patch;   // the patch envelope, when there is one
    DocVersion base;                    // the patch's base version
    DocVersion version;
    // The envelopes' sizes, kept for the counters once a sink has moved the envelopes out.
    std::size_t whole_size = 0;
    std::size_t patch_size = 0;
    // Why there is no patch, for the metrics (Patch when there is one).
    enum class Reason { Patch, NoBase, NotSmaller, Small, Tombstone } reason = Reason::NoBase;
    // The doc's compact text, shared with the cache entry record()/claim() makes of it; null for a
    // tombstone.
    std::shared_ptr<const std::string> text;
    std::shared_ptr<const std::string> base_text;  // what the patch was made from
};

// What became of a planned doc at the sink.
enum class PatchOutcome {
    PatchSent,  // taken, and the patch went out (the Redis script's 2)
    WholeSent,  // taken, the whole doc went out (1)
    // Taken at a version equal to the one the sink held, or where it held none (3): the whole doc
    // went out, and readers
    // that hold that version keep what they hold, which may be another text. A base only when the
    // entry holds this very text at this very version (every publish at it was recorded).
    WholeSentEqual,
    Stale,      // refused: the sink holds a newer version (0); changes nothing
    Failed,     // a transient failure: what the sink holds is unknown, the entry is dropped
};

// Counters for /metrics (docs/monitoring.md).
struct PatcherCounters {
    std::uint64_t patches = 0;            // patches published
    std::uint64_t whole_no_base = 0;      // whole docs sent with no usable base (cache, key)
    std::uint64_t whole_not_smaller = 0;  // whole docs sent because the patch was not smaller
    std::uint64_t bytes_saved = 0;        // whole envelope bytes minus patch envelope bytes, summed
    std::uint64_t cache_bytes = 0;
    std::uint64_t cache_entries = 0;
};

class Patcher {
public:
    using Differ = std::function<std::optional<patch::Patch>(std::string_view, std::string_view)>;
    // `differ` is docsync::patch::diff but for tests.
    explicit Patcher(PatcherOptions options, Differ differ = &patch::diff);

    // The envelopes of one doc. Throws docsync::Error (permanent) when the doc is not valid JSON, as
    // make_envelope does.
    PatchPlan plan(const std::string& channel, const std::optional<std::string>& doc, DocVersion version);
    // The sink's outcome for a planned doc (Redis): a taken doc replaces the entry unless the cache
    // already holds a newer version; a tombstone, a doc below min_bytes and a failure drop it. A doc
    // taken at the version the sink held (WholeSentEqual) is a base only when the entry already held
    // it with the same text; otherwise the entry is marked (never a base), so the next doc goes whole.
    void record(const std::string& channel, const PatchPlan& plan, PatchOutcome outcome);
    // For a sink whose previous write of the channel is the base (JSONL), called in write order under
    // the sink's own lock: true when the patch may be written (the entry still holds the plan's base),
    // and the entry becomes the new doc whichever is written. failed() undoes it when the write fails.
    // `patch_allowed` false: the sink writes the whole doc whatever the cache holds (the entry is
    // still updated).
    bool claim(const std::string& channel, const PatchPlan& plan, bool patch_allowed = true);
    void failed(const std::string& channel);
    // Forgets every entry (the sink lost its docs, or a reader may hold anything).
    void clear();

    PatcherCounters counters() const;
    const PatcherOptions& options() const { return options_; }
    // What an entry costs: its channel and text with the list and hash nodes that hold them.
    static std::size_t entry_bytes(std::size_t channel_size, std::size_t text_size);

private:
    struct Entry {
        std::string channel;
        std::shared_ptr<const std::string> text;
        DocVersion version;
        bool ambiguous = false;  // another text was published at `version`: never a base
        std::size_t bytes = 0;
    };
    using Lru = std::list<Entry>;  // most recently published first

    void drop(const std::string& channel) REQUIRES(mutex_);
    void put(const std::string& channel, const PatchPlan& plan) REQUIRES(mutex_);
    void mark(const std::string& channel) REQUIRES(mutex_);  // never a base until a newer version
    void evict() REQUIRES(mutex_);
    void count(const PatchPlan& plan, bool patch_sent);

    const PatcherOptions options_;
    const Differ differ_;
    mutable Mutex mutex_;
    Lru lru_ GUARDED_BY(mutex_);
    std::unordered_map<std::string_view, Lru::iterator> index_ GUARDED_BY(mutex_);
    std::size_t bytes_ GUARDED_BY(mutex_) = 0;
    std::atomic<std::uint64_t> patches_{0};
    std::atomic<std::uint64_t> whole_no_base_{0};
    std::atomic<std::uint64_t> whole_not_smaller_{0};
    std::atomic<std::uint64_t> bytes_saved_{0};
};

}  // namespace docsync::publish
