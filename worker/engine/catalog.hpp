#pragma once
// The definitions in force: the doc queries, their index by name, and each query's statistics for
// the status view. Not thread-safe: the engine calls it under its mutex.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/channel.hpp"
#include "engine/definitions.hpp"
#include "engine/doc.hpp"
#include "engine/engine.hpp"

namespace docsync {

class Catalog {
public:
    Catalog() : defs_(std::make_shared<const Definitions>()) {}

    const Definitions& definitions() const { return *defs_; }
    // Shared with the jobs that run on them: a reload never pulls a query from under a compute.
    const std::shared_ptr<const Definitions>& shared() const { return defs_; }

    // Installs `definitions`, keeping the statistics of the queries it keeps. Returns the names of
    // the queries whose docs may differ now: new ones, and those whose SQL, params, search_path,
    // refusal, fingerprint (what they depend on besides rows: DDL changes it) or watches changed.
    // Throws docsync::Error, changing nothing, when there are more queries or watches than a doc or
    // a plan can index.
    std::vector<std::string> install(Definitions definitions);

    // The index of the query named `name`, or kNoQuery.
    std::uint16_t find(const std::string& name) const;
    // The same, throwing std::out_of_range when there is none (a watch always names a query).
    std::uint16_t at(const std::string& name) const { return index_.at(name); }
    // The index of the query a channel names, or kNoQuery when there is none taking that many params.
    std::uint16_t resolve(const ParsedChannel& channel) const;

    // The statistics of query `query` while it is still the one named `name` (a reload may have
    // moved or dropped it since a job took its index); nullptr otherwise.
    QueryStats* stats_of(std::uint16_t query, const std::string& name);
    const std::vector<QueryStats>& stats() const { return stats_; }

private:
    std::shared_ptr<const Definitions> defs_;
    std::unordered_map<std::string, std::uint16_t> index_;
    std::vector<QueryStats> stats_;  // one per query, in the definitions' order
};

}  // namespace docsync
