// The definitions in force; see catalog.hpp.
#include "engine/catalog.hpp"

#include "common/error.hpp"

namespace docsync {

std::vector<std::string> Catalog::install(Definitions definitions) {
    auto next = std::make_shared<const Definitions>(std::move(definitions));
    if (next->queries.size() >= kNoQuery) throw Error("too many doc queries: at most 65534 are supported");
    if (next->watches.size() >= kNoQuery) throw Error("too many watches: at most 65534 are supported");
    const Definitions& old = *defs_;
    auto watches_of = [](const Definitions& d, const std::string& name) {
        std::vector<Watch> out;
        for (const auto& w : d.watches)
            if (w.query == name) out.push_back(w);
        return out;
    };
    std::vector<std::string> changed;
    for (const auto& q : next->queries) {
        const DocQuery* before = old.find_query(q.name);
        if (!before || before->sql != q.sql || before->params != q.params ||
            before->search_path != q.search_path || before->reader_role != q.reader_role ||
            before->refused != q.refused ||
            before->fingerprint != q.fingerprint || watches_of(old, q.name) != watches_of(*next, q.name))
            changed.push_back(q.name);
    }
    std::vector<QueryStats> stats;
    index_.clear();
    for (std::size_t i = 0; i < next->queries.size(); ++i) {
        const auto& name = next->queries[i].name;
        index_.emplace(name, static_cast<std::uint16_t>(i));
        QueryStats qs;
        qs.name = name;
        for (auto& prior : stats_)
            if (prior.name == name) qs = std::move(prior);
        stats.push_back(std::move(qs));
    }
    stats_ = std::move(stats);
    defs_ = std::move(next);
    return changed;
}

std::uint16_t Catalog::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? kNoQuery : it->second;
}

std::uint16_t Catalog::resolve(const ParsedChannel& channel) const {
    std::uint16_t q = find(channel.query);
    if (q == kNoQuery || defs_->queries[q].params.size() != channel.values.size()) return kNoQuery;
    return q;
}

QueryStats* Catalog::stats_of(std::uint16_t query, const std::string& name) {
    return query < stats_.size() && stats_[query].name == name ? &stats_[query] : nullptr;
}

}  // namespace docsync
