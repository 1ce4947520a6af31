#pragma once
// The transaction being decoded: what it dirtied, all of it scheduled at its COMMIT, when its
// sequence is known and its ticket waits for the outcomes. Not thread-safe: the engine calls it
// under its mutex.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/doc.hpp"
#include "engine/lookups.hpp"

namespace docsync {

class OpenTxn {
public:
    // BEGIN: what an earlier transaction left (one cut short by a reset) is forgotten.
    void begin(std::uint64_t xid) {
        clear();
        xid_ = xid;
    }

    // The transaction dirtied `entry`: it waits for the compute scheduled at COMMIT, which must see
    // the transaction.
    void touch(Entry& entry) {
        Doc& doc = entry.second;
        if (doc.has(DocFlags::Txn)) return;
        doc.set(DocFlags::Txn);
        doc.add_xid(xid_);
        docs_.push_back(&entry);
    }
    // A key could not be read: every live doc of `query` is dirtied at COMMIT.
    void broadcast(std::uint16_t query) {
        if (std::find(broadcasts_.begin(), broadcasts_.end(), query) == broadcasts_.end())
            broadcasts_.push_back(query);
    }
    // A keys lookup with `args` for reverse-index watch `watch` of `defs`. The same one among the
    // last `window` asked for is not asked again: a big transaction stays linear.
    void lookup(std::shared_ptr<const Definitions> defs, std::uint16_t watch, const SqlArgs& args,
                std::size_t window) {
        std::size_t scanned = 0;
        for (auto it = lookups_.rbegin(); it != lookups_.rend() && scanned < window; ++it, ++scanned)
            if (it->watch == watch && it->args == args) return;
        Lookup lookup;
        lookup.defs = std::move(defs);
        lookup.watch = watch;
        lookup.args = args;
        lookup.xids = {xid_};
        lookups_.push_back(std::move(lookup));
    }
    // The transaction changed the definitions (or, by DDL, what a doc query reads).
    void mark_definitions() { definitions_ = true; }
    // It wrote one of docsync's definition tables (which only the API, as the extension's owner,
    // writes), not only sent a definitions message (which any role can).
    void mark_definition_rows() { definitions_ = definition_rows_ = true; }

    const std::vector<std::uint16_t>& broadcasts() const { return broadcasts_; }
    // The docs it dirtied, no longer held back for the COMMIT: they can be scheduled now.
    const std::vector<Entry*>& release_docs() {
        for (Entry* entry : docs_) entry->second.clear(DocFlags::Txn);
        return docs_;
    }
    std::vector<Lookup>& lookups() { return lookups_; }
    bool definitions() const { return definitions_; }
    bool definition_rows() const { return definition_rows_; }

    // COMMIT handled, or the stream reset: nothing is held back any more.
    void clear() {
        for (Entry* entry : docs_) entry->second.clear(DocFlags::Txn);
        docs_.clear();
        lookups_.clear();
        broadcasts_.clear();
        definitions_ = false;
        definition_rows_ = false;
    }

private:
    std::uint64_t xid_ = 0;
    std::vector<Entry*> docs_;
    std::vector<Lookup> lookups_;
    std::vector<std::uint16_t> broadcasts_;
    bool definitions_ = false;
    bool definition_rows_ = false;
};

}  // namespace docsync
